"""A hostile OpenAI-compatible endpoint on 127.0.0.1 for the provider deadline tests: the first
part of the request path names how it misbehaves (``http://127.0.0.1:PORT/<mode>/v1``).

Modes: ``silent`` (reads the request, never answers), ``headers`` (answers the headers, then
nothing), ``keepalive`` (SSE comments forever), ``drip`` (one byte of a chunk every 0.2 s: a read
timeout restarts with each), ``endless`` (tokens without a finish reason, fast, forever),
``trickle`` (a token every 0.3 s forever), ``stall`` (three tokens, then SSE comments forever),
``finished-open`` (a whole answer with its finish
reason, then the connection stays open without ``[DONE]``), ``echo-key`` (a normal answer whose
text repeats the Authorization header it was sent)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("silent", "headers", "keepalive", "drip", "endless", "trickle", "stall", "finished-open", "echo-key")


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "hostile",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the models list (availability check)
        body = json.dumps({"object": "list", "data": [{"id": "hostile", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        mode = self.path.strip("/").split("/")[0]
        try:
            self._answer(mode)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.flush()

    def _forever(self, piece: bytes, every_s: float) -> None:
        while not self.server.stopping.is_set():
            self.wfile.write(piece)
            self.wfile.flush()
            time.sleep(every_s)

    def _answer(self, mode: str) -> None:
        if mode == "silent":
            self.server.stopping.wait()
            return
        self._start()
        if mode == "headers":
            self.server.stopping.wait()
        elif mode == "keepalive":
            self._forever(b": keep-alive\n\n", 0.1)
        elif mode == "drip":
            for byte in _chunk("never whole") * 1000:
                if self.server.stopping.is_set():
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
        elif mode == "endless":
            self._forever(_chunk(" more"), 0.002)
        elif mode == "trickle":
            self._forever(_chunk(" slow"), 0.3)
        elif mode == "stall":
            self.wfile.write(_chunk("one") + _chunk(" two") + _chunk(" three"))
            self._forever(b": keep-alive\n\n", 0.1)
        elif mode == "finished-open":
            self.wfile.write(_chunk("all said") + _chunk(None, "stop"))
            self.wfile.flush()
            self.server.stopping.wait()
        elif mode == "echo-key":
            self.wfile.write(_chunk(f"you sent {self.headers.get('Authorization', '')}") + _chunk(None, "stop")
                             + b"data: [DONE]\n\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stopping: threading.Event


@contextmanager
def hostile_server() -> Iterator[str]:
    """Serve on a free loopback port; yields ``http://127.0.0.1:PORT`` (add ``/<mode>/v1``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.stopping = threading.Event()
    thread = threading.Thread(target=server.serve_forever, name="hostile endpoint", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
