"""Time expressions in an input → the date range recall is restricted to (seed 000 §6.1: time window).

``date_range(text, now)`` reads the first time expression of ``text`` that names a span of
calendar time ("yesterday", "last week", "in March", "3 days ago", "since May", "in 2023",
"this morning", "recently", or one calendar day: "7 July, 2023", "July 7th", "2023-07-07"; a
day without its year is its latest occurrence) and returns it as a ``DateRange`` of ISO
timestamps relative to ``now`` (the moment of the input): ``start`` inclusive, ``end``
exclusive, both in the format the store uses (``YYYY-MM-DDTHH:MM:SS``, UTC). Nothing matched,
or ``now`` unknown → ``None``.

The range bounds *when a stored item was said or observed*: "what did we decide last week"
looks at last week's turns. It is applied by the structured, vector and full-text channels (the
index channels push it into LanceDB's ``where``). Pure and deterministic.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import BaseModel

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_RE = "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS if m != "may") + "|sept"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3}
_NUM = r"(\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_UNIT = r"(hours?|days?|weeks?|months?|years?)"
#: Recent words without a definite span: the last few days.
RECENT_DAYS = 7


#: Spans at most this long that end near the input are about when things were said ("what did we
#: decide yesterday / last week"): recall is restricted to them. Longer or vaguer ones ("in March",
#: "last year", "recently") more often name when an event happened, which a turn may mention at any
#: time: they only favour the items inside them.
FILTER_MAX_DAYS = 31


class DateRange(BaseModel):
    """``[start, end)`` in ISO 8601 (UTC, seconds); ``expression`` is the words it was read from.

    ``mode``: "filter" — channels keep only items inside the range (pushed into the index query);
    "prefer" — items inside it are marked by the structured channel, nothing is excluded.
    """

    start: str
    end: str
    expression: str
    mode: str = "filter"


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1)


def _month_index(word: str) -> int:
    word = word.lower()
    return next(n for n, m in enumerate(MONTHS, start=1) if m.startswith(word[:3]))


def _amount(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def _span(unit: str, n: int) -> timedelta:
    unit = unit.rstrip("s")
    days = {"hour": 0, "day": 1, "week": 7, "month": 30, "year": 365}[unit]
    return timedelta(hours=n) if unit == "hour" else timedelta(days=days * n)


def _relative_day(word: str, now: datetime) -> tuple[datetime, datetime] | None:
    today = _day(now)
    if word == "today" or word == "this morning" or word == "tonight" or word == "this afternoon":
        return today, today + timedelta(days=1)
    if word == "yesterday" or word == "last night":
        return today - timedelta(days=1), today
    return None


def _calendar(kind: str, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """"this"/"last" week, month or year as calendar spans (weeks start on Monday)."""
    today = _day(now)
    if unit == "week":
        start = today - timedelta(days=today.weekday())
        return (start, start + timedelta(days=7)) if kind == "this" else (start - timedelta(days=7), start)
    if unit == "month":
        start = _month_start(now.year, now.month)
        if kind == "this":
            return start, _month_start(now.year, now.month + 1)
        return _month_start(now.year, now.month - 1), start
    start = datetime(now.year, 1, 1)
    return (start, datetime(now.year + 1, 1, 1)) if kind == "this" else (datetime(now.year - 1, 1, 1), start)


def _month_span(month: int, year: int | None, now: datetime) -> tuple[datetime, datetime]:
    """A named month: of the given year, else its latest occurrence not after ``now``."""
    if year is None:
        year = now.year if month <= now.month else now.year - 1
    return _month_start(year, month), _month_start(year, month + 1)


def _weekday_span(day: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest ``day`` before today ("on Monday", "last Monday")."""
    today = _day(now)
    back = (today.weekday() - WEEKDAYS.index(day)) % 7 or 7
    start = today - timedelta(days=back)
    return start, start + timedelta(days=1)


_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_NO_DAY = r"(?!\.?\s+\d{1,2}(?:st|nd|rd|th)?\b)"  # "of March 7th" is a day, not the month
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("day_month", re.compile(rf"\b{_ORD}\s+(?:of\s+)?({_MONTH_RE})\b\.?(?:,?\s+(\d{{4}})\b)?")),
    ("month_day", re.compile(rf"\b({_MONTH_RE})\.?\s+{_ORD}\b(?:,?\s+(\d{{4}})\b)?")),
    ("day", re.compile(r"\b(today|yesterday|this morning|this afternoon|tonight|last night)\b")),
    ("ago", re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b")),
    ("past", re.compile(rf"\b(?:in\s+|over\s+|during\s+)?the\s+(?:last|past)\s+{_NUM}\s+{_UNIT}\b")),
    ("past1", re.compile(r"\b(?:in\s+|over\s+|during\s+)?the\s+(?:last|past)\s+(hour|day|week|month|year)\b")),
    ("calendar", re.compile(r"\b(this|last)\s+(week|month|year)\b")),
    ("weekday", re.compile(r"\b(?:on\s+|last\s+)(" + "|".join(WEEKDAYS) + r")\b")),
    ("since", re.compile(rf"\bsince\s+({_MONTH_RE})\b{_NO_DAY}(?:\s+(\d{{4}}))?")),
    ("month", re.compile(rf"\b(?:in|during|of|from)\s+({_MONTH_RE})\b{_NO_DAY}(?:\s+(\d{{4}}))?")),
    ("year", re.compile(r"\b(?:in|during)\s+((?:19|20)\d{2})\b")),
    ("recent", re.compile(r"\b(recently|lately|these days|the other day)\b")),
)


