"""Fetching bytes with caps, and the polling loop shared by the feed and API sensors.

:func:`fetch_bytes` reads an http(s) URL, a ``file://`` URL or a plain local path as bytes, with a
size cap (at most ``max_bytes + 1`` bytes are ever read) and a time cap, and supports conditional
requests: an ETag / Last-Modified pair from the previous fetch is sent back and a 304 comes back
as ``not_modified``. Local files get the same treatment from their size and mtime.
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import stat
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.errors import CoreError

log = logging.getLogger(__name__)

USER_AGENT = "pcm-canvas/0.1 (+offline desktop; sensors)"
_CHUNK = 64 * 1024
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

PollFn = Callable[[int], None]


if TYPE_CHECKING:
    from app.sensors.base import SourceStatus, StatusBoard


class FetchError(CoreError):
    """A fetch failed. ``reason`` is a short code: too_large, timeout, http, network, missing,
    unsupported; ``str(err)`` is one line meant for the status panel."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Validators:
    """What the previous successful fetch returned, sent back to make the next one conditional."""

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class FetchResult:
    """The outcome of one fetch: ``body`` is None when the source was not modified."""

    body: bytes | None
    validators: Validators
    status: int = 200
    content_type: str = ""
    request_headers: tuple[tuple[str, str], ...] = ()

    @property
    def not_modified(self) -> bool:
        return self.body is None


def is_local(url: str) -> bool:
    """True for ``file://`` URLs and plain paths (anything without an http(s) scheme)."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    return scheme == "file" or scheme == "" or (len(scheme) == 1 and os.name == "nt")  # C:\...


def local_path(url: str) -> Path:
    """The filesystem path of a ``file://`` URL or a plain path."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() == "file":
        return Path(urllib.request.url2pathname(parts.path))
    return Path(url).expanduser()


def fetch_bytes(
    url: str, *, max_bytes: int, timeout_s: float, validators: Validators | None = None
) -> FetchResult:
    """Fetch ``url`` as bytes; raises :class:`FetchError`. Blocking: call it on a sensor thread."""
    if is_local(url):
        return _fetch_local(local_path(url), max_bytes, validators)
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError("unsupported", f"unsupported URL scheme {scheme!r}")
    return _fetch_http(url, max_bytes, timeout_s, validators)


