"""The tools section of the prompt: the results of the turn's tool round, as numbered evidence.

Each result evidence is a numbered evidence line, compressed to what the input asks when it is
long (``app.core.context.compress``); a call that produced nothing is a state line saying why.
The round itself (``app.core.tools.model.ToolRound``) belongs to a higher stage: the section is
given what it shows of it (``ToolResult``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.context.compiler import Item
from app.core.context.compress import Compression, compress
from app.core.ports import TokenCounter
from app.core.text.quoting import FENCE_CLOSE
from app.core.types import BlockType, Evidence, Priority


@dataclass(frozen=True)
class ToolResult:
    """One call of a tool round as the context shows it: its result evidences, or — for a call
    that produced none — the state line that says why."""

    call_id: str
    evidences: tuple[Evidence, ...] = ()
    note: str = ""


def clip(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut to at most ``max_tokens`` (by ``counter``); a cut fenced text is closed again
    (its body cannot contain the closing delimiter, so the appended one is the real end)."""
    if counter.count(text) <= max_tokens:
        return text
    fenced = text.rstrip().endswith(FENCE_CLOSE)
    tail = "\n[… cut to fit the context]" + (f"\n{FENCE_CLOSE}" if fenced else "")
    keep = max(0, int(len(text) * max_tokens / max(1, counter.count(text))) - len(tail))
    while keep > 0 and counter.count(text[:keep] + tail) > max_tokens:
        keep = int(keep * 0.85)
    return text[:keep] + tail


def tool_items(results: Sequence[ToolResult], *, start: int, order: int, max_tokens: int, counter: TokenCounter,
               query: str = "", compressed: list[Compression] | None = None) -> list[Item]:
    """The context items of a round's results: each result evidence as an evidence line numbered
    from ``start``, each call that produced nothing as a state line saying why. A result over
    ``max_tokens`` enters as the lines ``query`` needs (its selector on the item, what was left
    out appended to ``compressed``); without a query it is cut to its head."""
    items: list[Item] = []
    number = start
    for n, result in enumerate(results):
        if not result.evidences:
            items.append(Item(f"tool:{result.call_id}", BlockType.STATE, result.note, Priority.HIGH, order=300 + n))
            continue
        for evidence in result.evidences:
            cut = compress(evidence.content, query, max_tokens, counter.count) if query else None
            body = cut.text if cut is not None else clip(evidence.content, max_tokens, counter)
            if cut is not None and compressed is not None:
                compressed.append(Compression.of(evidence.evidence_id, cut))
            items.append(Item(evidence.evidence_id, BlockType.EVIDENCE, f"[{number}] {body}", Priority.HIGH, score=1.0,
                              order=order + number, evidence_ids=(evidence.evidence_id,),
                              selector=cut.selector if cut is not None else ""))
            number += 1
    return items
