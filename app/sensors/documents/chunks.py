"""Structure-aware chunks: a document's units (pages, sections, sheets, line ranges) cut into parts.

A reader turns a file into :class:`Unit`\\ s — the pieces a citation names: a PDF page
(``page:12``), a section under a heading (``section:"Budget"``), a block of a sheet
(``sheet:Q3!A1:F20``) or of a text file's lines (``lines:40-80``) — each with its heading path
and its text as lines. :func:`parts_of` cuts every unit into parts of at most ``max_words``
words at line boundaries; a unit cut in several parts narrows its selector by the lines of its
text each part holds (``page:12/lines:1-30``), or, when its lines are the file's own
(``absolute``), gives each part its own ``lines:a-b``. PDF pages with next to no text are merged
with the pages after them (``page:12-13``). A part is a dict as the child process sends it:
``selector``, ``heading`` (the path, outermost first) and ``text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_WORDS = 160  # of a part: within what the embedder reads (256 word pieces) and a context's share of evidence
MIN_PAGE_WORDS = 25  # a page with fewer words joins the next page's part


@dataclass
class Unit:
    """One citable piece of a document: its selector, heading path and lines of text.
    ``first_line``: the number of its first line in the file when its lines are the file's own
    (Markdown, code, CSV), 0 when they are not (a PDF page, a section of a Word file)."""

    selector: str
    heading: list[str]
    lines: list[str] = field(default_factory=list)
    first_line: int = 0
    header: str = ""  # repeated at the top of every part (a table's header row)
    page: int = 0  # a PDF page number (pages with little text merge)


def _words(line: str) -> int:
    return len(line.split())


def _split_long(line: str, max_words: int) -> list[str]:
    words = line.split()
    if len(words) <= max_words:
        return [line]
    return [" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)]


def _groups(lines: list[str], budget: int) -> list[tuple[int, int]]:
    """(first, last) line indexes of consecutive groups within ``budget`` words each."""
    out: list[tuple[int, int]] = []
    start, words = 0, 0
    for i, line in enumerate(lines):
        n = _words(line)
        if i > start and words + n > budget:
            out.append((start, i - 1))
            start, words = i, 0
        words += n
    if lines:
        out.append((start, len(lines) - 1))
    return out


def _selector(unit: Unit, first: int, last: int, whole: bool) -> str:
    if unit.first_line:
        return f"lines:{unit.first_line + first}-{unit.first_line + last}"
    return unit.selector if whole else f"{unit.selector}/lines:{first + 1}-{last + 1}"


def unit_parts(unit: Unit, max_words: int = MAX_WORDS) -> list[dict[str, Any]]:
    """The parts of one unit (none when it holds no text)."""
    if not any(line.strip() for line in unit.lines):
        return []
    lines = unit.lines
    if any(_words(line) > max_words for line in lines) and not unit.first_line:
        lines = [piece for line in lines for piece in _split_long(line, max_words)]
    budget = max(20, max_words - _words(unit.header))
    groups = _groups(lines, budget)
    out = []
    for first, last in groups:
        body = "\n".join(lines[first:last + 1]).strip("\n")
        if not body.strip():
            continue
        text = f"{unit.header}\n{body}" if unit.header else body
        out.append({"selector": _selector(unit, first, last, len(groups) == 1), "heading": list(unit.heading),
                    "text": text})
    return out


def _count(units: list[Unit]) -> int:
    return sum(_words(line) for u in units for line in u.lines)


def merge_thin_pages(units: list[Unit]) -> list[Unit]:
    """Consecutive pages whose text is shorter than ``MIN_PAGE_WORDS`` join the next page:
    one unit ``page:a-b`` (its heading the last page's); thin pages at the end join the last."""
    out: list[Unit] = []
    pending: list[Unit] = []
    for unit in units:
        pending.append(unit)
        if _count(pending) >= MIN_PAGE_WORDS:
            out.append(_joined(pending))
            pending = []
    if pending and _count(pending) > 0:
        out[-1:] = [_joined([*out[-1:], *pending])]
    return out


def _joined(units: list[Unit]) -> Unit:
    if len(units) == 1:
        return units[0]
    first, last = units[0].page, units[-1].page
    lines = [line for u in units for line in u.lines if line.strip()]
    return Unit(f"page:{first}-{last}", units[-1].heading, lines, page=first)


def parts_of(units: list[Unit], max_words: int = MAX_WORDS) -> list[dict[str, Any]]:
    """Every unit's parts, in document order."""
    return [part for unit in units for part in unit_parts(unit, max_words)]
