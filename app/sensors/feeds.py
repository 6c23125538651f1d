"""The feed sensor: RSS/Atom URLs or local files polled on an interval → one change per new entry.

Each source is polled on its own daemon thread (:class:`~app.sensors.fetch.PollingThreads`):
fetched as bytes with a size and a time cap (``timeout_s``, a hard deadline), conditionally (ETag /
Last-Modified; a local file's size and mtime), then parsed in a child process killed after
``parse_timeout_s`` (:mod:`app.sensors.feedparse`: feedparser from the bytes, entries de-duplicated
by id against the ids seen so far — the stored events give them back after a restart:
``seen_from_events`` — and each new entry made into a ``feed`` change of labelled plain text). So a
poll never takes longer than ``timeout_s + parse_timeout_s``.

A failure of the whole source (network, size, time, malformed XML, a body that is not a feed at all:
an HTML page, an empty response, JSON) is recorded in :meth:`FeedSensor.status` and reported once as
an ``error`` change while it persists; the thread keeps polling and picks up the next valid
version. One bad entry (an invalid character, an absurdly long field) never blocks the feed: it is
skipped, counted (``entries_skipped``) and named with its reason in the status (``skipped``); the
other entries land.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from app.core.runtime.intake import RawChange
from app.sensors.base import FeedSourceLike, Sink, StatusBoard
from app.sensors.feedparse import PARSE_TIMEOUT_S, parse_in_child
from app.sensors.fetch import FetchError, PolledSensor, PollingThreads, Validators, fetch_bytes

log = logging.getLogger(__name__)
_KEEP_SKIPPED = 20  # the most recent skipped entries named in the status


def seen_from_events(events: Iterable[Any]) -> dict[str, set[str]]:
    """Entry ids per feed URL already stored in the session's ``feed`` env events, so a restart
    does not repeat them."""
    seen: dict[str, set[str]] = {}
    for event in events:
        payload = getattr(event, "payload", None) or {}
        if getattr(event, "kind", "") == "feed" and payload.get("entry_id"):
            seen.setdefault(str(payload.get("feed", getattr(event, "source", ""))), set()).add(str(payload["entry_id"]))
    return seen


class FirstPoll(StrEnum):
    """What the first successful poll of a source with no seen ids does."""

    EMIT = "emit"  # every entry present becomes a change (capped by max_entries_per_poll)
    BASELINE = "baseline"  # the entries present are marked seen; only later ones become changes


class _FeedState:
    """Per-source state, touched only by that source's thread."""

    def __init__(self, seen: Iterable[str], max_seen: int) -> None:
        self.validators: Validators | None = None
        self.seen: OrderedDict[str, None] = OrderedDict((s, None) for s in seen)
        self.max_seen = max_seen
        self.polled_ok = False

    def remember(self, ids: Iterable[str]) -> None:
        for i in ids:
            self.seen[i] = None
            self.seen.move_to_end(i)
        while len(self.seen) > self.max_seen:  # bounded: the oldest ids fall out first
            self.seen.popitem(last=False)


