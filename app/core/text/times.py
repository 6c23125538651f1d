"""Time expressions: where a text names a span of calendar time, resolved against when it was said.

One parser serves two readers. The plan reads the first expression of an input relative to the
moment of the input (``app.core.plan.timespan.date_range``: "what did we decide yesterday"); the
time channel of recall reads every expression of a stored turn relative to the moment the turn was
said (``app.core.context.timeline``: "I went to a fair yesterday", said on 25 April, is about 24
April). ``mentions(text, said)`` returns those spans, each ``[start, end)`` as naive UTC
datetimes; ``time_mentions(text, said_at)`` is the same for an ISO timestamp, remembered per
(text, timestamp) like the tokenizers' splits (``app.core.text.words``).

What is read: calendar days ("7 July, 2023", "July 7th", "2023-07-07"; a day without its year is
its latest occurrence), relative days ("yesterday", "last night", "tomorrow"), "N units ago",
"the past N units", "this/last/next week|month|year", weekends ("last weekend", "two weekends
ago"), seasons ("last summer"), weekdays ("on Monday", "last Friday"), months ("in March", "since
May"), years ("in 2023") and vague recency ("recently", "lately"). ``asks_time(text)`` says whether
a question asks for a time ("when…", "how long…", "what year…").

Pure and deterministic.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_RE = "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS if m != "may") + "|sept"
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Weekdays as chat writes them; "sat" and "sun" are left out (words of their own).
_WEEKDAY_RE = "|".join(WEEKDAYS) + r"|mon|tues?|wed|thur?s?|fri"
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}  # the month each starts in
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a couple": 2, "a few": 3, "few": 3, "several": 3}
_NUM = r"(\d{1,3}|a couple of|a couple|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_UNIT = r"(hours?|days?|weeks?|months?|years?)"
_SEASON = "|".join(SEASONS)
#: Recent words without a definite span: the last few days.
RECENT_DAYS = 7


@dataclass(frozen=True, slots=True)
class TimeMention:
    """One time expression of a text: the span it names, ``[start, end)``, the words it was read
    from (lower-cased), the kind of pattern that read it and where it starts in the text."""

    start: datetime
    end: datetime
    expression: str
    kind: str
    offset: int


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


def _relative_day(word: str, now: datetime) -> tuple[datetime, datetime]:
    today = _day(now)
    if word in ("yesterday", "last night"):
        return today - timedelta(days=1), today
    if word == "tomorrow":
        return today + timedelta(days=1), today + timedelta(days=2)
    return today, today + timedelta(days=1)  # today, this morning, this afternoon, tonight


def _calendar(kind: str, unit: str, now: datetime) -> tuple[datetime, datetime]:
    """"this"/"last"/"next" week, month or year as calendar spans (weeks start on Monday)."""
    step = {"this": 0, "last": -1, "next": 1}[kind]
    today = _day(now)
    if unit == "week":
        start = today - timedelta(days=today.weekday()) + timedelta(days=7 * step)
        return start, start + timedelta(days=7)
    if unit == "month":
        return _month_start(now.year, now.month + step), _month_start(now.year, now.month + step + 1)
    return datetime(now.year + step, 1, 1), datetime(now.year + step + 1, 1, 1)


def _weekend(kind: str, n: int, now: datetime) -> tuple[datetime, datetime]:
    """Saturday and Sunday: "this" (the coming one, or today's), "next" (the one after), or the
    ``n``-th one back ("last weekend": the latest one before today's)."""
    today = _day(now)
    ahead = (5 - today.weekday()) % 7
    if today.weekday() == 6:
        ahead = -1  # Sunday: this weekend began yesterday
    this = today + timedelta(days=ahead)
    start = this + timedelta(days=7) if kind == "next" else this if kind == "this" else this - timedelta(days=7 * n)
    return start, start + timedelta(days=2)


def _season(kind: str, name: str, now: datetime) -> tuple[datetime, datetime]:
    """A season of three months: "this" (of the current year), "last" (the latest one that has
    ended), "next" (the next one that has not begun)."""
    first = SEASONS[name]
    this = _month_start(now.year - (1 if first == 12 and now.month < 3 else 0), first)
    if kind == "this":
        return this, _month_start(this.year, this.month + 3)
    if kind == "last":
        start = this if _month_start(this.year, this.month + 3) <= now else _month_start(this.year - 1, first)
    else:
        start = this if this > now else _month_start(this.year + 1, first)
    return start, _month_start(start.year, start.month + 3)


def _month_span(month: int, year: int | None, now: datetime) -> tuple[datetime, datetime]:
    """A named month: of the given year, else its latest occurrence not after ``now``."""
    if year is None:
        year = now.year if month <= now.month else now.year - 1
    return _month_start(year, month), _month_start(year, month + 1)


def _weekday_span(kind: str, day: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest ``day`` before today ("on Monday", "last Monday"), or the next one after today
    ("next Monday")."""
    today = _day(now)
    index = next(n for n, name in enumerate(WEEKDAYS) if name.startswith(day[:3]))
    if kind == "next":
        start = today + timedelta(days=(index - today.weekday()) % 7 or 7)
    else:
        start = today - timedelta(days=(today.weekday() - index) % 7 or 7)
    return start, start + timedelta(days=1)


def _date_span(year: int | None, month: int, day: int, now: datetime) -> tuple[datetime, datetime]:
    """One calendar day: of the given year, else its latest occurrence not after ``now``.

    Raises ``ValueError`` for a day the month does not have ("30 February")."""
    if year is None:
        year = now.year if (month, day) <= (now.month, now.day) else now.year - 1
    start = datetime(year, month, day)
    return start, start + timedelta(days=1)


_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_NO_DAY = r"(?!\.?\s+\d{1,2}(?:st|nd|rd|th)?\b)"  # "of March 7th" is a day, not the month
#: The patterns, each with the kind ``_resolve`` reads it as. Where two match at one place, the
#: longer match wins ("last weekend" over "last week").
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("day_month", re.compile(rf"\b{_ORD}\s+(?:of\s+)?({_MONTH_RE})\b\.?(?:,?\s+(\d{{4}})\b)?")),
    ("month_day", re.compile(rf"\b({_MONTH_RE})\.?\s+{_ORD}\b(?:,?\s+(\d{{4}})\b)?")),
    ("day", re.compile(r"\b(today|yesterday|tomorrow|this morning|this afternoon|tonight|last night)\b")),
    ("ago", re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b")),
    ("past", re.compile(rf"\b(?:in\s+|over\s+|during\s+)?the\s+(?:last|past)\s+{_NUM}\s+{_UNIT}\b")),
    ("past1", re.compile(r"\b(?:in\s+|over\s+|during\s+)?the\s+(?:last|past)\s+(hour|day|week|month|year)\b")),
    ("calendar", re.compile(r"\b(this|last|next)\s+(week|month|year)\b")),
    ("weekend", re.compile(r"\b(this|last|next)\s+weekend\b")),
    ("weekends_ago", re.compile(rf"\b{_NUM}\s+weekends?\s+ago\b")),
    ("season", re.compile(rf"\b(this|last|next)\s+({_SEASON})\b")),
    ("weekday", re.compile(rf"\b(on|last|next)\s+({_WEEKDAY_RE})\b\.?")),
    ("since", re.compile(rf"\bsince\s+({_MONTH_RE})\b{_NO_DAY}(?:\s+(\d{{4}}))?")),
    ("month", re.compile(rf"\b(?:in|during|of|from)\s+({_MONTH_RE})\b{_NO_DAY}(?:\s+(\d{{4}}))?")),
    ("year", re.compile(r"\b(?:in|during)\s+((?:19|20)\d{2})\b")),
    ("recent", re.compile(r"\b(recently|lately|these days|the other day)\b")),
)

def _resolve_days(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    """Calendar days and relative days (None: not one of these kinds)."""
    if kind == "iso":
        return _date_span(int(m.group(1)), int(m.group(2)), int(m.group(3)), now)
    if kind in ("day_month", "month_day"):
        day, month = (m.group(1), m.group(2)) if kind == "day_month" else (m.group(2), m.group(1))
        return _date_span(int(m.group(3)) if m.group(3) else None, _month_index(month), int(day), now)
    if kind == "day":
        return _relative_day(m.group(1), now)
    if kind == "weekday":
        return _weekday_span(m.group(1), m.group(2), now)
    return None


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    """The ``[start, end)`` of one matched expression (``ValueError``: not a real date)."""
    days = _resolve_days(kind, m, now)
    if days is not None:
        return days
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
    if kind in ("weekend", "weekends_ago"):
        return _weekend(m.group(1), 1, now) if kind == "weekend" else _weekend("last", _amount(m.group(1)), now)
    if kind == "season":
        return _season(m.group(1), m.group(2), now)
    if kind in ("since", "month"):
        start, end = _month_span(_month_index(m.group(1)), int(m.group(2)) if m.group(2) else None, now)
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


def _lowered(text: str) -> str:
    """``text`` lower-cased character by character where that keeps the length ("İ" lowers to
    two), so that an offset in the result is the same offset in ``text``."""
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text).replace("\u2019", "'")


def _found(text: str, said: datetime, *, first_only: bool) -> list[TimeMention]:
    """The mentions of every pattern (of each pattern its first real date only, when
    ``first_only``), by position, longer first at one position."""
    lowered = _lowered(text)
    found: list[TimeMention] = []
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(lowered):
            if kind in ("day_month", "month_day") and _the_verb_may(text, m, 2 if kind == "day_month" else 1):
                continue  # "you may 2 ...", "4 may be": the verb; the month is written "May"
            try:
                start, end = _resolve(kind, m, said)
            except ValueError:  # "30 February", "2023-13-40": not a date, look further
                continue
            found.append(TimeMention(start, end, m.group(0).strip(), kind, m.start()))
            if first_only:
                break
    return sorted(found, key=lambda f: (f.offset, -len(f.expression)))


def first_mention(text: str, said: datetime) -> TimeMention | None:
    """The first time expression of ``text`` (by position; the longest at one position)."""
    found = _found(text, said, first_only=True)
    return found[0] if found else None


def mentions(text: str, said: datetime) -> tuple[TimeMention, ...]:
    """Every time expression of ``text`` resolved against ``said``, by position, none overlapping
    another (at one place the longest counts)."""
    out: list[TimeMention] = []
    for mention in _found(text, said, first_only=False):
        if not out or mention.offset >= out[-1].offset + len(out[-1].expression):
            out.append(mention)
    return tuple(out)


@functools.lru_cache(maxsize=16384)
def time_mentions(text: str, said_at: str) -> tuple[TimeMention, ...]:
    """``mentions(text, said)`` for the ISO timestamp ``said_at`` (none when it is not one),
    remembered for the last texts read (every build of a session reads the same turns)."""
    said = parse_now(said_at) if said_at else None
    return mentions(text, said) if said is not None and text else ()


_ASKS_TIME = re.compile(
    r"^\W*(?:(?:and|so|but|then|also)\s+)?(?:when|how\s+long|how\s+many\s+(?:days|weeks|months|years|hours)|"
    r"(?:in\s+)?(?:what|which)\s+(?:date|day|year|month|week|time|season))\b|\bsince\s+when\b|\bhow\s+long\s+ago\b",
    re.IGNORECASE)


def asks_time(text: str) -> bool:
    """Whether the question asks for a time: "When did…", "How long…", "In what year…",
    "How many weeks passed…"."""
    return _ASKS_TIME.search(text.strip()) is not None
