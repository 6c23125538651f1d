"""A local stand-in for a Hugging Face–compatible hub, on 127.0.0.1: what ``hf_hub_download`` asks.

It serves ``/{owner}/{repo}/resolve/{revision}/{file}`` for HEAD and GET with the headers
``huggingface_hub.file_download.get_hf_file_metadata`` reads — ``X-Repo-Commit`` (required),
``ETag`` and ``X-Linked-Etag`` (the file's sha256, as the hub sends for a Git LFS file),
``X-Linked-Size``, ``Content-Length`` — and honours ``Range: bytes=N-`` with a 206 and
``Content-Range``, which is how a download resumes. A file can be served slowly (``rate``: bytes
a second) so a test can kill a download midway, and can claim another size (``claimed_size``:
what a full disk is tested with) and another sha256 (``etag``). Every request's method, path and Range header is kept in
``requests``.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    rate: int = 0  # bytes a second (0: as fast as possible)
    claimed_size: int | None = None  # the size the hub says (None: the real one)
    etag: str | None = None  # the sha256 the hub says (None: the real one)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class LocalHub:
    files: dict[str, HubFile] = field(default_factory=dict)  # "owner/repo/file" → file
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, repo: str, name: str, data: bytes, **kw: object) -> HubFile:
        hub_file = HubFile(data, **kw)  # type: ignore[arg-type]
        self.files[f"{repo}/{name}"] = hub_file
        return hub_file

    def start(self) -> "LocalHub":
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.hub = self  # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, name="local-hub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    """Serves the files of the server's ``hub`` (a ``LocalHub``)."""

    def log_message(self, *_args: object) -> None:
        pass

    def _lookup(self) -> HubFile | None:
        parts = self.path.split("?")[0].strip("/").split("/")
        # owner/repo/resolve/revision/file...
        if len(parts) < 5 or parts[2] != "resolve":
            return None
        return self.server.hub.files.get("/".join(parts[:2] + parts[4:]))

    def _headers(self, f: HubFile, status: int, start: int) -> None:
        size = len(f.data)
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{f.etag or f.sha256}"')
        self.send_header("X-Linked-Etag", f'"{f.etag or f.sha256}"')
        self.send_header("X-Linked-Size", str(f.claimed_size if f.claimed_size is not None else size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()

    def _serve(self, body: bool) -> None:
        self.server.hub.requests.append((self.command, self.path, self.headers.get("Range", "")))
        f = self._lookup()
        if f is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng[6:].split("-")[0].isdigit():
            start = int(rng[6:].split("-")[0])
        self._headers(f, 206 if start else 200, start)
        if body:
            self._send_body(f, start)

    def _send_body(self, f: HubFile, start: int) -> None:
        step = max(1, f.rate // 20) if f.rate else 1 << 16
        try:
            for pos in range(start, len(f.data), step):
                self.wfile.write(f.data[pos:pos + step])
                self.wfile.flush()
                if f.rate:
                    time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._serve(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(body=True)
