"""Selectors: which part of an evidence a context line carries (DESIGN.md §4), as text.

A selector is one or more ranges joined by ``,``; a range is a path of parts joined by ``/``,
each narrowing the one before it (``page:12/lines:3-9``: lines 3–9 of the text of page 12's part).
The parts:

* ``lines:a-b``, ``chars:a-b``, ``turns:a-b`` — line numbers (1-based, inclusive), character
  offsets (end exclusive), message indexes, as the compiler and the summaries write them;
* ``page:12``, ``page:12-13`` — 1-based page numbers of the file, as a viewer shows them;
* ``section:"Budget"`` — the heading of a document's section (``"`` and ``\\`` escaped by ``\\``);
* ``sheet:Q3!A1:F20`` — a spreadsheet range; a sheet name that is not a plain word is quoted as a
  spreadsheet quotes it (``sheet:'Q3 2024'!A1:F20``, a ``'`` doubled).

Pure: building, parsing and describing them for people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PLAIN_SHEET = re.compile(r"^[A-Za-z0-9_.]+$")


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a range: its kind and its value as written (a section's title unquoted)."""

    kind: str
    value: str

    def first_last(self) -> tuple[int, int] | None:
        """(a, b) of a numeric part (``page:12`` is (12, 12)); None for the others."""
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", self.value)
        if m is None or self.kind not in ("lines", "chars", "turns", "page"):
            return None
        return int(m.group(1)), int(m.group(2) or m.group(1))


def page(first: int, last: int | None = None) -> str:
    """``page:12`` or ``page:12-13``."""
    return f"page:{first}" if last is None or last == first else f"page:{first}-{last}"


def section(title: str) -> str:
    """``section:"Budget"`` (quotes and backslashes in the title escaped)."""
    return 'section:"' + title.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sheet(name: str, cells: str) -> str:
    """``sheet:Q3!A1:F20``; a name that is not a plain word quoted (``'Q3 2024'``)."""
    shown = name if _PLAIN_SHEET.match(name) else "'" + name.replace("'", "''") + "'"
    return f"sheet:{shown}!{cells}"


def lines(first: int, last: int) -> str:
    return f"lines:{first}-{last}"


def within(outer: str, inner: str) -> str:
    """``inner`` (ranges of ``outer``'s text) narrowed from ``outer``: each of its ranges
    prefixed by ``outer/``. Either may be empty."""
    if not outer or not inner:
        return outer or inner
    return ",".join(f"{outer}/{r}" for r in split_ranges(inner))


def body_lines(selector: str, fenced_lines: int) -> str:
    """The ``lines:`` ranges of ``selector``, given for a fenced text of ``fenced_lines`` lines
    (a header line, the ``<<<`` opener, the body, ``>>>``), as ranges of the body alone; the
    frame lines left out."""
    body = fenced_lines - 3
    out = []
    for parts in parse(selector):
        span = parts[0].first_last() if len(parts) == 1 and parts[0].kind == "lines" else None
        if span is None:
            continue
        first, last = max(1, span[0] - 2), min(body, span[1] - 2)
        if first <= last:
            out.append(lines(first, last))
    return ",".join(out)


def _scan(text: str, stops: str) -> list[str]:
    """``text`` split at the characters of ``stops`` outside quotes (``"…"`` with ``\\``
    escapes, ``'…'`` with doubled quotes)."""
    out, cur, quote, i = [], [], "", 0
    while i < len(text):
        ch = text[i]
        if quote == '"' and ch == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if quote and ch == quote:
            quote = ""
        elif not quote and ch in "\"'" and (not cur or cur[-1].endswith((":", "!")) or ch == '"'):
            quote = ch
        elif not quote and ch in stops:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def split_ranges(selector: str) -> list[str]:
    """The ranges of a selector (split at ``,`` outside quotes), empty ones left out."""
    return [r for r in _scan(selector, ",") if r]


def _unquote_section(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse(selector: str) -> list[list[Part]]:
    """The ranges of ``selector``, each a list of parts (outermost first). A part without a
    kind is kept with kind ""; nothing raises."""
    ranges = []
    for text in split_ranges(selector):
        parts = []
        for raw in _scan(text, "/"):
            kind, sep, value = raw.partition(":")
            if not sep:
                parts.append(Part("", raw))
                continue
            parts.append(Part(kind, _unquote_section(value) if kind == "section" else value))
        ranges.append(parts)
    return ranges


def sheet_parts(value: str) -> tuple[str, str]:
    """(sheet name, cell range) of a ``sheet:`` part's value."""
    name, _, cells = value.rpartition("!")
    if len(name) >= 2 and name[0] == name[-1] == "'":
        name = name[1:-1].replace("''", "'")
    return name, cells


def describe_part(part: Part) -> str:
    """A part for people: "page 12", "pages 12–13", "section “Budget”", "sheet Q3, A1:F20"."""
    span = part.first_last()
    if part.kind == "page" and span is not None:
        return f"page {span[0]}" if span[0] == span[1] else f"pages {span[0]}\u2013{span[1]}"
    if part.kind == "section":
        return f"section \u201c{part.value}\u201d"
    if part.kind == "sheet":
        name, cells = sheet_parts(part.value)
        return f"sheet {name}, {cells}"
    if span is not None:
        label = {"lines": "line", "chars": "characters", "turns": "messages"}[part.kind]
        if part.kind == "lines":
            return f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}\u2013{span[1]}"
        return f"{label} {span[0]}\u2013{span[1]}"
    return f"{part.kind} {part.value}".strip()


def describe(selector: str) -> str:
    """The selector for people: its ranges' outermost parts, repeated ones said once
    ("page 12", "section “Budget”, lines 3–9")."""
    said: list[str] = []
    for parts in parse(selector):
        for n, part in enumerate(parts):
            if part.kind in ("lines", "chars") and n > 0:
                continue  # a narrowing inside a part: the part is what a person looks for
            text = describe_part(part)
            if text not in said:
                said.append(text)
    return ", ".join(said)


def first_page(selector: str) -> int | None:
    """The first page a selector names (to open a viewer there), None when it names none."""
    for parts in parse(selector):
        for part in parts:
            span = part.first_last()
            if part.kind == "page" and span is not None:
                return span[0]
    return None