class FeedSensor(PolledSensor):
    """Polls each feed on its interval; ``sink`` gets a change per new entry and per new error."""

    name = "feeds"

    def __init__(
        self,
        sources: Sequence[FeedSourceLike],
        sink: Sink,
        *,
        max_bytes: int = 2_000_000,
        timeout_s: float = 10.0,
        seen: Mapping[str, Iterable[str]] | None = None,
        first_poll: FirstPoll = FirstPoll.EMIT,
        max_entries_per_poll: int = 100,
        max_seen: int = 10_000,
        parse_timeout_s: float = PARSE_TIMEOUT_S,
    ) -> None:
        unique: dict[str, FeedSourceLike] = {}
        for s in sources:
            unique.setdefault(s.url, s)
        self.sources: list[FeedSourceLike] = list(unique.values())
        self._sink = sink
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s
        self._parse_timeout_s = parse_timeout_s
        self._first_poll = first_poll
        self._max_entries = max_entries_per_poll
        seen = seen or {}
        self._state = [_FeedState(seen.get(s.url, ()), max_seen) for s in self.sources]
        self._locks = [threading.Lock() for _ in self.sources]
        self._board = StatusBoard(self.name, [s.url for s in self.sources])
        self._threads = PollingThreads(self.name, [s.interval_s for s in self.sources])

    def seen_ids(self, url: str) -> list[str]:
        """The ids seen so far for ``url`` (what the engine persists), oldest first."""
        for source, state, lock in zip(self.sources, self._state, self._locks):
            if source.url == url:
                with lock:
                    return list(state.seen)
        return []

    def poll_once(self, index: int) -> int:
        """Poll source ``index`` now (blocking); returns how many new entries were sent."""
        with self._locks[index]:  # a manual poll and the thread never interleave on one source
            return self._poll(index)

    @property
    def poll_cap_s(self) -> float:
        """The longest one poll can take: the fetch's deadline plus the parse's."""
        return self._timeout_s + self._parse_timeout_s

    def _poll(self, index: int) -> int:
        url = self.sources[index].url
        self._board.add(url, "polls")
        started = time.monotonic()
        try:
            return self._fetch_and_parse(index)
        finally:
            took_ms = round((time.monotonic() - started) * 1000)
            self._board.set_detail(url, last_poll_ms=took_ms)
            self._board.maximum(url, "slowest_poll_ms", took_ms)

    def _fetch_and_parse(self, index: int) -> int:
        url = self.sources[index].url
        state = self._state[index]
        try:
            result = fetch_bytes(url, max_bytes=self._max_bytes, timeout_s=self._timeout_s, validators=state.validators)
        except FetchError as exc:
            self._report(url, exc.reason, str(exc))
            return 0
        if result.not_modified:
            self._board.add(url, "not_modified")
            self._board.ok(url)
            return 0
        baseline = not state.polled_ok and not state.seen and self._first_poll is FirstPoll.BASELINE
        outcome = parse_in_child(result.body or b"", url=url, content_type=result.content_type, seen=list(state.seen),
                                 emit=not baseline, max_entries=self._max_entries, timeout_s=self._parse_timeout_s)
        # Keep the validators even for a malformed version: polling it again gets a 304 until
        # it changes, and the error stays reported once.
        state.validators = result.validators
        if outcome.get("peak_mb"):
            self._board.maximum(url, "parse_peak_mb", outcome["peak_mb"])
        if outcome["kind"] != "ok":
            self._report(url, str(outcome["kind"]), str(outcome["message"]))
            return 0
        self._board.set_detail(url, feed_title=outcome["feed_title"], entries_in_feed=outcome["entries_in_feed"])
        state.polled_ok = True
        sent = 0
        for fields in outcome["changes"]:
            self._sink(RawChange(**fields))
            sent += 1
        state.remember(reversed(outcome["fresh"]))  # all of them: skipped ones stay skipped
        self._note_skipped(url, outcome["skipped"])
        self._board.add(url, "entries_seen", sent)
        self._board.ok(url)
        return sent

    def _note_skipped(self, url: str, skipped: list[dict[str, str]]) -> None:
        """Count and name the entries skipped by this poll (newest last) in the status."""
        if not skipped:
            return
        for item in skipped:
            log.warning("feed %s: skipped entry %s: %s", url, item["entry_id"], item["reason"])
        previous = self._board.detail(url).get("skipped", [])
        self._board.set_detail(url, skipped=[*previous, *skipped][-_KEEP_SKIPPED:])
        self._board.add(url, "entries_skipped", len(skipped))

    def _report(self, url: str, reason: str, message: str) -> None:
        if self._board.error(url, message):
            self._sink(RawChange(
                key=f"feed:{url}#error", kind="feed", source=url, uri=url, change="error",
                title=f"Feed error: {url}", content=message, payload={"error": reason, "message": message},
            ))
