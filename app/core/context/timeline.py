"""The time channel: turns found by the times they mention, and the dated turns a "when" question wants.

A turn that says "I went to a fair yesterday" on 25 April is about 24 April, whenever it is
read. ``app.core.text.times.time_mentions`` resolves every time expression of a stored turn (or
note) against the moment it was said, so recall can reach turns by the time they *speak of*, not
only by the time they were said (the plan's date range does the latter):

- ``hits``: with a date range (the input names one: "on May 3, 2023", "in July", or a time
  before or after an event, ``app.core.context.parts``), the items that mention a time inside it,
  scored by how much of the mentioned span lies inside (a day inside a month: 1; "last year"
  around a week: 7/365); the best first, ties to the latest;
- ``dated``: the items among the candidates that mention a time at all; the input asking for a
  time ("When did Jon go to the fair?", ``asks_time``) marks them in the fusion: its answer is a
  turn that says when ("Yesterday, I went to a fair…"), not one of the turns around it that ask
  about it ("Wow, what was it like?").

Pure functions of the session state, the request and the texts; replay recomputes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from app.core.context.recall_model import RecallRequest
from app.core.session.state import SessionState
from app.core.text.times import TimeMention, parse_now, time_mentions


def item_mentions(state: SessionState, item: str) -> tuple[TimeMention, ...]:
    """The time expressions of a message or note, resolved against when it was said."""
    view = state.messages.get(item)
    if view is not None:
        return time_mentions(view.text, view.at)
    note = state.notes.get(item)
    return time_mentions(note.text, note.at) if note is not None else ()


def span_of(state: SessionState, item: str) -> tuple[datetime, datetime] | None:
    """When an item is about: its first time mention's span, else the moment it was said (None:
    undated)."""
    found = item_mentions(state, item)
    if found:
        return found[0].start, found[0].end
    view = state.messages.get(item)
    at = view.at if view is not None else state.notes[item].at if item in state.notes else ""
    moment = parse_now(at) if at else None
    return (moment, moment) if moment is not None else None


def inside(mention: TimeMention, start: datetime | None, end: datetime | None) -> float:
    """The share of the mention's span inside ``[start, end)`` (an open side: no bound), in [0, 1]."""
    lo = mention.start if start is None else max(mention.start, start)
    hi = mention.end if end is None else min(mention.end, end)
    width = (mention.end - mention.start).total_seconds()
    return max(0.0, (hi - lo).total_seconds()) / width if width > 0 else 0.0


def hits(state: SessionState, req: RecallRequest, size: int, ids: Iterable[str] | None = None) -> list[tuple[str, float]]:
    """The items (of ``ids``, else the session's messages) that mention a time inside the
    request's date range, by the share of the mention inside it; none without a range."""
    if size <= 0 or not (req.since or req.until):
        return []
    start = parse_now(req.since) if req.since else None
    end = parse_now(req.until) if req.until else None
    scored: list[tuple[float, int, str]] = []
    for n, item in enumerate(state.order if ids is None else ids):
        best = max((inside(m, start, end) for m in item_mentions(state, item)), default=0.0)
        if best > 0:
            scored.append((best, n, item))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    return [(item, round(score, 6)) for score, _, item in scored[:size]]


def dated(state: SessionState, items: Iterable[str]) -> list[str]:
    """The items that mention a time."""
    return [i for i in items if item_mentions(state, i)]
