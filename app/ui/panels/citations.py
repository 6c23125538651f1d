"""Citations of a recorded turn: which evidence id each ``[n]`` stands for, and the context lines.

The prompt's evidence section (``app.core.context.sections.evidence``) numbers the kept recall candidates that
are not already on the conversation chain as ``[1]``, ``[2]``, … in recall order, and renders
each as a line ``[n] Speaker: text`` of an evidence (or memory) block whose ``refs`` list the
evidence ids in line order. The compiler may drop some of those lines, so a number the answer
cites can stand for evidence that never reached the prompt; :func:`citation_map` says so.

Pure functions over a :class:`~app.core.pipeline.record.TurnRecord`: no Qt, tested directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.context.compiler import HEADERS, SOURCE
from app.core.session.selectors import describe
from app.core.types import BlockType

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

CITE_RE = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\]")
"""``[1]``, ``[1, 2]`` or ``[1;2]`` in an answer."""
ID_RE = re.compile(r"\[([0-9a-f]{32})\]")
"""A raw evidence id in brackets (conflict lines of the state block cite ids, not numbers)."""
_TAG_RE = re.compile(r"^\[(\d+)\] ")
_GROUP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}:$")
_NUMBERED = (BlockType.EVIDENCE.value, BlockType.MEMORY.value)


@dataclass(frozen=True, slots=True)
class Citation:
    """What ``[number]`` refers to; ``note`` says why it is not in the prompt when it is not."""

    number: int
    evidence_id: str
    in_prompt: bool
    note: str = ""
    selector: str = ""  # which part of the evidence the context carried (a document's "page:12")

    @property
    def where(self) -> str:
        """The selector for people when it names a place in a document ("page 12"), else ""."""
        return describe(self.selector) if self.selector.split(":")[0] in ("page", "section", "sheet") else ""


@dataclass(frozen=True, slots=True)
class ContextLine:
    """One line of the compiled context, with the evidence ids it carries (none for headers)."""

    block_index: int
    block_type: str
    text: str
    evidence_ids: tuple[str, ...] = ()
    number: int | None = None
    header: bool = False


@dataclass(frozen=True, slots=True)
class TextPiece:
    """A run of answer text; ``numbers``/``ids`` are set when the run is a citation marker."""

    text: str
    numbers: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()


def _conversation_ids(record: TurnRecord) -> set[str]:
    """Messages the pipeline put on the conversation chain (kept or dropped by the budget)."""
    ctx = record.build.context
    ids = {r.evidence_id for b in ctx.blocks if b.block_type == BlockType.CONVERSATION for r in b.refs}
    ids.update(d.item_id for d in ctx.dropped if d.segment == BlockType.CONVERSATION.value)
    return ids


def _tagged_refs(record: TurnRecord) -> dict[int, tuple[str, str]]:
    """``[n]`` → (evidence id, selector) as read from the evidence/memory blocks actually sent."""
    out: dict[int, tuple[str, str]] = {}
    for block in record.build.context.blocks:
        if block.block_type.value not in _NUMBERED:
            continue
        tags = [int(m.group(1)) for line in block.content.split("\n") if (m := _TAG_RE.match(line))]
        shown = [(r.evidence_id, r.selector) for r in block.refs if r.selector != SOURCE]  # not what a line came from
        if len(tags) == len(shown):  # one tag per line per ref, in the same order
            out.update(zip(tags, shown, strict=True))
    return out


def citation_map(record: TurnRecord) -> dict[int, Citation]:
    """Every evidence number of the turn → the evidence it stands for, in the prompt or not."""
    build = record.build
    conversation = _conversation_ids(record)
    numbered = [c.id for c in build.recall.candidates if c.kept and c.id not in conversation]
    by_number = dict(enumerate(numbered, start=1))
    sent = _tagged_refs(record)
    by_number.update({n: eid for n, (eid, _) in sent.items()})  # what the prompt says wins over the reconstruction
    dropped = {d.item_id: d.reason for d in build.context.dropped}
    out: dict[int, Citation] = {}
    for number in sorted(by_number):
        eid = by_number[number]
        if number in sent:
            out[number] = Citation(number, eid, True, selector=sent[number][1])
        else:
            why = dropped.get(eid, "not in the compiled context")
            out[number] = Citation(number, eid, False, f"not in the prompt: {why}")
    return out


def context_lines(record: TurnRecord) -> list[ContextLine]:
    """The compiled context line by line, each bound to the evidence ids it shows."""
    numbers = {c.evidence_id: c.number for c in citation_map(record).values() if c.in_prompt}
    out: list[ContextLine] = []
    for index, block in enumerate(record.build.context.blocks):
        kind = block.block_type.value
        refs = [r.evidence_id for r in block.refs if r.selector != SOURCE]  # a memory's sources are not shown
        raw = block.content.split("\n") if block.content else []
        header = HEADERS.get(block.block_type, "")
        lines: list[tuple[str, bool]] = [(t, (bool(header) and t == header) or bool(_GROUP_RE.match(t))) for t in raw]
        body = [t for t, is_header in lines if not is_header]
        if kind in _NUMBERED:
            current: tuple[str, ...] = ()
            current_no: int | None = None
            tags = iter(refs)
            for text, is_header in lines:
                m = None if is_header else _TAG_RE.match(text)
                if m:
                    current_no = int(m.group(1))
                    current = (next(tags, ""),)
                    current = current if current[0] else ()
                out.append(ContextLine(index, kind, text, () if is_header else current,
                                       None if is_header else current_no, is_header))
            continue
        one_each = kind == BlockType.CONVERSATION.value and len(body) == len(refs)
        body_i = 0
        for text, is_header in lines:
            if is_header:
                out.append(ContextLine(index, kind, text, header=True))
                continue
            if one_each:
                ids: tuple[str, ...] = (refs[body_i],)
            elif kind == BlockType.CONVERSATION.value:
                ids = tuple(refs)  # a multi-line message: the block's refs as a whole
            else:
                ids = tuple(i for i in ID_RE.findall(text) if i in refs)
            body_i += 1
            out.append(ContextLine(index, kind, text, ids, numbers.get(ids[0]) if len(ids) == 1 else None))
    return out


_FENCE_HEAD = re.compile(r"^\[[^\]\n]+\]$")  # "[file modified]", "[document part]": the app's words over a quote


def evidence_texts(record: TurnRecord) -> dict[str, str]:
    """Evidence id → the line that shows it in the context (``[n]`` tag removed), when sent; for
    quoted outside text, its header and the quote's label ("[document part] report.pdf, page 5")."""
    out: dict[str, str] = {}
    for line in context_lines(record):
        if len(line.evidence_ids) == 1 and not line.header and line.block_type != BlockType.STATE.value:
            eid, text = line.evidence_ids[0], _TAG_RE.sub("", line.text, count=1)
            if eid not in out:
                out[eid] = text
            elif _FENCE_HEAD.match(out[eid]) and text.startswith("<<< "):
                out[eid] = f"{out[eid]} {text[4:]}"
    return out


