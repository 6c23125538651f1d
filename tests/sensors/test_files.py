"""FolderSensor with real watchdog on tmp_path: coalescing, ignore patterns, binary/oversized files,
deletes and moves, and the one rescan after an inotify queue overflow."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from app.core.runtime.intake import RawChange
from app.sensors.files import QueueOverflowEvent, _FolderHandler, read_text_preview
from app.sensors.scan import diff_snapshots, ignore_matcher, scan_folder
from tests.sensors.conftest import FolderHarness, wait_until

IGNORE = [".git/*", "*/.git/*", "*.tmp", ".#*", "*~"]


def test_a_file_created_then_edited_is_one_event_with_its_final_text(tmp_path: Path) -> None:
    async def main() -> FolderHarness:
        async with FolderHarness(tmp_path, coalesce_ms=400) as h:
            target = tmp_path / "notes.md"
            target.write_text("first draft")
            for i in range(4):
                with target.open("a") as fh:
                    fh.write(f"\nedit {i}")
            await h.settle()
        return h

    h = asyncio.run(main())
    events = h.by_path()["notes.md"]
    assert len(events) == 1, [e.payload for e in events]
    ev = events[0]
    assert ev.kind == "file" and ev.source == str(tmp_path) and ev.uri == str(tmp_path / "notes.md")
    # inotify itself may merge consecutive modifications that were not read yet: at least the
    # creation and one edit arrive as raw changes, and they became one event.
    assert ev.payload["change"] == "created" and ev.payload["raw_changes"] >= 2
    assert ev.content == "first draft\nedit 0\nedit 1\nedit 2\nedit 3"
    assert ev.payload["size"] == len(ev.content) and ev.payload["mtime"]


def test_ignore_patterns_are_respected_in_every_subfolder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()

    async def main() -> FolderHarness:
        async with FolderHarness(tmp_path, ignore_patterns=IGNORE) as h:
            (tmp_path / ".git" / "index").write_text("x")
            (tmp_path / "sub" / "scratch.tmp").write_text("x")
            (tmp_path / "sub" / ".#lock").write_text("x")
            (tmp_path / "sub" / "backup~").write_text("x")
            (tmp_path / "sub" / "kept.txt").write_text("kept")
            await h.settle()
        return h

    h = asyncio.run(main())
    assert set(h.by_path()) == {"sub/kept.txt"}
    assert not any(".git" in c.key or c.key.endswith(".tmp") for c in h.raw)


def test_binary_and_oversized_files_are_recorded_without_content(tmp_path: Path) -> None:
    async def main() -> FolderHarness:
        async with FolderHarness(tmp_path, max_file_bytes=1_000) as h:
            (tmp_path / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
            (tmp_path / "big.txt").write_text("y" * 5_000)
            (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
            (tmp_path / "small.txt").write_text("ok")
            await h.settle()
        return h

    h = asyncio.run(main())
    ev = {k: v[-1] for k, v in h.by_path().items()}
    assert ev["image.bin"].content == "" and ev["image.bin"].payload["skipped"] == "binary"
    assert ev["image.bin"].payload["size"] == 160
    assert ev["big.txt"].content == "" and ev["big.txt"].payload["skipped"] == "too_large"
    assert ev["big.txt"].payload["size"] == 5_000
    assert ev["latin1.txt"].payload["skipped"] == "undecodable"
    assert ev["small.txt"].content == "ok" and "skipped" not in ev["small.txt"].payload


def test_deleted_and_moved_files_are_reported(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").write_text("bye")
    (tmp_path / "old.txt").write_text("same text")
    (tmp_path / "d").mkdir()

    async def main() -> FolderHarness:
        async with FolderHarness(tmp_path) as h:
            (tmp_path / "gone.txt").unlink()
            os.rename(tmp_path / "old.txt", tmp_path / "d" / "new.txt")
            await h.settle()
        return h

    h = asyncio.run(main())
    ev = h.by_path()
    assert [e.payload["change"] for e in ev["gone.txt"]] == ["deleted"]
    assert ev["gone.txt"][0].content == ""
    moved = ev["d/new.txt"]
    assert [e.payload["change"] for e in moved] == ["moved"]
    assert moved[0].payload["src_path"] == str(tmp_path / "old.txt") and moved[0].content == "same text"
    assert "old.txt" not in ev


def _lose_events_then(tmp_path: Path, trigger: str) -> FolderHarness:
    """Start a sensor, make changes it never sees (the sink swallows them), then trigger an overflow
    three times in a row; return the harness after the rescan settled."""
    (tmp_path / "keep.txt").write_text("unchanged")
    (tmp_path / "edit.txt").write_text("v1")
    (tmp_path / "del.txt").write_text("x")
    (tmp_path / "ren.txt").write_text("r")
    blind = {"on": False}
    swallowed: set[str] = set()
    last = [0.0]  # when the sink last swallowed a change

    def sink_filter(change: RawChange) -> bool | None:
        if not blind["on"]:
            return True
        swallowed.add(change.key)
        last[0] = time.monotonic()
        return None

    async def main() -> FolderHarness:
        h = FolderHarness(tmp_path, sink_filter=sink_filter, refresh_quiet_s=60.0, settle_s=0.1)
        async with h:
            blind["on"] = True
            (tmp_path / "edit.txt").write_text("v2 longer")
            (tmp_path / "del.txt").unlink()
            os.rename(tmp_path / "ren.txt", tmp_path / "renamed.txt")
            (tmp_path / "sub").mkdir()
            (tmp_path / "sub" / "born.txt").write_text("new")
            # Let watchdog deliver (and the sink swallow) every one of those events, late ones too:
            # one seen after the sink opens would reach the intake live, leaving the rescan less to find.
            lost = {str(tmp_path / p) for p in ("edit.txt", "del.txt", "renamed.txt", "sub/born.txt")}
            await wait_until(lambda: lost <= swallowed and time.monotonic() - last[0] >= 0.3)
            blind["on"] = False
            for _ in range(3):
                if trigger == "inotify":
                    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent

                    fd = h.sensor._observer._inotify_fd  # type: ignore[union-attr]
                    fd.handle_event(InotifyEvent(-1, InotifyConstants.IN_Q_OVERFLOW, 0, b""))
                else:
                    _FolderHandler(h.sensor, h.folder).dispatch(QueueOverflowEvent(h.folder))
            await wait_until(lambda: h.sensor.status()[0].counts.get("rescans", 0) >= 1)
            await h.settle()
        return h

    return asyncio.run(main())


def _assert_rescan_result(h: FolderHarness, tmp_path: Path) -> None:
    status = h.sensor.status()[0]
    # watchdog's queue skips identical consecutive events, so 1 to 3 overflow notices arrive
    assert status.counts["rescans"] == 1 and 1 <= status.counts["overflows"] <= 3
    ev = {k: [e.payload["change"] for e in v] for k, v in h.by_path().items()}
    markers = [e for e in h.rec.events if e.payload["change"] == "rescan"]
    assert len(markers) == 1 and markers[0].payload["differences"] == 4
    assert ev == {
        "edit.txt": ["modified"], "del.txt": ["deleted"], "renamed.txt": ["moved"], "sub/born.txt": ["created"],
        str(tmp_path): ["rescan"],  # the marker: its uri is the folder
    }
    edited = h.by_path()["edit.txt"][0]
    assert edited.content == "v2 longer" and edited.payload["rescan"] is True and edited.payload["reason"] == "overflow"
    assert h.intake.stats().rescans == 1


def test_overflow_dispatched_to_the_handler_triggers_exactly_one_rescan(tmp_path: Path) -> None:
    _assert_rescan_result(_lose_events_then(tmp_path, "handler"), tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="IN_Q_OVERFLOW is inotify's")
def test_a_kernel_queue_overflow_through_watchdog_triggers_exactly_one_rescan(tmp_path: Path) -> None:
    _assert_rescan_result(_lose_events_then(tmp_path, "inotify"), tmp_path)


def test_changes_the_intake_drops_are_recovered_by_a_rescan(tmp_path: Path) -> None:
    dropping = {"on": False}

    async def main() -> FolderHarness:
        h = FolderHarness(tmp_path, sink_filter=lambda c: False if dropping["on"] and c.change != "rescan" and not c.payload.get("rescan") else True, settle_s=0.1)
        async with h:
            dropping["on"] = True
            (tmp_path / "lost.txt").write_text("lost then found")
            await asyncio.sleep(0.3)
            dropping["on"] = False
            await wait_until(lambda: h.sensor.status()[0].counts.get("rescans", 0) >= 1)
            await h.settle()
        return h

    h = asyncio.run(main())
    found = h.by_path()["lost.txt"]
    assert [e.payload["change"] for e in found] == ["created"] and found[0].content == "lost then found"
    assert found[0].payload["reason"] == "dropped" and h.sensor.status()[0].counts["dropped"] >= 1


def test_a_missing_folder_is_reported_and_the_others_still_watched(tmp_path: Path) -> None:
    async def main() -> FolderHarness:
        async with FolderHarness(tmp_path, extra_folders=[tmp_path / "nope"]) as h:
            (tmp_path / "a.txt").write_text("a")
            await h.settle()
            status = {s.source: s for s in h.sensor.status()}
            assert "not a folder" in (status[str(tmp_path / "nope")].last_error or "")
            assert status[str(tmp_path)].ok and status[str(tmp_path)].running
        return h

    h = asyncio.run(main())
    assert "a.txt" in h.by_path()


def test_stop_is_prompt(tmp_path: Path) -> None:
    import time

    async def main() -> float:
        async with FolderHarness(tmp_path) as h:
            t0 = time.monotonic()
            h.sensor.stop()
            return time.monotonic() - t0

    assert asyncio.run(main()) < 1.5


def test_read_text_preview_and_snapshots(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("héllo", encoding="utf-8")
    (tmp_path / "u16.txt").write_text("wide", encoding="utf-16")
    p = read_text_preview(tmp_path / "a.txt", 100)
    assert p.text == "héllo" and p.skipped is None and p.size == 6
    assert read_text_preview(tmp_path / "u16.txt", 100).text == "wide"
    assert read_text_preview(tmp_path / "none.txt", 100).skipped == "missing"
    assert read_text_preview(tmp_path, 100).skipped == "not_a_file"

    ignored = ignore_matcher(IGNORE)
    assert ignored(".git/") and ignored("a/b/.git/") and ignored("x/y.tmp") and ignored("x/.#y")
    assert not ignored("src/") and not ignored("src/main.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    before = scan_folder(str(tmp_path), ignored)
    assert str(tmp_path / ".git" / "HEAD") not in before and str(tmp_path / "a.txt") in before
    os.rename(tmp_path / "a.txt", tmp_path / "b.txt")
    diffs = diff_snapshots(before, scan_folder(str(tmp_path), ignored))
    assert [(d.change, Path(d.path).name, Path(d.src).name) for d in diffs] == [("moved", "b.txt", "a.txt")]
