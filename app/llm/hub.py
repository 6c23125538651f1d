"""Downloads of recommended models from a Hugging Face–compatible hub, and their curated list.

``models/catalog.json`` is the short list of recommended chat models by memory size (name, hub
repository and file, size, sha256 where known, licence, what each is good at, the memory it
wants). ``download_model`` fetches one into ``models/`` through ``huggingface_hub`` (the file's
metadata from ``get_hf_file_metadata``, its bytes from ``http_get``) — the only
place the app goes online, and only when the user asks: everywhere else ``HF_HUB_OFFLINE=1``
stays set (``app.config``). The download runs in a child process (``hub_worker.py``, with
``HF_HUB_OFFLINE=0`` in its environment alone), so that:

* progress comes back as the bytes arrive (``on_progress(done, total)``);
* cancelling kills the child; the partial file stays beside ``models/`` (a hidden ``.hub``
  folder), and the next download of the same file resumes it with an HTTP range request;
* free disk space is checked against the hub's size before a byte is written;
* the finished file's sha256 is checked against the catalog's, else against the hub's
  ``X-Linked-Etag`` (the sha256 of a file stored with Git LFS); a mismatch deletes it.

The hub is ``$HF_ENDPOINT`` (or the ``endpoint`` argument), huggingface.co by default; the tests
point it at a local server on 127.0.0.1 that serves the hub's layout. Every failure is a
``ModelError`` with one line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from app.core.errors import ModelError
from app.core.ports import CancelToken
from app.frozen import child_options, python_command
from app.llm.gguf import validate_gguf
from app.llm.models import file_sha256

DEFAULT_ENDPOINT = "https://huggingface.co"
_WORKER = Path(__file__).with_name("hub_worker.py")
_SHA = re.compile(r"^[0-9a-f]{64}$")
Progress = Callable[[int, int], None]  # (bytes so far, total bytes)


class CatalogEntry(BaseModel):
    """One recommended model: where it is on the hub and what it is for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    repo: str  # owner/name on the hub
    file: str  # the .gguf file in the repository
    revision: str = "main"
    size_bytes: int  # as listed (the hub's own size is what free space is checked against)
    sha256: str = ""  # "" when not listed: the hub's X-Linked-Etag is checked instead
    parameters: str  # "1.7B"
    quantisation: str
    memory_gb: float  # memory it wants to run with a 4k context
    licence: str
    good_at: str


def load_catalog(path: str | os.PathLike[str]) -> list[CatalogEntry]:
    """The curated list (a JSON list of entries); ``ModelError`` naming the file when it is bad."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
        return [CatalogEntry.model_validate(item) for item in raw]
    except (OSError, ValueError, ValidationError, TypeError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else " ".join(str(exc).split())[:160]
        raise ModelError(f"the model catalog {p} cannot be read ({first}); restore it from the repository") from None


def endpoint_of(endpoint: str | None = None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_reachable(endpoint: str | None = None, timeout_s: float = 3.0) -> str | None:
    """None when the hub answers (any HTTP status), else one line saying the machine is offline."""
    import urllib.error
    import urllib.request

    url = endpoint_of(endpoint)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"Offline: {url} cannot be reached ({' '.join(str(reason).split())[:80]}); downloads need a connection"


def staging_dir(models_dir: Path, entry: CatalogEntry) -> Path:
    """Where a download of ``entry`` is written (and its partial file kept) until it is verified."""
    return Path(models_dir) / ".hub" / entry.repo.replace("/", "--")


class _Worker:
    """The child process and the events it printed."""

    def __init__(self, request: dict[str, str], endpoint: str) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": endpoint, "HF_HUB_DISABLE_TELEMETRY": "1",
               "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
               "PYTHONIOENCODING": "utf-8"}
        self.proc = subprocess.Popen(python_command(str(_WORKER), json.dumps(request)), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, text=True,
                                     **child_options())

    def events(self) -> Iterator[dict[str, object]]:
        """The worker's events as it prints them, until it ends."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def _expected_sha(entry: CatalogEntry, etag: object) -> str:
    if entry.sha256:
        return entry.sha256
    tag = str(etag or "").strip('"').lower()
    return tag if _SHA.match(tag) else ""