def split_citations(text: str, known_ids: set[str] | frozenset[str] = frozenset()) -> list[TextPiece]:
    """Cut ``text`` into plain runs and citation markers (``[n]``, ``[n, m]``, ``[<evidence id>]``)."""
    pattern = re.compile(f"{CITE_RE.pattern}|{ID_RE.pattern}")
    pieces: list[TextPiece] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.group(2) is not None and m.group(2) not in known_ids:
            continue
        if m.start() > pos:
            pieces.append(TextPiece(text[pos:m.start()]))
        if m.group(1) is not None:
            numbers = tuple(int(n) for n in re.split(r"\s*[,;]\s*", m.group(1)))
            pieces.append(TextPiece(m.group(0), numbers=numbers))
        else:
            pieces.append(TextPiece(m.group(0), ids=(m.group(2),)))
        pos = m.end()
    if pos < len(text):
        pieces.append(TextPiece(text[pos:]))
    return pieces


def cited_ids(text: str, citations: dict[int, Citation]) -> list[str]:
    """The evidence ids the ``[n]`` markers of ``text`` point at, in first-cited order."""
    out: dict[str, None] = {}
    for piece in split_citations(text):
        for n in piece.numbers:
            if n in citations:
                out.setdefault(citations[n].evidence_id, None)
    return list(out)
