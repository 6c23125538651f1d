"""Hostile feeds served from a real HTTP server on 127.0.0.1 (and local files): a poll never runs
past its time cap, one bad entry never blocks the feed (it is skipped with its reason in the
status, the rest land), and what is not a feed is reported as such."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.sensors.base import FeedSpec
from app.sensors.feedparse import mark_invalid_references, parse_in_child
from app.sensors.feeds import FeedSensor
from tests.sensors.conftest import FeedServer, rss
from tests.sensors.test_feeds import Collect

TIMEOUT_S, PARSE_TIMEOUT_S = 2.0, 3.0
SLACK_S = 0.5  # starting and reaping the child, on a busy machine

GOOD = rss(("g1", "First", "<p>one</p>"), ("g2", "Second", "<p>two</p>"), ("g3", "Third", "<p>three</p>"))


def attributes_feed(n: int = 40_000) -> bytes:
    """An RSS item with ``n`` attributes (0.43 MB for 40,000): feedparser takes 30 s and more."""
    attrs = " ".join(f'a{i}="v"' for i in range(n))
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title><item {attrs}><title>x</title>'
            f"<guid>1</guid></item></channel></rss>").encode()


def _item(guid: str, title: str) -> bytes:
    """One RSS <item> as ``rss`` writes it."""
    doc = rss((guid, title, "x"))
    return doc[doc.index(b"<item>"):doc.index(b"</channel>")]


def _sensor(url: str, sink: Collect, **kw: object) -> FeedSensor:
    return FeedSensor([FeedSpec(url, 60)], sink, timeout_s=TIMEOUT_S, parse_timeout_s=PARSE_TIMEOUT_S, **kw)  # type: ignore[arg-type]


def _timed_poll(sensor: FeedSensor) -> tuple[int, float]:
    started = time.monotonic()
    sent = sensor.poll_once(0)
    took = time.monotonic() - started
    assert took <= sensor.poll_cap_s + SLACK_S, f"a poll took {took:.2f} s, over its cap of {sensor.poll_cap_s} s"
    return sent, took


# --------------------------------------------------------------------------- time


def test_a_pathological_document_is_stopped_at_the_parse_cap(feed_server: FeedServer) -> None:
    feed_server.routes["/attrs"] = {"body": attributes_feed(), "etag": '"a1"'}
    sink = Collect()
    sensor = _sensor(feed_server.url("/attrs"), sink)
    sent, took = _timed_poll(sensor)
    status = sensor.status()[0]
    assert sent == 0 and took >= PARSE_TIMEOUT_S - 0.1
    assert status.last_error == f"parsing {feed_server.url('/attrs')} took longer than 3 s; stopped (a pathological document?)"
    assert [c.payload["error"] for c in sink.of("error")] == ["timeout"]
    assert status.detail["slowest_poll_ms"] <= (sensor.poll_cap_s + SLACK_S) * 1000
    # The same version again: a 304, no second parse; a fixed version is picked up.
    assert _timed_poll(sensor)[0] == 0 and status.counts.get("not_modified", 0) == 0
    assert sensor.status()[0].counts["not_modified"] == 1
    feed_server.routes["/attrs"] = {"body": GOOD, "etag": '"a2"'}
    assert _timed_poll(sensor)[0] == 3 and sensor.status()[0].ok


class TrickleServer:
    """A raw HTTP server on 127.0.0.1 that sends its response one byte every ``gap_s`` seconds
    (each within any socket timeout), so only a deadline on the whole fetch can end it."""

    def __init__(self, response: bytes, gap_s: float = 0.1) -> None:
        self.response, self.gap_s = response, gap_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for i in range(len(self.response)):
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(self.response[i : i + 1])
                except OSError:
                    return
                time.sleep(self.gap_s)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/feed"

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def trickle() -> Iterator[type[TrickleServer]]:
    servers: list[TrickleServer] = []

    def make(response: bytes, gap_s: float = 0.1) -> TrickleServer:
        servers.append(TrickleServer(response, gap_s))
        return servers[-1]

    yield make  # type: ignore[misc]
    for server in servers:
        server.close()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_server_trickling_its_response_is_cut_at_the_fetch_deadline(trickle: type[TrickleServer], where: str) -> None:
    head = b"HTTP/1.0 200 OK\r\nContent-Type: application/rss+xml\r\n" + b"X-Pad: " + b"p" * 400 + b"\r\n\r\n"
    response = head + GOOD if where == "headers" else head + GOOD * 20
    server = trickle(response, gap_s=0.1 if where == "headers" else 0.005)
    sink = Collect()
    sensor = _sensor(server.url(), sink)
    sent, took = _timed_poll(sensor)
    assert sent == 0 and TIMEOUT_S - 0.1 <= took <= TIMEOUT_S + SLACK_S
    assert sensor.status()[0].last_error == f"{server.url()} took longer than 2 s"
    assert sink.of("error")[0].payload["error"] == "timeout"


def test_a_fifo_in_place_of_a_feed_file_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "feed.xml"
    os.mkfifo(fifo)
    sink = Collect()
    sensor = _sensor(str(fifo), sink)
    sent, took = _timed_poll(sensor)
    assert sent == 0 and took < 1
    assert sensor.status()[0].last_error == f"{fifo} is not a regular file (a pipe, device or socket), not a feed file"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the child reports its peak from /proc")
def test_the_memory_cap_stops_a_parse_that_needs_more() -> None:
    baseline = parse_in_child(rss(("1", "One", "x")), url="http://x/feed")["peak_mb"]  # Python + feedparser
    many = rss(*[(str(i), f"Title {i}", "<p>" + "word " * 40 + "</p>") for i in range(4_000)])
    full = parse_in_child(many, url="http://x/feed", max_entries=5, timeout_s=30)
    assert full["kind"] == "ok" and full["entries_in_feed"] == 4_000 and full["peak_mb"] >= baseline + 10
    cap = baseline + 6
    outcome = parse_in_child(many, url="http://x/feed", memory_bytes=cap << 20, timeout_s=30)
    assert outcome["kind"] == "memory" and outcome["message"] == f"parsing http://x/feed needed more than {cap} MB; stopped"


# --------------------------------------------------------------------------- one bad entry


@pytest.mark.parametrize(("reference", "shown"), [("&#xD800;", "&#xD800;"), ("&#56320;", "&#56320;"),
                                                  ("&#x110000;", "&#x110000;")])
def test_an_invalid_character_reference_skips_only_its_entry(feed_server: FeedServer, reference: str, shown: str) -> None:
    body = GOOD.replace(b"<title>Second</title>", f"<title>bad {reference} here</title>".encode())
    feed_server.routes["/ref"] = {"body": body, "etag": '"r1"'}
    sink = Collect()
    sensor = _sensor(feed_server.url("/ref"), sink)
    assert _timed_poll(sensor)[0] == 2
    assert [c.title for c in sink.of("new")] == ["Third", "First"]
    status = sensor.status()[0]
    assert status.ok and status.counts["entries_skipped"] == 1
    (skipped,) = status.detail["skipped"]
    assert skipped["entry_id"] == "g2" and skipped["title"] == "bad \ufffd here"
    assert skipped["reason"] == f"its title has a character reference to an invalid code point ({shown})"
    # A new version of the feed: the skipped entry stays skipped (not reported again), a new one lands.
    feed_server.routes["/ref"] = {"body": body.replace(b"<item>", _item("g4", "Fourth") + b"<item>", 1), "etag": '"r2"'}
    assert _timed_poll(sensor)[0] == 1 and sink.of("new")[-1].title == "Fourth"
    assert sensor.status()[0].counts["entries_skipped"] == 1


@pytest.mark.parametrize(("written", "title", "reason"), [
    (b"caf&eacute;&nbsp;du&nbsp;port", "caf\u00e9\u00a0du\u00a0port", ""),  # HTML names XML lacks: read
    (b"&copy; 2026 &amp; more", "\u00a9 2026 & more", ""),
    (b"&madeup; name", "&madeup; name", ""),  # a name nobody defines: shown as written
    (b"bell \x07 here", "", "control character U+0007"),  # XML forbids it: its entry alone is skipped
    (b"ref &#1; here", "", "&#1;"),
])
def test_an_html_entity_or_control_character_never_hides_the_feed(written: bytes, title: str, reason: str) -> None:
    body = GOOD.replace(b"<title>Second</title>", b"<title>" + written + b"</title>")
    outcome = parse_in_child(body, url="http://x/feed", timeout_s=30)
    assert outcome["kind"] == "ok", outcome
    titles = [c["title"] for c in outcome["changes"]]
    if reason:
        assert titles == ["Third", "First"] and reason in outcome["skipped"][0]["reason"]
    else:
        assert titles == ["Third", title, "First"] and not outcome["skipped"]


def test_huge_fields_skip_their_entry_and_long_content_is_cut(feed_server: FeedServer) -> None:
    body = rss(("h1", "T" * 100_000, "x"), ("h2", "Fine", "<p>" + "long text " * 150_000 + "</p>"), ("h3", "Also fine", "y"))
    body = body.replace(b"<guid>h3</guid>", b"<guid>" + b"i" * 5_000 + b"</guid>")
    feed_server.routes["/huge"] = {"body": body}
    sink = Collect()
    sensor = _sensor(feed_server.url("/huge"), sink, max_bytes=3_000_000)
    assert _timed_poll(sensor)[0] == 1
    (landed,) = sink.of("new")
    assert landed.title == "Fine" and len(landed.content) == 20_000
    reasons = sorted(s["reason"] for s in sensor.status()[0].detail["skipped"])
    assert reasons == ["its id is 5,000 characters (limit 2,000)", "its title is 100,000 characters (limit 2,000)"]
    seen = sensor.seen_ids(feed_server.url("/huge"))
    assert len(seen) == 3 and max(len(i) for i in seen) <= 45  # an overlong id is kept as its hash


def test_bad_dates_never_block_an_entry(feed_server: FeedServer) -> None:
    dates = ["Mon, 32 Foo 99999 25:61:61 +9999", "99999999999999999999-01-01T00:00:00Z", "not a date at all"]
    body = GOOD
    for date in dates:
        body = body.replace(b"Mon, 06 Jan 2025 10:00:00 GMT", date.encode(), 1)
    feed_server.routes["/dates"] = {"body": body}
    sink = Collect()
    sensor = _sensor(feed_server.url("/dates"), sink)
    assert _timed_poll(sensor)[0] == 3
    assert sorted(c.payload["published"] for c in sink.of("new")) == sorted(dates)
    assert sensor.status()[0].ok and "entries_skipped" not in sensor.status()[0].counts


def test_marking_keeps_valid_references() -> None:
    marked, refs = mark_invalid_references(b"a &#x41; &#65; &#xD800; &#1114112; &#x10FFFF; &amp;")
    assert marked == b"a &#x41; &#65; &#x10FFFD; &#x10FFFD; &#x10FFFF; &amp;"
    assert refs == ["&#xD800;", "&#1114112;"]


# --------------------------------------------------------------------------- not a feed


@pytest.mark.parametrize(("body", "content_type", "what"), [
    (b"<!doctype html><html><head><title>Shop</title></head><body><p>Welcome</p></body></html>", "text/html",
     "an HTML page"),
    (b"", "application/rss+xml", "an empty response"),
    (b"  \r\n", "application/rss+xml", "an empty response"),
    (b'{"items": [{"title": "x"}]}', "application/json", "JSON (JSON Feed is not read; use the site's RSS or Atom feed)"),
    (b'<?xml version="1.0"?><config><item>1</item></config>', "application/xml", "XML without an RSS, Atom or RDF feed in it"),
    (b"just some words", "text/plain", "text that is not XML"),
])
def test_what_is_not_a_feed_is_reported_as_such(feed_server: FeedServer, body: bytes, content_type: str, what: str) -> None:
    feed_server.routes["/x"] = {"body": body, "content_type": content_type}
    sink = Collect()
    sensor = _sensor(feed_server.url("/x"), sink)
    assert _timed_poll(sensor)[0] == 0
    status = sensor.status()[0]
    assert not status.ok and status.last_error == f"not a feed: {feed_server.url('/x')} answered with {what}"
    (error,) = sink.of("error")
    assert error.payload["error"] == "not_a_feed" and "entries_seen" not in status.counts


def test_a_feed_with_no_entries_is_healthy(feed_server: FeedServer) -> None:
    feed_server.routes["/none"] = {"body": rss()}
    sink = Collect()
    sensor = _sensor(feed_server.url("/none"), sink)
    assert _timed_poll(sensor)[0] == 0
    status = sensor.status()[0]
    assert status.ok and status.detail["entries_in_feed"] == 0 and not sink.changes
