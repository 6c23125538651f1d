"""The feed sensor: RSS/Atom URLs or local files polled on an interval → one change per new entry.

Each source is polled on its own daemon thread (:class:`~app.sensors.fetch.PollingThreads`):
fetched as bytes with a size and a time cap, conditionally (ETag / Last-Modified; a local file's
size and mtime), parsed with ``feedparser`` from the bytes, de-duplicated by entry id against the
ids seen so far (the stored events give them back after a restart: ``seen_from_events``), and each new entry
becomes a ``feed`` change whose content is labelled plain text. A failure (network, size, time,
malformed XML) is recorded in :meth:`FeedSensor.status` and reported once as an ``error`` change
while it persists; the thread keeps polling and picks up the next valid version.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

import feedparser

from app.core.runtime.intake import RawChange
from app.sensors.base import FeedSourceLike, Sink, StatusBoard
from app.sensors.fetch import FetchError, PolledSensor, PollingThreads, Validators, fetch_bytes
from app.sensors.text import html_to_text

# Bozo exceptions that do not make the entries untrustworthy (the XML parsed; only the declared
# encoding or the served content type was off).
_BENIGN_BOZO = (feedparser.CharacterEncodingOverride, feedparser.NonXMLContentType)


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


def entry_id(entry: Mapping[str, Any]) -> str:
    """The entry's id, else its link, else a hash of its title and date."""
    for key in ("id", "link"):
        value = entry.get(key)
        if value:
            return str(value)
    basis = f"{entry.get('title', '')}\x1f{entry.get('published', entry.get('updated', ''))}"
    return "sha1:" + hashlib.sha1(basis.encode("utf-8")).hexdigest()[:20]


def _plain(detail: Mapping[str, Any] | None, value: str) -> str:
    kind = str((detail or {}).get("type", "text/html"))
    return value.strip() if kind == "text/plain" else html_to_text(value)


def entry_text(entry: Mapping[str, Any], feed_title: str = "", *, max_chars: int = 20_000) -> str:
    """Labelled plain text of an entry: Title/Feed/Published/Link/Author lines, a blank line, and
    the longest of its content and summary with the HTML stripped."""
    title = _plain(entry.get("title_detail"), str(entry.get("title", "")))
    body = ""
    candidates: list[tuple[Mapping[str, Any] | None, str]] = [
        (c, str(c.get("value", ""))) for c in entry.get("content", []) or []
    ]
    if entry.get("summary"):
        candidates.append((entry.get("summary_detail"), str(entry["summary"])))
    if candidates:
        detail, value = max(candidates, key=lambda c: len(c[1]))
        body = _plain(detail, value)
    labels = [
        ("Title", title),
        ("Feed", feed_title),
        ("Published", str(entry.get("published") or entry.get("updated") or "")),
        ("Link", str(entry.get("link", ""))),
        ("Author", str(entry.get("author", ""))),
    ]
    head = "\n".join(f"{k}: {v}" for k, v in labels if v)
    text = f"{head}\n\n{body}" if body else head
    return text[:max_chars]


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
    ) -> None:
        unique: dict[str, FeedSourceLike] = {}
        for s in sources:
            unique.setdefault(s.url, s)
        self.sources: list[FeedSourceLike] = list(unique.values())
        self._sink = sink
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s
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

    def _poll(self, index: int) -> int:
        url = self.sources[index].url
        state = self._state[index]
        self._board.add(url, "polls")
        try:
            result = fetch_bytes(url, max_bytes=self._max_bytes, timeout_s=self._timeout_s, validators=state.validators)
        except FetchError as exc:
            self._report(url, exc.reason, str(exc))
            return 0
        if result.not_modified:
            self._board.add(url, "not_modified")
            self._board.ok(url)
            return 0
        # A stream, never the bytes themselves: given bytes, feedparser first tries them as a
        # file name, so a server answering "/etc/passwd" would make it read a local file.
        headers = {"content-type": result.content_type} if result.content_type else None
        parsed = feedparser.parse(io.BytesIO(result.body or b""), response_headers=headers)
        # Keep the validators even for a malformed version: polling it again gets a 304 until
        # it changes, and the error stays reported once.
        state.validators = result.validators
        if parsed.get("bozo") and not isinstance(parsed.get("bozo_exception"), _BENIGN_BOZO):
            exc_text = str(parsed.get("bozo_exception") or "unknown parse error")
            self._report(url, "malformed", f"malformed feed: {exc_text}")
            return 0
        feed_title = html_to_text(str(parsed.feed.get("title", "")))
        self._board.set_detail(url, feed_title=feed_title, entries_in_feed=len(parsed.entries))
        baseline = not state.polled_ok and not state.seen and self._first_poll is FirstPoll.BASELINE
        state.polled_ok = True
        fresh: list[tuple[str, Any]] = []
        fresh_ids: set[str] = set()
        for entry in parsed.entries:
            eid = entry_id(entry)
            if eid not in state.seen and eid not in fresh_ids:
                fresh_ids.add(eid)
                fresh.append((eid, entry))
        if baseline:
            state.remember(eid for eid, _ in reversed(fresh))
            self._board.ok(url)
            return 0
        # Feeds list newest first: keep the newest few, send them oldest first.
        sent = 0
        for eid, entry in reversed(fresh[: self._max_entries]):
            link = str(entry.get("link", "") or url)
            payload = {
                "entry_id": eid,
                "feed": url,
                "feed_title": feed_title,
                "link": str(entry.get("link", "")),
                "published": str(entry.get("published") or entry.get("updated") or ""),
                "author": str(entry.get("author", "")),
                "tags": [str(t.get("term", "")) for t in entry.get("tags", []) or [] if t.get("term")],
            }
            self._sink(RawChange(
                key=f"feed:{url}#{eid}", kind="feed", source=url, uri=link, change="new",
                title=_plain(entry.get("title_detail"), str(entry.get("title", ""))) or link,
                content=entry_text(entry, feed_title), payload=payload,
            ))
            sent += 1
        state.remember(eid for eid, _ in reversed(fresh))  # all of them: skipped ones stay skipped
        self._board.add(url, "entries_seen", sent)
        self._board.ok(url)
        return sent

    def _report(self, url: str, reason: str, message: str) -> None:
        if self._board.error(url, message):
            self._sink(RawChange(
                key=f"feed:{url}#error", kind="feed", source=url, uri=url, change="error",
                title=f"Feed error: {url}", content=message, payload={"error": reason, "message": message},
            ))
