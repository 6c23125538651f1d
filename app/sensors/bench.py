"""Benchmark: a burst of file writes in a watched folder, through FolderSensor → EnvIntake.

``measure_file_burst`` answers the acceptance questions of issue 5 for the file sensor: how many
raw changes became how many events (coalescing), how long until the pipeline is quiet again, how
much the event loop lagged meanwhile (a 5 ms repeating probe, compared with the same probe on the
idle loop measured in the same run, DESIGN.md §6), and whether memory stayed bounded (RSS from
/proc/self/statm sampled by the probe; the intake's own tracemalloc peak measured in a second,
watchdog-free replay of the same number of changes, because tracing the whole burst would distort
the timings). Run it as ``python -m app.sensors.bench [n_files]``; it prints JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.core.runtime.intake import EnvIntake, RawChange
from app.core.types import EnvEvent
from app.sensors.files import FolderSensor, make_preparer

_PROBE_S = 0.005
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _summary_ms(lags: list[float]) -> dict[str, float]:
    return {
        "p50": round(_pct(lags, 0.5) * 1000, 2),
        "p95": round(_pct(lags, 0.95) * 1000, 2),
        "max": round(max(lags, default=0.0) * 1000, 2),
        "samples": len(lags),
    }


class _LagProbe:
    """A call_later chain every 5 ms recording how late each call ran; samples RSS every 10th."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.lags: list[float] = []
        self.rss_peak = rss_bytes()
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._n = 0

    def start(self) -> None:
        self._due = self._loop.time() + _PROBE_S
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        self.lags.append(max(0.0, self._loop.time() - self._due))
        self._n += 1
        if self._n % 10 == 0:
            self.rss_peak = max(self.rss_peak, rss_bytes())
        self._due = self._loop.time() + _PROBE_S
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> list[float]:
        if self._handle is not None:
            self._handle.cancel()
        lags, self.lags = self.lags, []
        return lags


def _write_burst(root: Path, n_files: int, n_subfolders: int) -> float:
    """Create ``n_files`` (a quarter in subfolders made during the burst) and modify each once,
    right after the next file is created; returns the seconds it took."""
    t0 = time.perf_counter()
    previous: Path | None = None
    for i in range(n_files):
        folder = root / f"sub{(i // 4) % n_subfolders:02d}" if i % 4 == 0 and n_subfolders else root
        if folder is not root:
            folder.mkdir(exist_ok=True)
        path = folder / f"note_{i:05d}.txt"
        path.write_text(f"note {i}\nsome text that a person might keep in a watched folder\n", encoding="utf-8")
        if previous is not None:
            with previous.open("a", encoding="utf-8") as fh:
                fh.write("edited\n")
        previous = path
    if previous is not None:
        with previous.open("a", encoding="utf-8") as fh:
            fh.write("edited\n")
    return time.perf_counter() - t0


