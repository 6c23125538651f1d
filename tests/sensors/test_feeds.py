"""FeedSensor with real feedparser: local feed files, a feed served from 127.0.0.1 with
ETag/Last-Modified, malformed feeds reported while polling continues, size and time caps."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from app.core.runtime.intake import RawChange
from app.sensors.base import FeedSpec
from app.sensors.feedparse import entry_id
from app.sensors.feeds import FeedSensor, FirstPoll
from app.sensors.text import html_to_text
from tests.sensors.conftest import FeedServer, rss

RICH = "<p>Hello &amp; <b>world</b>&nbsp;&#8212; caf&eacute;</p><script>alert('x')</script><style>p{color:red}</style><ul><li>one</li><li>two</li></ul>"


class Collect:
    """A thread-safe sink that keeps every change."""

    def __init__(self) -> None:
        self.changes: list[RawChange] = []
        self._lock = threading.Lock()

    def __call__(self, change: RawChange) -> bool:
        with self._lock:
            self.changes.append(change)
        return True

    def of(self, change: str) -> list[RawChange]:
        with self._lock:
            return [c for c in self.changes if c.change == change]

    def wait(self, pred: Any, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not pred():
            assert time.monotonic() < deadline, "condition not met in time"
            time.sleep(0.02)


def test_html_to_text_drops_scripts_and_unescapes() -> None:
    text = html_to_text(RICH)
    assert text == "Hello & world — café\n\n- one\n- two"
    assert html_to_text("a < b & c") == "a < b & c"
    assert html_to_text("<div>x<br>y</div><p>z</p>") == "x\ny\n\nz"


def test_a_local_feed_file_and_file_url(tmp_path: Path) -> None:
    feed = tmp_path / "feed.xml"
    feed.write_bytes(rss(("a", "First", RICH), ("b", "Second <i>post</i>", "plain")))
    sink = Collect()
    sensor = FeedSensor([FeedSpec(str(feed), 1.0), FeedSpec(feed.as_uri(), 1.0)], sink)
    assert sensor.poll_once(0) == 2 and sensor.poll_once(1) == 2
    first = next(c for c in sink.changes if c.payload["entry_id"] == "a")
    assert first.kind == "feed" and first.change == "new" and first.title == "First"
    assert first.key == f"feed:{feed}#a" and first.uri == "http://example.org/a"
    assert first.content.startswith("Title: First\nFeed: Test feed\nPublished: Mon, 06 Jan 2025 10:00:00 GMT\nLink: http://example.org/a\n\n")
    assert "Hello & world" in first.content and "alert" not in first.content and "<" not in first.content
    # unchanged file: not read again, nothing new
    assert sensor.poll_once(0) == 0
    assert sensor.status()[0].counts["not_modified"] == 1
    # a new entry appears: exactly one change
    feed.write_bytes(rss(("c", "Third", "new!"), ("a", "First", RICH), ("b", "Second", "plain")))
    assert sensor.poll_once(0) == 1
    assert [c.payload["entry_id"] for c in sink.changes[4:]] == ["c"]
    assert sensor.seen_ids(str(feed)) == ["b", "a", "c"]


def test_a_served_feed_uses_etag_and_last_modified(feed_server: FeedServer) -> None:
    lm = "Mon, 06 Jan 2025 10:00:00 GMT"
    feed_server.routes["/feed"] = {"body": rss(("1", "One", "x"), ("2", "Two", "y")), "etag": '"v1"', "last_modified": lm}
    sink = Collect()
    sensor = FeedSensor([FeedSpec(feed_server.url("/feed"), 0.2)], sink, timeout_s=2.0)
    sensor.start()
    try:
        sink.wait(lambda: len(feed_server.requests) >= 2)
        assert len(sink.of("new")) == 2
        first, second = feed_server.requests[0][1], feed_server.requests[1][1]
        assert "if-none-match" not in first
        assert second["if-none-match"] == '"v1"' and second["if-modified-since"] == lm
        # the server has the second request; the sensor counts its 304 once the answer is read
        sink.wait(lambda: sensor.status()[0].counts.get("not_modified", 0) >= 1)
        assert len(sink.of("new")) == 2  # the 304 added nothing
        feed_server.routes["/feed"] = {"body": rss(("3", "Three", "<p>z</p>"), ("1", "One", "x"), ("2", "Two", "y")), "etag": '"v2"'}
        sink.wait(lambda: len(sink.of("new")) >= 3)
        n = len(feed_server.requests)
        sink.wait(lambda: len(feed_server.requests) >= n + 2)  # two more polls: still exactly one new
    finally:
        sensor.stop()
    new = sink.of("new")
    assert [c.payload["entry_id"] for c in new] == ["2", "1", "3"]  # oldest first: feeds list newest first
    assert new[-1].content.endswith("\n\nz")
    status = sensor.status()[0]
    assert status.ok and status.last_ok and status.counts["entries_seen"] == 3 and not status.running


def test_a_malformed_feed_is_reported_once_and_polling_continues(feed_server: FeedServer) -> None:
    feed_server.routes["/bad"] = {"body": b"<?xml version='1.0'?><rss><channel><title>x</title><item><title>broken", "etag": '"b1"'}
    sink = Collect()
    sensor = FeedSensor([FeedSpec(feed_server.url("/bad"), 0.2)], sink, timeout_s=2.0)
    sensor.start()
    try:
        sink.wait(lambda: len(sink.of("error")) == 1)
        status = sensor.status()[0]
        assert status.last_error and "malformed" in status.last_error and status.running
        n = len(feed_server.requests)
        feed_server.routes["/bad"]["etag"] = '"b2"'  # served again as a new version, still broken
        sink.wait(lambda: len(feed_server.requests) >= n + 2)
        assert len(sink.of("error")) == 1  # a persisting error is reported once
        feed_server.routes["/bad"] = {"body": rss(("ok", "Fixed", "good")), "etag": '"g1"'}
        sink.wait(lambda: len(sink.of("new")) == 1)
    finally:
        sensor.stop()
    err = sink.of("error")[0]
    assert err.kind == "feed" and err.payload["error"] == "malformed" and err.content.startswith("malformed feed:")
    assert sink.of("new")[0].title == "Fixed"
    assert sensor.status()[0].ok


def test_size_cap_with_and_without_content_length(feed_server: FeedServer) -> None:
    big = rss(*[(str(i), f"T{i}", "x" * 200) for i in range(50)])
    feed_server.routes["/big"] = {"body": big}
    feed_server.routes["/big-unannounced"] = {"body": big, "no_length": True}
    sink = Collect()
    sensor = FeedSensor([FeedSpec(feed_server.url("/big"), 60), FeedSpec(feed_server.url("/big-unannounced"), 60)], sink, max_bytes=2_000)
    assert sensor.poll_once(0) == 0 and sensor.poll_once(1) == 0
    errors = sink.of("error")
    assert [e.payload["error"] for e in errors] == ["too_large", "too_large"]
    assert "announces" in errors[0].content and "more than 2000" in errors[1].content
    assert not sink.of("new")


def test_time_cap(feed_server: FeedServer) -> None:
    feed_server.routes["/slow"] = {"body": rss(("1", "One", "x")), "delay_s": 3.0}
    sink = Collect()
    sensor = FeedSensor([FeedSpec(feed_server.url("/slow"), 60)], sink, timeout_s=0.3)
    t0 = time.monotonic()
    assert sensor.poll_once(0) == 0
    assert time.monotonic() - t0 < 1.5
    assert sink.of("error")[0].payload["error"] == "timeout"
    assert "longer than 0.3 s" in (sensor.status()[0].last_error or "")


def test_seen_ids_and_baseline_first_poll(tmp_path: Path) -> None:
    feed = tmp_path / "f.xml"
    feed.write_bytes(rss(("a", "A", "x"), ("b", "B", "y")))
    sink = Collect()
    assert FeedSensor([FeedSpec(str(feed))], sink, seen={str(feed): ["a"]}).poll_once(0) == 1
    assert [c.payload["entry_id"] for c in sink.changes] == ["b"]
    quiet = FeedSensor([FeedSpec(str(feed))], sink, first_poll=FirstPoll.BASELINE)
    assert quiet.poll_once(0) == 0 and sorted(quiet.seen_ids(str(feed))) == ["a", "b"]
    missing = FeedSensor([FeedSpec(str(tmp_path / "none.xml"))], sink)
    assert missing.poll_once(0) == 0 and sink.of("error")[-1].payload["error"] == "missing"


def test_entry_id_falls_back_to_link_then_hash() -> None:
    assert entry_id({"id": "x", "link": "l"}) == "x"
    assert entry_id({"link": "l"}) == "l"
    h = entry_id({"title": "t", "published": "p"})
    assert h.startswith("sha1:") and h == entry_id({"title": "t", "published": "p"}) != entry_id({"title": "u"})
