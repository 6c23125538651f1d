"""Query-aware compression of long evidence (seed 001 §1.3, §2.3.5: contextual compression).

A long evidence (a file, a feed item, a tool result, a long turn) enters the context as the
lines — or, for prose without line structure, the sentences — that the query needs, not as its
head. ``compress`` splits the text into units, scores each by the query's content words it
holds (weighted by their rarity among the units, ``app.core.context.gate.weights``), and keeps
the best units with one neighbour each side until the token cap; a fenced text keeps its label
and fence lines, and a text with lines keeps its first body line (a title, a table's header)
when there is room. Units that hold none of the query's words are never taken to fill space;
when no unit matches at all, the text's beginning is kept (a file the user named still shows).

The result says exactly what the context carries: ``selector`` (``lines:a-b`` ranges, 1-based,
or ``chars:a-b`` offsets, end exclusive, of the text given) and ``omitted``, the ranges left
out, which the trace lists. Gaps are marked in the text (``[… lines 3-397 …]``).
Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from app.core.context.gate import coverage, weights
from app.core.text.quoting import FENCE_CLOSE, FENCE_OPEN
from app.core.text.sentences import piece_spans


class Compressed(BaseModel):
    """The kept part of an evidence: its text for the context and the selectors of what it holds."""

    text: str
    selector: str  # "lines:a-b,lines:c-d" or "chars:a-b,..." of the original text
    omitted: list[str] = Field(default_factory=list)
    units: int = 0
    kept_units: int = 0
    matched: bool = True  # False when no unit held a query word (the beginning was kept)


class Compression(BaseModel):
    """One evidence that entered compressed: what it carries and what was left out (the trace)."""

    evidence_id: str
    selector: str
    omitted: list[str]
    units: int
    kept_units: int

    @classmethod
    def of(cls, evidence_id: str, cut: Compressed) -> Compression:
        return cls(evidence_id=evidence_id, selector=cut.selector, omitted=cut.omitted, units=cut.units,
                   kept_units=cut.kept_units)


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int  # line number (1-based) or char offset
    end: int  # last line (inclusive) or char end (exclusive)
    text: str
    frame: bool = False  # a fence label or delimiter: always kept


def _line_units(text: str) -> list[_Unit]:
    lines = text.split("\n")
    # The opener may carry the quoted text's label ("<<< notes.txt"): ``fence`` writes it so.
    fenced = len(lines) >= 3 and lines[1].startswith(FENCE_OPEN) and lines[-1].strip() == FENCE_CLOSE
    out = []
    for n, line in enumerate(lines, start=1):
        frame = fenced and (n <= 2 or n == len(lines))
        out.append(_Unit(n, n, line, frame))
    return out


def _sentence_units(text: str) -> list[_Unit]:
    return [_Unit(a, b, text[a:b]) for a, b in piece_spans(text)]


def units_of(text: str) -> tuple[str, list[_Unit]]:
    """("lines", units) for a text of three lines or more, else ("chars", sentence units)."""
    if text.count("\n") >= 2:
        return "lines", _line_units(text)
    return "chars", _sentence_units(text)


def _ranges(picked: list[int]) -> list[tuple[int, int]]:
    """Consecutive unit indexes merged into (first, last) index ranges."""
    out: list[tuple[int, int]] = []
    for i in sorted(picked):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def _selector(kind: str, units: list[_Unit], ranges: list[tuple[int, int]]) -> str:
    return ",".join(f"{kind}:{units[a].start}-{units[b].end}" for a, b in ranges)


def _render(kind: str, units: list[_Unit], ranges: list[tuple[int, int]]) -> str:
    """The kept ranges in order, each gap marked with what was left out."""
    parts: list[str] = []
    sep = "\n" if kind == "lines" else " "
    previous = -1
    for a, b in ranges:
        if a > previous + 1:
            gap = units[previous + 1], units[a - 1]
            what = f"lines {gap[0].start}-{gap[1].end}" if kind == "lines" else f"{gap[1].end - gap[0].start} chars"
            parts.append(f"[… {what} …]")
        parts.append(sep.join(u.text.strip() if kind == "chars" else u.text for u in units[a:b + 1]))
        previous = b
    if previous < len(units) - 1:
        gap = units[previous + 1], units[-1]
        what = f"lines {gap[0].start}-{gap[1].end}" if kind == "lines" else f"{gap[1].end - gap[0].start} chars"
        parts.append(f"[… {what} …]")
    return sep.join(parts) if kind == "chars" else "\n".join(parts)


def _order(units: list[_Unit], query: str) -> tuple[list[int], dict[int, float]]:
    """Unit indexes by descending query score (ties: earlier first), only those that score."""
    body = [i for i, u in enumerate(units) if not u.frame]
    w = weights(query, [units[i].text for i in body])
    score = {i: coverage(w, units[i].text) for i in body}
    return sorted((i for i in body if score[i] > 0), key=lambda i: (-score[i], i)), score


class _Picker:
    """The units kept so far; a unit is taken only when the rendered result still fits."""

    def __init__(self, kind: str, units: list[_Unit], max_tokens: int, count: Callable[[str], int]) -> None:
        self.kind, self.units, self.max_tokens, self.count = kind, units, max_tokens, count
        self.picked: list[int] = []

    def take(self, i: int) -> bool:
        if i in self.picked:
            return True
        trial = sorted({*self.picked, i})
        if self.count(_render(self.kind, self.units, _ranges(trial))) > self.max_tokens:
            return False
        self.picked = trial
        return True

    def take_with_neighbours(self, i: int) -> None:
        if self.take(i):
            for j in (i - 1, i + 1):
                if 0 <= j < len(self.units):
                    self.take(j)


def compress(text: str, query: str, max_tokens: int, count: Callable[[str], int]) -> Compressed | None:
    """``text`` cut to what ``query`` needs within ``max_tokens``; None when it fits as it is."""
    if count(text) <= max_tokens:
        return None
    kind, units = units_of(text)
    if not units:
        return None
    ranked, _ = _order(units, query)
    picker = _Picker(kind, units, max_tokens, count)
    for i, u in enumerate(units):
        if u.frame:
            picker.take(i)
    body = [i for i, u in enumerate(units) if not u.frame]
    if ranked:
        picker.take_with_neighbours(ranked[0])
        if kind == "lines" and body:
            picker.take(body[0])  # the title / a table's header, right after the best unit
        for i in ranked[1:]:
            picker.take_with_neighbours(i)
    else:
        for i in body:  # nothing matches: the beginning, as far as it fits
            if not picker.take(i):
                break
    picked = picker.picked
    if not picked:
        return None
    ranges = _ranges(picked)
    gaps = _ranges([i for i in range(len(units)) if i not in set(picked)])
    return Compressed(text=_render(kind, units, ranges), selector=_selector(kind, units, ranges),
                      omitted=[s for s in _selector(kind, units, gaps).split(",") if s], units=len(units),
                      kept_units=len(picked), matched=bool(ranked))
