"""ApiSensor against a JSON endpoint on 127.0.0.1: a change only when the watched value changes."""

from __future__ import annotations

import json

import pytest

from app.sensors.api import ApiSensor, PathError, pick
from app.sensors.base import ApiSpec
from tests.sensors.conftest import FeedServer
from tests.sensors.test_feeds import Collect


def _serve(server: FeedServer, doc: object, etag: str | None = None) -> None:
    route: dict[str, object] = {"body": json.dumps(doc).encode(), "content_type": "application/json"}
    if etag:
        route["etag"] = etag
    server.routes["/api"] = route


def test_pick_dotted_paths_with_list_indices() -> None:
    doc = {"items": [{"price": 10}, {"price": 12}], "meta": {"ok": True}}
    assert pick(doc, "items.1.price") == 12 and pick(doc, "meta") == {"ok": True} and pick(doc, "") == doc
    for bad in ("items.5.price", "items.x", "meta.ok.deeper", "nope"):
        with pytest.raises(PathError):
            pick(doc, bad)


def test_initial_then_only_changes(feed_server: FeedServer) -> None:
    _serve(feed_server, {"items": [{"price": 10, "noise": 1}]})
    sink = Collect()
    sensor = ApiSensor([ApiSpec(feed_server.url("/api"), 0.2, "items.0.price")], sink, timeout_s=2.0)
    assert sensor.poll_once(0) is True
    assert [c.change for c in sink.changes] == ["initial"] and sink.changes[0].payload["new"] == 10
    _serve(feed_server, {"items": [{"price": 10, "noise": 2}]})  # another field changed: not watched
    assert sensor.poll_once(0) is False and len(sink.changes) == 1
    _serve(feed_server, {"items": [{"price": 12.5}]})
    assert sensor.poll_once(0) is True
    change = sink.changes[-1]
    assert change.kind == "api" and change.change == "changed" and change.payload["old"] == 10 and change.payload["new"] == 12.5
    assert change.key == f"api:{feed_server.url('/api')}#items.0.price" and "10 → 12.5" in change.content
    assert sensor.values() == {f"{feed_server.url('/api')}#items.0.price": 12.5}


def test_errors_are_reported_and_polling_continues(feed_server: FeedServer) -> None:
    _serve(feed_server, {"v": {"a": 1, "b": 2}}, etag='"1"')
    sink = Collect()
    url = feed_server.url("/api")
    sensor = ApiSensor([ApiSpec(url, 0.2, "v")], sink, timeout_s=2.0, baseline={f"{url}#v": {"b": 2, "a": 1}})
    sensor.start()
    try:
        sink.wait(lambda: sensor.status()[0].counts.get("not_modified", 0) >= 1)
        assert sink.changes == []  # same value as the baseline (key order does not matter), then 304s
        assert feed_server.requests[-1][1]["if-none-match"] == '"1"'
        feed_server.routes["/api"] = {"body": b"{not json", "etag": '"2"'}
        sink.wait(lambda: len(sink.of("error")) == 1)
        feed_server.routes["/api"] = {"body": b"{}", "etag": '"3"'}  # a different error: path missing
        sink.wait(lambda: len(sink.of("error")) == 2)
        assert sensor.status()[0].running
        _serve(feed_server, {"v": 3}, etag='"4"')
        sink.wait(lambda: len(sink.of("changed")) == 1)
        n = len(feed_server.requests)
        sink.wait(lambda: len(feed_server.requests) >= n + 2)
    finally:
        sensor.stop()
    assert [e.payload["error"] for e in sink.of("error")] == ["malformed", "path"]
    changed = sink.of("changed")
    assert len(changed) == 1 and changed[0].payload["old"] == {"a": 1, "b": 2} and changed[0].payload["new"] == 3
    assert sensor.status()[0].ok


def test_unreachable_endpoint_and_silent_first_poll(feed_server: FeedServer) -> None:
    sink = Collect()
    gone = ApiSensor([ApiSpec(feed_server.url("/missing"), 60)], sink)
    assert gone.poll_once(0) is False
    assert sink.of("error")[0].payload["error"] == "http" and "404" in sink.of("error")[0].content
    _serve(feed_server, [1, 2])
    quiet = ApiSensor([ApiSpec(feed_server.url("/api"), 60)], sink, emit_initial=False)
    assert quiet.poll_once(0) is False and quiet.values() == {feed_server.url("/api"): [1, 2]}


@pytest.mark.parametrize(("body", "reason"), [
    (b'{"v": NaN}', "not JSON: NaN is not a JSON number"),
    (b'{"v": -Infinity}', "not JSON: -Infinity is not a JSON number"),
    (b'{"v": 1e999}', "not JSON: 1e999 is out of range for a number"),
    (b'{"v": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not JSON: nested too deeply"),
    (b'{"v": "\\ud800"}', "not JSON: a string holds a lone surrogate"),
    (b'{"v": ' + b"9" * 30 + b"}", "not JSON: an integer does not fit in 64 bits"),
    (b'{"v": "\xff"}', "not JSON: not UTF-8 (invalid start byte at byte 7)"),
])
def test_what_the_session_cannot_keep_is_reported_in_one_line(feed_server: FeedServer, body: bytes, reason: str) -> None:
    feed_server.routes["/api"] = {"body": body, "content_type": "application/json"}
    sink = Collect()
    sensor = ApiSensor([ApiSpec(feed_server.url("/api"), 60, "v")], sink)
    assert sensor.poll_once(0) is False
    assert sensor.status()[0].last_error == reason
    assert [c.payload["error"] for c in sink.changes] == ["malformed"]


def test_a_deep_value_is_kept_as_text_in_the_payload(feed_server: FeedServer) -> None:
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    _serve(feed_server, {"v": deep})
    sink = Collect()
    sensor = ApiSensor([ApiSpec(feed_server.url("/api"), 60, "v")], sink)
    assert sensor.poll_once(0) is True
    kept = sink.changes[0].payload["new"]
    assert kept == {"truncated_json": "[" * 40 + "1" + "]" * 40}
