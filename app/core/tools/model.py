"""The data of a tool round: what was offered, what was chosen and how, and what came of each call.

Shared by the registry (:mod:`app.core.tools.registry`), the selection rules (:mod:`app.core.tools.selection`),
the pipeline (which turns outcomes into context items) and the per-turn record. Outside content
(files, feeds, tool results) is labelled and delimited by :func:`app.core.text.quoting.fence`, so every
such text enters the context in the same fenced form. Pure data and pure functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.core.context.compiler import Item
from app.core.context.compress import Compression, compress
from app.core.errors import CoreError, NoRecordError
from app.core.ports import TokenCounter
from app.core.text.quoting import FENCE_CLOSE, fence, quote_label
from app.core.types import BlockType, Evidence, Priority, ToolCall

ChosenBy = Literal["rule", "model", "user"]


class ToolRefused(CoreError):
    """Raised by a tool implementation to refuse a call (recorded with status "forbidden")."""


class ToolNotFound(NoRecordError):
    """Raised by a tool implementation when what it was asked for does not exist ("not_found")."""


def args_digest(args: Mapping[str, Any]) -> dict[str, Any]:
    """``{"sha256": …, "keys": [...]}`` of a call's arguments (canonical JSON; values not kept)."""
    canonical = json.dumps(dict(args), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return {"sha256": hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest(), "keys": sorted(str(k) for k in args)}


class ToolResultItem(BaseModel):
    """One piece of a tool's result: becomes one evidence, labelled ``[tool <name>: <label>]``."""

    label: str
    content: str
    uri: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolChoice(BaseModel):
    """A call the selection wants made: which tool, with which arguments, chosen how and why."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    chosen_by: ChosenBy = "rule"
    reason: str = ""


class ToolOutcome(BaseModel):
    """One call as made: the stored ``ToolCall``, the arguments, how it was chosen, any error.

    ``evidences`` (the result records, also in the store) are left out of dumps: the record keeps
    their ids in ``call.result_evidence_ids`` and replay reads them back from the store.
    """

    call: ToolCall
    args: dict[str, Any] = Field(default_factory=dict)
    chosen_by: ChosenBy = "rule"
    reason: str = ""
    error: str = ""
    evidences: list[Evidence] = Field(default_factory=list, exclude=True)

    @property
    def status(self) -> str:
        return self.call.status


class ToolRound(BaseModel):
    """The tools of one build: ``offered`` (filtered by the plan, blocked ones never), how the
    calls were selected (``"rules"``, ``"model"`` or ``"none"``), the model's choice as observed
    when it was asked, and every call's outcome in order."""

    offered: list[str] = Field(default_factory=list)
    selection: Literal["rules", "model", "none"] = "none"
    notes: list[str] = Field(default_factory=list)  # why the rules chose / why the model was asked
    model: dict[str, Any] = Field(default_factory=dict)  # {"status": ok|invalid|late|error, "output": …}
    calls: list[ToolOutcome] = Field(default_factory=list)

    def evidences(self) -> list[Evidence]:
        """Every result evidence of the round's calls, in call order."""
        return [e for outcome in self.calls for e in outcome.evidences]


def outcome_line(outcome: ToolOutcome) -> str:
    """A short state line for a call that produced no evidence (refused, failed, timed out); the
    reason is quoted in a fence, since it may name a path or carry an outside error's text."""
    line = f"Tool {quote_label(outcome.call.tool, 60)} was not run ({outcome.call.status})"
    return f"{line}:\n{fence('reason', outcome.error)}" if outcome.error else line


def evidence_ids(outcomes: Sequence[ToolOutcome]) -> list[str]:
    """The result evidence ids of ``outcomes``, in order."""
    return [i for o in outcomes for i in o.call.result_evidence_ids]


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


def tool_items(round_: ToolRound, *, start: int, order: int, max_tokens: int, counter: TokenCounter,
               query: str = "", compressed: list[Compression] | None = None) -> list[Item]:
    """The context items of a round: each result evidence as a numbered evidence line, each call
    that produced nothing as a state line saying why. A result over ``max_tokens`` enters as the
    lines ``query`` needs (``app.core.context.compress``; its selector on the item, what was left
    out appended to ``compressed``); without a query it is cut to its head."""
    items: list[Item] = []
    number = start
    for n, outcome in enumerate(round_.calls):
        if not outcome.evidences:
            items.append(Item(f"tool:{outcome.call.tool_call_id}", BlockType.STATE, outcome_line(outcome),
                              Priority.HIGH, order=300 + n))
            continue
        for evidence in outcome.evidences:
            cut = compress(evidence.content, query, max_tokens, counter.count) if query else None
            body = cut.text if cut is not None else clip(evidence.content, max_tokens, counter)
            if cut is not None and compressed is not None:
                compressed.append(Compression.of(evidence.evidence_id, cut))
            items.append(Item(evidence.evidence_id, BlockType.EVIDENCE, f"[{number}] {body}", Priority.HIGH, score=1.0,
                              order=order + number, evidence_ids=(evidence.evidence_id,),
                              selector=cut.selector if cut is not None else ""))
            number += 1
    return items
