"""Time expressions in an input → the date range recall is restricted to (seed 000 §6.1: time window).

``date_range(text, now)`` reads the first time expression of ``text`` that names a span of
calendar time (``app.core.text.times``: "yesterday", "last week", "in March", "3 days ago",
"since May", "in 2023", "this morning", "last weekend", "recently", or one calendar day: "7 July,
2023", "July 7th", "2023-07-07"; a day without its year is its latest occurrence) and returns it
as a ``DateRange`` of ISO timestamps relative to ``now`` (the moment of the input): ``start``
inclusive, ``end`` exclusive, both in the format the store uses (``YYYY-MM-DDTHH:MM:SS``, UTC).
Nothing matched, or ``now`` unknown → ``None``.

The range bounds *when a stored item was said or observed*: "what did we decide last week"
looks at last week's turns. It is applied by the structured, vector and full-text channels (the
index channels push it into LanceDB's ``where``); the time channel (``app.core.context.timeline``)
also finds the turns that *mention* a time inside it. Pure and deterministic.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from app.core.intent.decompose import TIME_RELATION
from app.core.intent.model import Intent
from app.core.text.times import asks_time, first_mention, parse_now

#: Spans at most this long that end near the input are about when things were said ("what did we
#: decide yesterday / last week"): recall is restricted to them. Longer or vaguer ones ("in March",
#: "last year", "recently", "last summer", "last weekend") more often name when an event happened,
#: which a turn may mention at any time ("I volunteered at the shelter last weekend" said weeks
#: before the question): they only favour the items inside them.
FILTER_MAX_DAYS = 31
_PREFER_KINDS = frozenset({"recent", "month", "since", "year", "season", "weekend", "weekends_ago"})


class DateRange(BaseModel):
    """``[start, end)`` in ISO 8601 (UTC, seconds); ``expression`` is the words it was read from.

    ``mode``: "filter" — channels keep only items inside the range (pushed into the index query);
    "prefer" — items inside it are marked by the structured channel, nothing is excluded.
    """

    start: str
    end: str
    expression: str
    mode: str = "filter"


class TimeFocus(BaseModel):
    """What the input asks of time (the time channel, ``app.core.context.timeline``): ``asks`` —
    it asks for a time ("When did…", "How long…": the turns that say when are wanted);
    ``relation`` — "before" or "after" when its first sub-question is asked about the time
    before or after the event its last one names ("What did Caroline do after the adoption
    meeting?")."""

    asks: bool = False
    relation: str = ""


def _iso(moment: datetime) -> str:
    """``moment`` in the store's format (``YYYY-MM-DDTHH:MM:SS``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def date_range(text: str, now: str) -> DateRange | None:
    """The span of the first time expression in ``text`` (by position), relative to ``now``."""
    moment = parse_now(now) if now else None
    found = first_mention(text, moment) if moment is not None else None
    if moment is None or found is None:
        return None
    start, end = found.start, min(found.end, moment + timedelta(seconds=1))  # nothing said after the input
    if start >= end:  # a span in the future: nothing stored can fall in it
        return None
    short = end - start <= timedelta(days=FILTER_MAX_DAYS) and moment - end <= timedelta(days=FILTER_MAX_DAYS)
    mode = "filter" if short and found.kind not in _PREFER_KINDS else "prefer"
    return DateRange(start=_iso(start), end=_iso(end), expression=found.expression, mode=mode)


def time_focus(intent: Intent) -> TimeFocus:
    """What the input asks of time: whether it asks for one (``asks_time``), and the relation of
    its first sub-question to its last one's event that decomposition found (before / after)."""
    relation = intent.hint(TIME_RELATION) or "" if len(intent.sub_questions) >= 2 else ""
    return TimeFocus(asks=asks_time(intent.text), relation=relation)
