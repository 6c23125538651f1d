"""Shared helpers for the sensor tests: an event recorder and a folder-sensor harness on a loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.core.runtime.intake import EnvIntake, RawChange
from app.core.types import EnvEvent
from app.sensors.files import FolderSensor, make_preparer


class Recorder:
    """An async handler that keeps every batch."""

    def __init__(self) -> None:
        self.batches: list[list[EnvEvent]] = []

    async def __call__(self, events: list[EnvEvent]) -> None:
        self.batches.append(events)

    @property
    def events(self) -> list[EnvEvent]:
        return [e for b in self.batches for e in b]


async def wait_until(pred: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


class FolderHarness:
    """FolderSensor → EnvIntake(prepare=read text) → Recorder, on the running loop."""

    def __init__(self, folder: Path, *, coalesce_ms: int = 150, max_file_bytes: int = 1_000, sink_filter: Callable[[RawChange], Any] | None = None, extra_folders: Sequence[Path] = (), **kw: Any) -> None:
        self.rec = Recorder()
        self.intake = EnvIntake(self.rec, coalesce_ms=coalesce_ms, prepare=make_preparer(max_file_bytes))
        self.raw: list[RawChange] = []
        self._filter = sink_filter

        def sink(change: RawChange) -> object:
            if self._filter is not None:
                verdict = self._filter(change)
                if verdict is not True:
                    return verdict  # None: swallowed as if never seen; False: dropped
            self.raw.append(change)
            return self.intake.put(change)

        self.sensor = FolderSensor([folder, *extra_folders], sink, max_file_bytes=max_file_bytes, **kw)
        self.folder = str(folder)

    async def __aenter__(self) -> FolderHarness:
        self.intake.start()
        self.sensor.start()
        await wait_until(lambda: "baseline_files" in self.sensor.status()[0].detail)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sensor.stop()
        await self.intake.stop()

    async def settle(self, quiet_s: float = 0.6, timeout_s: float = 8.0) -> None:
        """Wait until no new event arrived for ``quiet_s`` and nothing is pending."""
        deadline = time.monotonic() + timeout_s
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            s = self.intake.stats()
            n = s.raw + s.events
            if n != last:
                last, since = n, time.monotonic()
            elif s.pending == 0 and s.inbox == 0 and time.monotonic() - since >= quiet_s:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("sensor did not settle")

    def by_path(self) -> dict[str, list[EnvEvent]]:
        out: dict[str, list[EnvEvent]] = {}
        for e in self.rec.events:
            out.setdefault(e.payload.get("path", e.uri), []).append(e)
        return out


class FeedServer:
    """A real http.server on 127.0.0.1 in a thread. ``routes[path]`` is a dict with ``body``
    (bytes), optional ``etag``, ``last_modified``, ``content_type``, ``delay_s``, ``status``,
    ``no_length``; conditional requests get a 304 when the validators match. ``requests`` keeps
    (path, headers) of every request."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.routes: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                route = server.routes.get(self.path)
                if route is None:
                    self.send_error(404)
                    return
                if route.get("delay_s"):
                    time.sleep(route["delay_s"])
                etag, lm = route.get("etag"), route.get("last_modified")
                if (etag and self.headers.get("If-None-Match") == etag) or (
                    not etag and lm and self.headers.get("If-Modified-Since") == lm
                ):
                    self.send_response(304)
                    self.end_headers()
                    return
                body: bytes = route["body"]
                self.send_response(route.get("status", 200))
                self.send_header("Content-Type", route.get("content_type", "application/rss+xml"))
                if etag:
                    self.send_header("ETag", etag)
                if lm:
                    self.send_header("Last-Modified", lm)
                if not route.get("no_length"):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the client stopped reading (size cap): fine
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def feed_server() -> Any:
    server = FeedServer()
    yield server
    server.close()


def rss(*items: tuple[str, str, str], title: str = "Test feed") -> bytes:
    """An RSS 2.0 document with items (guid, title, html description)."""
    from html import escape

    body = "".join(
        f"<item><guid>{escape(g)}</guid><title>{escape(t)}</title><link>http://example.org/{escape(g)}</link>"
        f"<pubDate>Mon, 06 Jan 2025 10:00:00 GMT</pubDate><description>{escape(d)}</description></item>"
        for g, t, d in items
    )
    return (
        f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{escape(title)}</title>'
        f"<link>http://example.org/</link><description>d</description>{body}</channel></rss>"
    ).encode()