async def _burst(
    n_files: int, coalesce_ms: int, handler: Callable[[list[EnvEvent]], Awaitable[None]] | None, n_subfolders: int,
    idle_s: float, quiet_s: float, timeout_s: float,
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    counts = {"events": 0, "batches": 0}
    last_event_at = [0.0]

    async def counting(events: list[EnvEvent]) -> None:
        counts["events"] += len(events)
        counts["batches"] += 1
        last_event_at[0] = time.perf_counter()
        if handler is not None:
            await handler(events)

    # The bare baseline for the writer: the same burst into a folder nobody watches.
    with tempfile.TemporaryDirectory(prefix="pcm-bench-bare-") as tmp:
        write_bare_s = await asyncio.to_thread(_write_burst, Path(tmp), n_files, n_subfolders)

    with tempfile.TemporaryDirectory(prefix="pcm-bench-") as tmp:
        root = Path(tmp)
        intake = EnvIntake(counting, coalesce_ms=coalesce_ms, prepare=make_preparer(1_000_000))
        sensor = FolderSensor([root], intake.put, ignore_patterns=["*.tmp"], refresh_quiet_s=3600.0)
        intake.start()
        sensor.start()
        probe = _LagProbe(loop)
        probe.start()
        await asyncio.sleep(idle_s)  # the bare baseline: the same probe on the idle loop
        idle_lags = probe.stop()

        rss_before = rss_bytes()
        probe = _LagProbe(loop)
        probe.start()
        t0 = time.perf_counter()
        writer_result: dict[str, float] = {}
        writer = threading.Thread(target=lambda: writer_result.update(s=_write_burst(root, n_files, n_subfolders)))
        writer.start()
        while writer.is_alive():
            await asyncio.sleep(0.05)
        writer.join()
        # Quiet: nothing waiting, no new raw change or event for quiet_s (a rescan may follow).
        last_n, since = -1, time.perf_counter()
        deadline = time.perf_counter() + timeout_s
        while time.perf_counter() < deadline:
            s = intake.stats()
            n = s.raw + s.events
            if n != last_n:
                last_n, since = n, time.perf_counter()
            elif s.inbox == 0 and s.pending == 0 and time.perf_counter() - since >= quiet_s:
                break
            await asyncio.sleep(0.02)
        burst_lags = probe.stop()
        rss_peak = max(probe.rss_peak, rss_bytes())
        sensor.stop()
        await intake.stop()
        rss_after = rss_bytes()
        stats = intake.stats()
        folder_status = sensor.status()[0]

    quiesce_s = (last_event_at[0] - t0) if last_event_at[0] else 0.0
    burst = _summary_ms(burst_lags)
    idle = _summary_ms(idle_lags)
    return {
        "n_files": n_files,
        "coalesce_ms": coalesce_ms,
        "raw_changes": stats.raw,
        "events": counts["events"],
        "ratio_raw_per_event": round(stats.ratio, 2),
        "batches": counts["batches"],
        "dropped": stats.dropped,
        "forced_early": stats.forced,
        "cancelled": stats.cancelled,
        "rescans": stats.rescans,
        "overflows": folder_status.counts.get("overflows", 0),
        "max_pending_seen": stats.max_pending_seen,
        "max_inbox_seen": stats.max_inbox_seen,
        "write_s": round(writer_result.get("s", 0.0), 3),
        "write_unwatched_s": round(write_bare_s, 3),
        "quiesce_s": round(quiesce_s, 3),
        "loop_lag_ms": burst,
        "idle_loop_lag_ms": idle,
        "lag_p95_vs_idle": round(burst["p95"] / idle["p95"], 2) if idle["p95"] else None,
        "rss_mb": {
            "before": round(rss_before / 2**20, 1),
            "peak": round(rss_peak / 2**20, 1),
            "after": round(rss_after / 2**20, 1),
        },
    }


async def _intake_replay(n_changes: int, n_keys: int, coalesce_ms: int) -> dict[str, Any]:
    """The intake alone under tracemalloc: ``n_changes`` puts over ``n_keys`` keys from a thread."""
    async def discard(_events: list[EnvEvent]) -> None:
        return None

    intake = EnvIntake(discard, coalesce_ms=coalesce_ms)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    intake.start()

    per_key = max(1, n_changes // max(1, n_keys))

    def produce() -> None:
        # The burst's pattern: each key created, then modified, a few changes close together.
        for i in range(n_keys):
            key = f"/bench/note_{i:05d}.txt"
            for j in range(per_key):
                intake.put(RawChange(key=key, kind="file", source="/bench", uri=key, change="created" if j == 0 else "modified"))

    worker = threading.Thread(target=produce)
    worker.start()
    while worker.is_alive():
        await asyncio.sleep(0.01)
    await intake.stop()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    s = intake.stats()
    return {
        "changes": s.raw,
        "events": s.events,
        "tracemalloc_peak_mb": round((peak - base) / 2**20, 2),
        "max_pending_seen": s.max_pending_seen,
        "max_inbox_seen": s.max_inbox_seen,
        "dropped": s.dropped,
    }


def measure_file_burst(
    n_files: int = 10_000,
    *,
    coalesce_ms: int = 500,
    handler: Callable[[list[EnvEvent]], Awaitable[None]] | None = None,
    n_subfolders: int = 20,
    idle_s: float = 1.0,
    quiet_s: float = 1.5,
    timeout_s: float = 120.0,
    trace_intake: bool = True,
) -> dict[str, Any]:
    """Write ``n_files`` files (create + one modify each) into a watched temp folder and return
    the figures: raw changes, events, ratio, batches, write and quiesce times, loop lag
    p50/p95/max during the burst and on the idle loop, RSS before/peak/after, and (with
    ``trace_intake``) the intake's tracemalloc peak for the same number of changes.
    ``handler`` (async, takes a list of EnvEvent) is called after counting, e.g. to store them."""
    result = asyncio.run(_burst(n_files, coalesce_ms, handler, n_subfolders, idle_s, quiet_s, timeout_s))
    if trace_intake:
        result["intake_replay"] = asyncio.run(_intake_replay(max(1, result["raw_changes"]), n_files, coalesce_ms))
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 10_000
    print(json.dumps(measure_file_burst(n), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
