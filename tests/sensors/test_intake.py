"""EnvIntake: coalescing per key, batching, bounded memory under a burst, flush on stop, thread safety."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

from app.core.runtime.intake import EnvIntake, RawChange, merge_change
from app.core.types import EnvEvent


def _file(path: str, change: str, content: str = "", **payload: object) -> RawChange:
    return RawChange(key=path, kind="file", source="/w", uri=path, change=change, content=content, payload=dict(payload))


class Recorder:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.batches: list[list[EnvEvent]] = []
        self.delay_s = delay_s

    async def __call__(self, events: list[EnvEvent]) -> None:
        self.batches.append(events)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)

    @property
    def events(self) -> list[EnvEvent]:
        return [e for b in self.batches for e in b]


def test_merge_rules() -> None:
    assert merge_change("created", "modified") == "created"
    assert merge_change("created", "deleted") is None
    assert merge_change("modified", "deleted") == "deleted"
    assert merge_change("deleted", "created") == "modified"
    assert merge_change("modified", "modified") == "modified"


def test_changes_of_one_key_within_the_window_become_one_event() -> None:
    rec = Recorder()

    async def main() -> float:
        intake = EnvIntake(rec, coalesce_ms=100)
        intake.start()
        t0 = time.monotonic()
        intake.put(_file("/w/a.txt", "created", "v1"))
        intake.put(_file("/w/a.txt", "modified", "v2"))
        intake.put(_file("/w/b.txt", "modified", "b"))
        intake.put(_file("/w/a.txt", "modified", "v3"))
        intake.put(_file("/w/tmp.txt", "created"))
        intake.put(_file("/w/tmp.txt", "deleted"))
        while not rec.batches:
            await asyncio.sleep(0.01)
        waited = time.monotonic() - t0
        await intake.stop()
        stats = intake.stats()
        assert stats.raw == 6 and stats.events == 2 and stats.cancelled == 1
        return waited

    waited = asyncio.run(main())
    assert waited >= 0.09  # nothing leaves before the window ends
    by_uri = {e.uri: e for e in rec.events}
    assert set(by_uri) == {"/w/a.txt", "/w/b.txt"}
    a = by_uri["/w/a.txt"]
    assert a.payload["change"] == "created" and a.payload["raw_changes"] == 3 and a.content == "v3"
    assert by_uri["/w/b.txt"].payload["change"] == "modified"


def test_a_change_after_the_window_is_a_new_event_and_rename_carries_the_source() -> None:
    rec = Recorder()

    async def main() -> None:
        intake = EnvIntake(rec, coalesce_ms=50)
        intake.start()
        intake.put(_file("/w/a.txt", "modified"))
        await asyncio.sleep(0.15)
        intake.put(_file("/w/a.txt", "modified"))
        intake.put(_file("/w/new.part", "created"))
        intake.put(_file("/w/new.txt", "moved", src_key="/w/new.part", src_path="/w/new.part"))
        await intake.stop()

    asyncio.run(main())
    assert [e.payload["change"] for e in rec.events if e.uri == "/w/a.txt"] == ["modified", "modified"]
    moved = [e for e in rec.events if e.uri.startswith("/w/new")]
    assert len(moved) == 1 and moved[0].uri == "/w/new.txt"
    assert moved[0].payload["change"] == "created" and moved[0].payload["raw_changes"] == 2


def test_batches_are_capped_and_stop_flushes_everything_pending() -> None:
    rec = Recorder()

    async def main() -> None:
        intake = EnvIntake(rec, coalesce_ms=60_000, max_batch=7)
        intake.start()
        for i in range(30):
            intake.put(_file(f"/w/{i}.txt", "created"))
        await asyncio.sleep(0.05)
        assert rec.batches == []  # the window is a minute: nothing yet
        await intake.stop()  # ... but stop flushes without waiting for it
        assert intake.put(_file("/w/late.txt", "created")) is False

    asyncio.run(main())
    assert len(rec.events) == 30
    assert max(len(b) for b in rec.batches) == 7 and len(rec.batches) == 5


def test_a_burst_keeps_memory_bounded_and_loses_nothing_that_was_accepted() -> None:
    rec = Recorder(delay_s=0.002)  # a handler slower than the producer
    samples: list[tuple[int, int]] = []

    async def main() -> None:
        intake = EnvIntake(rec, coalesce_ms=100, max_batch=100, max_pending=500, max_inbox=4_000, drain_chunk=250)
        intake.start()
        accepted = 0

        def produce() -> None:
            nonlocal accepted
            for i in range(12_000):
                # every path twice: created then modified
                for change in ("created", "modified"):
                    if intake.put(_file(f"/w/{i}.txt", change)):
                        accepted += 1

        worker = threading.Thread(target=produce)
        worker.start()
        while worker.is_alive():
            s = intake.stats()
            samples.append((s.pending, s.inbox))
            await asyncio.sleep(0.005)
        worker.join()
        await intake.stop()
        s = intake.stats()
        assert s.raw == accepted and s.raw + s.dropped == 24_000
        assert s.max_pending_seen <= 500 and s.max_inbox_seen <= 4_000
        # every accepted change is in exactly one emitted event
        assert sum(e.payload["raw_changes"] for e in rec.events) == accepted

    asyncio.run(main())
    assert all(p <= 500 and q <= 4_000 for p, q in samples)
    assert max(len(b) for b in rec.batches) <= 100


def test_put_is_thread_safe_from_many_threads() -> None:
    rec = Recorder()

    async def main() -> None:
        intake = EnvIntake(rec, coalesce_ms=20)
        intake.start()

        def produce(t: int) -> None:
            for i in range(2_000):
                intake.put(_file(f"/w/{t}/{i % 100}.txt", "modified"))

        threads = [threading.Thread(target=produce, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        while any(th.is_alive() for th in threads):
            await asyncio.sleep(0.01)
        await intake.stop()
        s = intake.stats()
        assert s.raw == 16_000 and s.dropped == 0
        assert sum(e.payload["raw_changes"] for e in rec.events) == 16_000
        assert s.events == len(rec.events) >= 800  # 8 × 100 distinct keys, at least once each

    asyncio.run(main())


def test_prepare_runs_off_the_loop_and_a_failure_keeps_the_change() -> None:
    rec = Recorder()
    threads: list[str] = []

    def prepare(change: RawChange) -> RawChange:
        threads.append(threading.current_thread().name)
        if change.uri.endswith("bad"):
            raise OSError("boom")
        return replace(change, content="read")

    async def main() -> str:
        intake = EnvIntake(rec, coalesce_ms=10, prepare=prepare)
        intake.start()
        intake.put(_file("/w/ok", "created"))
        intake.put(_file("/w/bad", "created"))
        await intake.stop()
        assert intake.stats().prepare_errors == 1
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    assert threads and loop_thread not in threads
    by_uri = {e.uri: e for e in rec.events}
    assert by_uri["/w/ok"].content == "read"
    assert "boom" in by_uri["/w/bad"].payload["prepare_error"]


def test_a_failing_handler_does_not_stop_the_intake() -> None:
    seen: list[int] = []

    async def handler(events: list[EnvEvent]) -> None:
        seen.append(len(events))
        if len(seen) == 1:
            raise RuntimeError("handler bug")

    async def main() -> None:
        intake = EnvIntake(handler, coalesce_ms=10, retry_delay_s=0.01)
        intake.start()
        intake.put(_file("/w/1", "created"))
        await asyncio.sleep(0.1)
        intake.put(_file("/w/2", "created"))
        await intake.stop()
        stats = intake.stats()
        assert stats.handler_errors == 1 and stats.events == 2 and stats.lost == 0

    asyncio.run(main())
    assert seen == [1, 1, 1]  # the failed batch was handed over again, then the next one


def test_a_batch_the_handler_always_refuses_is_counted_as_lost() -> None:
    seen: list[int] = []

    async def handler(events: list[EnvEvent]) -> None:
        seen.append(len(events))
        raise RuntimeError("store is gone")

    async def main() -> None:
        intake = EnvIntake(handler, coalesce_ms=10, handler_retries=2, retry_delay_s=0.01)
        intake.start()
        intake.put(_file("/w/1", "created"))
        intake.put(_file("/w/2", "created"))
        await intake.stop()
        stats = intake.stats()
        assert stats.handler_errors == 3 and stats.lost == 2

    asyncio.run(main())
    assert seen == [2, 2, 2]


def test_keys_whose_windows_end_close_together_leave_in_one_batch() -> None:
    rec = Recorder()

    async def main() -> None:
        intake = EnvIntake(rec, coalesce_ms=30, min_flush_interval_ms=150)
        intake.start()
        for i in range(40):  # one new key every ~5 ms for 200 ms
            intake.put(_file(f"/w/{i}", "created"))
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.3)
        await intake.stop()

    asyncio.run(main())
    assert len(rec.events) == 40
    assert len(rec.batches) <= 4  # not 40 batches of one
