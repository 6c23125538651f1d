"""What every sensor shares: the sink it calls, the protocol it implements, its status records.

A sensor watches something outside the session on its own thread(s) and calls ``sink(change)``
with a :class:`~app.core.runtime.intake.RawChange` for every change it sees; the sink is
``EnvIntake.put`` (thread-safe, never blocks). Coalescing, reading file text and persistence
happen on the loop side (DESIGN.md §3), so a sensor thread never waits on the session.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from app.core.runtime.intake import RawChange
from app.core.types import utc_now

Sink = Callable[[RawChange], object]
"""Takes one change; may return ``False`` when it had to drop it (the intake's inbox was full)."""


class FeedSourceLike(Protocol):
    """A feed to poll: ``app.config.FeedSource`` or :class:`FeedSpec`."""

    @property
    def url(self) -> str: ...

    @property
    def interval_s(self) -> float: ...


class ApiSourceLike(Protocol):
    """A JSON endpoint to poll: ``app.config.ApiSource`` or :class:`ApiSpec`."""

    @property
    def url(self) -> str: ...

    @property
    def interval_s(self) -> float: ...

    @property
    def path(self) -> str: ...


@dataclass(frozen=True)
class FeedSpec:
    """A feed given as plain arguments (tests, benches, the CLI)."""

    url: str
    interval_s: float = 300.0


@dataclass(frozen=True)
class ApiSpec:
    """A JSON endpoint given as plain arguments; ``path`` is dotted, list indices allowed."""

    url: str
    interval_s: float = 60.0
    path: str = ""


@dataclass(frozen=True)
class SourceStatus:
    """The health of one watched source (a folder, a feed, an endpoint) at one moment.

    ``last_ok``/``last_error_at`` are UTC ISO times; ``counts`` holds the sensor's counters
    (polls, errors, entries_seen, events, rescans, ...); ``detail`` anything else worth showing.
    """

    sensor: str  # files | feeds | api
    source: str
    running: bool
    last_ok: str | None = None
    last_error: str | None = None
    last_error_at: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the last attempt succeeded (or nothing failed yet)."""
        return self.last_error is None


@runtime_checkable
class Sensor(Protocol):
    """Started and stopped with the app; ``status()`` returns one record per source."""

    name: str

    def start(self) -> None: ...

    def stop(self, timeout_s: float = 2.0) -> None: ...

    def status(self) -> list[SourceStatus]: ...


class StatusBoard:
    """Thread-safe per-source status: sensor threads write, the UI thread reads snapshots."""

    def __init__(self, sensor: str, sources: list[str]) -> None:
        self._sensor = sensor
        self._lock = threading.Lock()
        self._ok: dict[str, str | None] = {s: None for s in sources}
        self._err: dict[str, tuple[str, str] | None] = {s: None for s in sources}
        self._counts: dict[str, dict[str, int]] = {s: {} for s in sources}
        self._detail: dict[str, dict[str, Any]] = {s: {} for s in sources}
        self.running = False

    def ok(self, source: str) -> None:
        """Record a successful attempt: clears the error."""
        with self._lock:
            self._ok[source] = utc_now()
            self._err[source] = None

    def error(self, source: str, message: str) -> bool:
        """Record a failure; returns True when it differs from the error already recorded (so a
        sensor reports a persisting failure once, not on every poll)."""
        with self._lock:
            previous = self._err.get(source)
            self._err[source] = (message, utc_now())
            self._counts.setdefault(source, {})["errors"] = self._counts[source].get("errors", 0) + 1
            return previous is None or previous[0] != message

    def add(self, source: str, counter: str, n: int = 1) -> None:
        with self._lock:
            counts = self._counts.setdefault(source, {})
            counts[counter] = counts.get(counter, 0) + n

    def set_detail(self, source: str, **values: Any) -> None:
        with self._lock:
            self._detail.setdefault(source, {}).update(values)

    def maximum(self, source: str, key: str, value: float) -> None:
        """Keep the largest ``value`` seen under ``key`` in the source's detail."""
        with self._lock:
            detail = self._detail.setdefault(source, {})
            detail[key] = max(value, detail.get(key, value))

    def detail(self, source: str) -> dict[str, Any]:
        """A copy of the source's detail."""
        with self._lock:
            return dict(self._detail.get(source, {}))

    def snapshot(self) -> list[SourceStatus]:
        """One :class:`SourceStatus` per source, copied under the lock."""
        with self._lock:
            out = []
            for source in self._ok:
                err = self._err.get(source)
                out.append(
                    SourceStatus(
                        sensor=self._sensor,
                        source=source,
                        running=self.running,
                        last_ok=self._ok[source],
                        last_error=err[0] if err else None,
                        last_error_at=err[1] if err else None,
                        counts=dict(self._counts.get(source, {})),
                        detail=dict(self._detail.get(source, {})),
                    )
                )
            return out