def _fetch_local(path: Path, max_bytes: int, validators: Validators | None) -> FetchResult:
    try:
        # Non-blocking, then checked on the open file: a FIFO put in the feed's place must never
        # hold the thread waiting for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise FetchError("missing", f"file not found: {path}") from None
    except OSError as exc:
        raise FetchError("network", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, device or socket)"
            raise FetchError("unsupported", f"{path} is {what}, not a feed file")
        # A local file's "ETag" is its mtime and size: unchanged → not modified, no read, no parse.
        tag = Validators(etag=f'"{st.st_mtime_ns:x}-{st.st_size:x}"')
        if validators is not None and validators.etag == tag.etag:
            return FetchResult(None, tag, status=304)
        if st.st_size > max_bytes:
            raise FetchError("too_large", f"{path} is {st.st_size} bytes (limit {max_bytes})")
        body = _read_fd(fd, max_bytes + 1)
    except OSError as exc:
        raise FetchError("network", f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(body) > max_bytes:  # grew between stat and read
        raise FetchError("too_large", f"{path} is over {max_bytes} bytes")
    return FetchResult(body, tag)


def _read_fd(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit and (chunk := os.read(fd, min(_CHUNK, limit - total))):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


class _Watchdog:
    """Shuts down every socket of one fetch at its deadline, so that nothing on the wire — a
    server trickling its TLS handshake, its headers or its body a byte at a time, each within
    the socket timeout — can hold the fetch past it. ``fired`` says it did."""

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._socks.append(sock)
            if self.fired:
                _shut(sock)
        return sock

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._socks:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watched(watchdog: _Watchdog, handler: type[urllib.request.AbstractHTTPHandler]) -> urllib.request.BaseHandler:
    """An instance of ``handler`` (urllib's HTTP or HTTPS handler) whose connections' sockets are
    handed to ``watchdog``."""

    class Watched(handler):  # type: ignore[valid-type, misc]
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            def connection(*args: Any, **kw: Any) -> Any:
                conn = http_class(*args, **kw)
                conn._create_connection = lambda *a, **k: watchdog.watch(socket.create_connection(*a, **k))
                return conn

            return super().do_open(connection, req, **kwargs)

    return Watched()


def _opener(url: str, watchdog: _Watchdog) -> urllib.request.OpenerDirector:
    handlers = [_watched(watchdog, urllib.request.HTTPHandler), _watched(watchdog, urllib.request.HTTPSHandler)]
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host in _LOOPBACK:  # a proxy from the environment must never see loopback traffic
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _read_body(resp: http.client.HTTPResponse, url: str, max_bytes: int, timeout_s: float, deadline: float) -> bytes:
    """The response body, at most ``max_bytes`` and read before ``deadline`` (else ``FetchError``)."""
    length = resp.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > max_bytes:
        raise FetchError("too_large", f"{url} announces {length} bytes (limit {max_bytes})")
    chunks: list[bytes] = []
    total = 0
    while True:
        # read1 returns what one socket read gives, so the deadline is checked between
        # reads and a server trickling bytes cannot hold the thread past the time cap.
        chunk = resp.read1(_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise FetchError("too_large", f"{url} sent more than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise FetchError("timeout", f"{url} took longer than {timeout_s:g} s")
    return b"".join(chunks)


def _fetch_http(url: str, max_bytes: int, timeout_s: float, validators: Validators | None) -> FetchResult:
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if validators is not None and validators.etag:
        headers["If-None-Match"] = validators.etag
    if validators is not None and validators.last_modified:
        headers["If-Modified-Since"] = validators.last_modified
    request = urllib.request.Request(url, headers=headers)
    sent = tuple(sorted(headers.items()))
    deadline = time.monotonic() + timeout_s
    watchdog = _Watchdog(deadline)
    try:
        with _opener(url, watchdog).open(request, timeout=timeout_s) as resp:
            body = _read_body(resp, url, max_bytes, timeout_s, deadline)
            if watchdog.fired:  # the body may look complete: the deadline cut it
                raise FetchError("timeout", f"{url} took longer than {timeout_s:g} s")
            got = Validators(resp.headers.get("ETag"), resp.headers.get("Last-Modified"))
            return FetchResult(body, got, resp.status, resp.headers.get("Content-Type", ""), sent)
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            kept = validators or Validators()
            got = Validators(exc.headers.get("ETag") or kept.etag, exc.headers.get("Last-Modified") or kept.last_modified)
            return FetchResult(None, got, 304, "", sent)
        raise FetchError("http", f"{url}: HTTP {exc.code} {exc.reason}") from None
    except FetchError:
        raise
    except Exception as exc:  # noqa: BLE001 - every other failure of the fetch is one FetchError
        raise _failure(exc, url, timeout_s, watchdog.fired) from None
    finally:
        watchdog.cancel()


def _failure(exc: Exception, url: str, timeout_s: float, expired: bool) -> FetchError:
    """The ``FetchError`` for a fetch that raised ``exc`` (``expired``: the deadline had passed)."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if expired or isinstance(reason, (TimeoutError, socket.timeout)):
        return FetchError("timeout", f"{url} took longer than {timeout_s:g} s")
    if isinstance(exc, http.client.HTTPException):
        return FetchError("network", f"{url}: the server broke off the response ({type(exc).__name__})")
    return FetchError("network", f"{url}: {reason}")


class PollingThreads:
    """One daemon thread per source, each calling ``poll(index)`` then waiting its interval.

    ``stop()`` sets an Event every wait is on, so idle threads end at once; a thread inside a
    fetch ends when the fetch's time cap expires (threads are daemons, so exit never waits).
    """

    def __init__(self, name: str, intervals: Sequence[float]) -> None:
        self._name = name
        self._intervals = list(intervals)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self, poll: PollFn) -> None:
        """Start one thread per source; the first poll happens at once."""
        if self._threads:
            return
        self._stop.clear()
        for index, interval in enumerate(self._intervals):
            thread = threading.Thread(
                target=self._run, args=(index, interval, poll), name=f"pcm-{self._name}-{index}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _run(self, index: int, interval: float, poll: PollFn) -> None:
        while not self._stop.is_set():
            try:
                poll(index)
            except Exception:  # poll reports its own errors; this is the last guard for bugs
                log.exception("%s poller %d failed", self._name, index)
            if self._stop.wait(interval):
                break

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask every thread to end and join them within ``timeout_s`` in total."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]


class PolledSensor:
    """The start/stop/status of a sensor that polls each of its sources on its own thread.

    A subclass sets ``name``, ``_board`` (a ``StatusBoard``) and ``_threads`` (``PollingThreads``)
    and defines ``poll_once(index)``; each source is polled at once, then every ``interval_s``.
    """

    name: str
    _board: "StatusBoard"
    _threads: PollingThreads

    def poll_once(self, index: int) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._board.running = True
        self._threads.start(self.poll_once)

    def stop(self, timeout_s: float = 2.0) -> None:
        self._threads.stop(timeout_s)
        self._board.running = False

    def status(self) -> list["SourceStatus"]:
        """Per source: last_ok, last_error and the counters (polls, not_modified, errors, ...)."""
        return self._board.snapshot()
