"""SensorSet: one set built from plain arguments feeds one intake; a broken sensor does not stop
the others; the bench runs end to end on a small burst."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from app.core.runtime.intake import EnvIntake
from app.sensors import ApiSpec, FeedSpec, SensorSet, SourceStatus, make_preparer
from app.sensors.bench import measure_file_burst
from tests.sensors.conftest import FeedServer, FolderHarness, Recorder, rss, wait_until


def test_a_set_built_from_plain_arguments_feeds_one_intake(tmp_path: Path, feed_server: FeedServer) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    feed = tmp_path / "feed.xml"
    feed.write_bytes(rss(("e1", "Entry", "<p>text</p>")))
    feed_server.routes["/api"] = {"body": json.dumps({"v": 1}).encode()}
    rec = Recorder()

    async def main() -> list[SourceStatus]:
        intake = EnvIntake(rec, coalesce_ms=100, prepare=make_preparer(10_000))
        sensors = SensorSet.build(
            intake.put, folders=[watched], ignore_patterns=["*.tmp"],
            feeds=[FeedSpec(str(feed), 0.2)], apis=[ApiSpec(feed_server.url("/api"), 0.2, "v")], timeout_s=2.0,
        )
        assert [s.name for s in sensors.sensors] == ["files", "feeds", "api"]
        intake.start()
        sensors.start()
        await wait_until(lambda: "baseline_files" in sensors.status()[0].detail)
        (watched / "a.txt").write_text("hello")
        await wait_until(lambda: {e.kind for e in rec.events} == {"file", "feed", "api"})
        sensors.stop()
        await intake.stop()
        return sensors.status()

    statuses = asyncio.run(main())
    kinds = {e.kind: e for e in rec.events}
    assert kinds["file"].content == "hello" and kinds["feed"].title == "Entry" and kinds["api"].payload["change"] == "initial"
    assert [s.sensor for s in statuses] == ["files", "feeds", "api"]
    assert all(s.ok and not s.running for s in statuses)


def test_a_sensor_failing_to_start_is_reported_and_the_others_run(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def start(self) -> None:
            raise RuntimeError("no such device")

        def stop(self, timeout_s: float = 2.0) -> None:
            pass

        def status(self) -> list[SourceStatus]:
            return []

    feed = tmp_path / "f.xml"
    feed.write_bytes(rss(("x", "X", "x")))
    got: list[object] = []
    from app.sensors.feeds import FeedSensor

    feeds = FeedSensor([FeedSpec(str(feed), 60)], got.append)
    sensors = SensorSet([Broken(), feeds])
    sensors.start()
    try:
        import time

        deadline = time.monotonic() + 3
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        sensors.stop()
    assert len(got) == 1
    status = sensors.status()
    assert status[0].sensor == "broken" and "no such device" in (status[0].last_error or "")


def test_a_deleted_watched_folder_shows_in_status(tmp_path: Path) -> None:
    watched = tmp_path / "w"
    watched.mkdir()

    async def main() -> None:
        async with FolderHarness(watched) as h:
            shutil.rmtree(watched)
            await wait_until(lambda: "deleted" in (h.sensor.status()[0].last_error or ""))

    asyncio.run(main())


def test_the_bench_runs_on_a_small_burst() -> None:
    result = measure_file_burst(60, coalesce_ms=100, idle_s=0.1, quiet_s=0.4, trace_intake=True)
    assert result["events"] == 60 and result["raw_changes"] >= 120 and result["ratio_raw_per_event"] >= 2
    assert result["loop_lag_ms"]["samples"] > 0 and result["rss_mb"]["peak"] >= result["rss_mb"]["before"] > 0
    assert result["intake_replay"]["events"] == 60


def test_a_restart_resumes_feeds_and_api_values_from_the_stored_events(tmp_path: Path, feed_server: FeedServer) -> None:
    """The stored env events are the sensors' memory: no feed entry twice, no second "initial"
    value for an unchanged endpoint, and the first real change reports the stored old value."""
    from app.core.runtime.intake import to_event
    from tests.sensors.test_feeds import Collect

    feed = tmp_path / "feed.xml"
    feed.write_bytes(rss(("e1", "Entry", "<p>text</p>")))
    api = ApiSpec(feed_server.url("/api"), 60.0, "v")
    feed_server.routes["/api"] = {"body": json.dumps({"v": {"a": 1}}).encode()}

    def run(history: list) -> list:
        sink = Collect()
        sensors = SensorSet.build(sink, feeds=[FeedSpec(str(feed), 60.0)], apis=[api], history=history, timeout_s=2.0)
        sensors.get("feeds").poll_once(0)
        sensors.get("api").poll_once(0)
        return [to_event(c) for c in sink.changes]

    first = run([])
    assert sorted((e.kind, e.payload.get("change", "")) for e in first) == [("api", "initial"), ("feed", "new")]
    assert run(first) == []  # restarted on the stored events: nothing new, nothing repeated
    feed_server.routes["/api"] = {"body": json.dumps({"v": {"a": 2}}).encode()}
    (changed,) = run(first)
    assert changed.kind == "api" and changed.payload["old"] == {"a": 1} and changed.payload["new"] == {"a": 2}