def _date_span(year: int | None, month: int, day: int, now: datetime) -> tuple[datetime, datetime]:
    """One calendar day: of the given year, else its latest occurrence not after ``now``.

    Raises ``ValueError`` for a day the month does not have ("30 February")."""
    if year is None:
        year = now.year if (month, day) <= (now.month, now.day) else now.year - 1
    start = datetime(year, month, day)
    return start, start + timedelta(days=1)


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The ``[start, end)`` of one matched expression (``ValueError``: not a real date)."""
    if kind == "iso":
        return _date_span(int(m.group(1)), int(m.group(2)), int(m.group(3)), now)
    if kind in ("day_month", "month_day"):
        day, month = (m.group(1), m.group(2)) if kind == "day_month" else (m.group(2), m.group(1))
        year = int(m.group(3)) if m.group(3) else None
        return _date_span(year, _month_index(month), int(day), now)
    if kind == "day":
        found = _relative_day(m.group(1), now)
        assert found is not None
        return found
    if kind in ("ago", "past"):
        n, unit = _amount(m.group(1)), m.group(2)
        if kind == "past":
            return now - _span(unit, n), now
        centre = now - _span(unit, n)  # "3 days ago": that day; "2 weeks ago": that week
        width = _span(unit, 1)
        return (_day(centre), _day(centre) + timedelta(days=1)) if unit.startswith("day") else (centre - width / 2, centre + width / 2)
    if kind == "past1":
        return now - _span(m.group(1), 1), now
    if kind == "calendar":
        return _calendar(m.group(1), m.group(2), now)
    if kind == "weekday":
        return _weekday_span(m.group(1), now)
    if kind in ("since", "month"):
        month = _month_index(m.group(1))
        year = int(m.group(2)) if m.group(2) else None
        start, end = _month_span(month, year, now)
        return (start, now) if kind == "since" else (start, end)
    if kind == "year":
        year = int(m.group(1))
        return datetime(year, 1, 1), datetime(year + 1, 1, 1)
    return now - timedelta(days=RECENT_DAYS), now


def _the_verb_may(text: str, m: re.Match[str], group: int) -> bool:
    """The month word (``group``) of a day match is "may" written in lowercase in ``text``."""
    return text[m.start(group):m.end(group)] == "may"


def parse_now(now: str) -> datetime | None:
    """``now`` as a naive UTC datetime ('Z' and offsets accepted), or None when it is not ISO."""
    try:
        moment = datetime.fromisoformat(now.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.replace(tzinfo=None) - (moment.utcoffset() or timedelta())
    return moment


def date_range(text: str, now: str) -> DateRange | None:
    """The span of the first time expression in ``text`` (by position), relative to ``now``."""
    moment = parse_now(now) if now else None
    if moment is None:
        return None
    # lowercased character by character where that keeps the length ("İ" lowers to two), so that
    # an offset in ``lowered`` is the same offset in ``text``
    lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text).replace("\u2019", "'")
    found: list[tuple[int, int, str, re.Match[str], tuple[datetime, datetime]]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(lowered):
            if kind in ("day_month", "month_day") and _the_verb_may(text, m, 2 if kind == "day_month" else 1):
                continue  # "you may 2 ...", "4 may be": the verb; the month is written "May"
            try:
                span = _resolve(kind, m, moment)
            except ValueError:  # "30 February", "2023-13-40": not a date, look further
                continue
            found.append((m.start(), -len(m.group(0)), kind, m, span))
            break
    if not found:
        return None
    _, _, kind, m, (start, end) = min(found, key=lambda f: (f[0], f[1]))
    end = min(end, moment + timedelta(seconds=1))  # nothing said after the input
    if start >= end:  # a span in the future: nothing stored can fall in it
        return None
    short = end - start <= timedelta(days=FILTER_MAX_DAYS) and moment - end <= timedelta(days=FILTER_MAX_DAYS)
    mode = "filter" if short and kind not in ("recent", "month", "since", "year") else "prefer"
    return DateRange(start=_iso(start), end=_iso(end), expression=m.group(0).strip(), mode=mode)