def _failure(entry: CatalogEntry, event: dict[str, object], endpoint: str) -> ModelError:
    kind, message = event.get("kind"), event.get("message", "")
    if kind == "offline":
        return ModelError(f"cannot download {entry.name}: {endpoint} cannot be reached ({message}); "
                          "check the connection")
    if kind == "missing":
        return ModelError(f"cannot download {entry.name}: {message}; the catalog entry is out of date")
    if kind == "space":
        return ModelError(f"not enough free disk space for {entry.name} ({message}); free some space first")
    return ModelError(f"downloading {entry.name} failed ({message}); try again: it resumes where it stopped")


def download_model(entry: CatalogEntry, models_dir: str | os.PathLike[str], *, endpoint: str | None = None,
                   on_progress: Progress | None = None, cancel: CancelToken | None = None) -> Path:
    """Download ``entry`` into ``models_dir`` (module doc); return the verified file's path.

    Blocking (minutes for a large file): run it off the UI thread. ``cancel`` stops it within a
    fraction of a second (the child is killed; what arrived is kept for a resume) and raises
    ``ModelError`` saying so. A file already in place with the expected hash is not fetched again.
    """
    root = Path(models_dir)
    target = root / entry.file
    if target.is_file() and entry.sha256 and file_sha256(target) == entry.sha256:
        return target
    url = endpoint_of(endpoint)
    staging = staging_dir(root, entry)
    worker = _Worker({"repo": entry.repo, "file": entry.file, "revision": entry.revision,
                      "local_dir": str(staging), "endpoint": url}, url)
    watcher = _cancel_watcher(worker, cancel)
    done_path, etag = "", None
    try:
        for event in worker.events():
            kind = event.get("event")
            if kind == "meta":
                etag = event.get("etag")
            elif kind == "progress" and on_progress is not None:
                on_progress(int(event.get("done") or 0), int(event.get("total") or 0))  # type: ignore[call-overload]
            elif kind == "error":
                raise _failure(entry, event, url)
            elif kind == "done":
                done_path = str(event.get("path"))
        worker.proc.wait()
    finally:
        worker.kill()
        watcher.set()
    if cancel is not None and cancel.cancelled:
        raise ModelError(f"download of {entry.name} cancelled; starting it again resumes where it stopped")
    if not done_path:
        raise ModelError(f"downloading {entry.name} stopped (status {worker.proc.returncode}); try again: it resumes")
    return _verify_and_place(entry, Path(done_path), target, _expected_sha(entry, etag))


def _cancel_watcher(worker: _Worker, cancel: CancelToken | None) -> threading.Event:
    """A thread that kills the worker once ``cancel`` is set; set the returned event to end it."""
    finished = threading.Event()
    if cancel is None:
        return finished

    def watch() -> None:
        while not finished.wait(0.1):
            if cancel.cancelled:
                worker.kill()
                return

    threading.Thread(target=watch, name="pcm-download-cancel", daemon=True).start()
    return finished


def _verify_and_place(entry: CatalogEntry, fetched: Path, target: Path, expected: str) -> Path:
    """Check ``fetched``'s sha256 (when one is known) and GGUF header, then move it to ``target``."""
    if not expected:
        fetched.unlink(missing_ok=True)
        raise ModelError(f"{entry.name} was downloaded but no checksum is known for it (no sha256 in the catalog, "
                         "and the hub sent none); refused")
    actual = file_sha256(fetched)
    if actual != expected:
        fetched.unlink(missing_ok=True)
        raise ModelError(f"checksum mismatch for {entry.name}: expected sha256 {expected[:12]}…, got {actual[:12]}…; "
                         "the file was deleted, nothing installed")
    try:
        validate_gguf(fetched)
    except ModelError:
        fetched.unlink(missing_ok=True)
        raise
    os.replace(fetched, target)
    return target
