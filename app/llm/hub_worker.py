"""The download worker of ``app.llm.hub``: one file from a Hugging Face–compatible hub, in its own
process (a cancel is a kill; the partial file stays and the next run resumes it: the file's
metadata comes from ``huggingface_hub.get_hf_file_metadata``, its bytes from ``http_get`` with a
range request from what the partial file holds — ``hf_hub_download`` itself starts every process's
download from zero).

    python hub_worker.py '{"repo": ..., "file": ..., "revision": ..., "local_dir": ..., "endpoint": ...}'

Writes one JSON object a line on stdout: ``{"event": "meta", "size", "etag", "commit"}``, then
``{"event": "progress", "done", "total"}`` as bytes arrive, then ``{"event": "done", "path"}``, or
``{"event": "error", "kind", "message"}`` (kind: offline | missing | space | failed). Standard
library and ``huggingface_hub`` only; the parent sets ``HF_HUB_OFFLINE=0`` for this process alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

CHUNK_BYTES = 1 << 20
SPACE_MARGIN = 64 << 20  # free space kept beyond the file, so the disk is never filled to the last byte


def say(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def progress_bar_class(total_hint: int) -> type:
    """A tqdm for ``hf_hub_download`` that reports bytes on stdout at most 5 times a second."""
    from huggingface_hub.utils import tqdm

    class Reporting(tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs["disable"] = True  # no terminal bar: the parent draws its own
            super().__init__(*args, **kwargs)
            self.done = int(kwargs.get("initial") or 0)  # type: ignore[call-overload]
            self.size = int(kwargs.get("total") or total_hint)  # type: ignore[call-overload]
            self.last = 0.0
            say(event="progress", done=self.done, total=self.size)

        def update(self, n: float | None = 1) -> bool | None:
            self.done += int(n or 0)
            now = time.monotonic()
            if now - self.last >= 0.2 or self.done >= self.size:
                self.last = now
                say(event="progress", done=self.done, total=self.size)
            return super().update(n)

    return Reporting


def main(request: dict[str, str]) -> int:
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    # Bytes are read (and written to the partial file, and reported) 1 MB at a time, not 10: finer
    # progress on a slow line, and a kill loses at most 1 MB of what arrived.
    constants.DOWNLOAD_CHUNK_SIZE = CHUNK_BYTES
    repo, file, revision = request["repo"], request["file"], request.get("revision") or "main"
    endpoint, local_dir = request.get("endpoint") or None, request["local_dir"]
    try:
        meta = get_hf_file_metadata(hf_hub_url(repo, file, revision=revision, endpoint=endpoint), timeout=10,
                                    endpoint=endpoint)
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        say(event="error", kind="missing", message=f"{repo} has no {file} ({type(exc).__name__})")
        return 3
    except Exception as exc:  # noqa: BLE001 - no connection, DNS, TLS, timeout: one line
        say(event="error", kind="offline", message=" ".join(str(exc).split())[:200] or type(exc).__name__)
        return 2
    say(event="meta", size=meta.size, etag=meta.etag, commit=meta.commit_hash)
    os.makedirs(local_dir, exist_ok=True)
    # One partial file per version of the file (its etag): a new version never continues an old one.
    part = os.path.join(local_dir, f"{os.path.basename(file)}.{(meta.etag or 'unknown')[:16]}.part")
    have = os.path.getsize(part) if os.path.isfile(part) else 0
    free = shutil.disk_usage(local_dir).free
    if meta.size is not None and meta.size - have + SPACE_MARGIN > free:
        say(event="error", kind="space", message=f"needs {meta.size - have} bytes and {SPACE_MARGIN} to spare, "
                                                 f"{free} free")
        return 4
    try:
        fetch(meta, part, have)
    except Exception as exc:  # noqa: BLE001 - reported as one line; the partial file stays for a resume
        say(event="error", kind="failed", message=" ".join(str(exc).split())[:200] or type(exc).__name__)
        return 5
    done = os.path.join(local_dir, os.path.basename(file))
    os.replace(part, done)
    say(event="done", path=done)
    return 0


def fetch(meta: object, part: str, have: int) -> None:
    """Append the rest of the file to ``part`` (``huggingface_hub``'s ``http_get`` with a range
    request from ``have`` bytes on; it starts over by itself when the server ignores the range)."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    size = getattr(meta, "size", None)
    with open(part, "r+b" if have else "wb") as out:
        out.seek(have)
        out.truncate()
        http_get(str(getattr(meta, "location")), out, resume_size=have, expected_size=size,
                 headers={**build_hf_headers(token=False), "Accept-Encoding": "identity"},
                 tqdm_class=progress_bar_class(size or 0))


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
