"""The data of a tool round: what was offered, what was chosen and how, and what came of each call.

Shared by the registry (:mod:`app.core.tools.registry`), the selection rules (:mod:`app.core.tools.selection`),
the pipeline (which hands the outcomes to the prompt's tools section, :mod:`app.core.context.sections.tools`)
and the per-turn record. Outside content
(files, feeds, tool results) is labelled and delimited by :func:`app.core.text.quoting.fence`, so every
such text enters the context in the same fenced form. Pure data and pure functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.core.context.sections.tools import ToolResult
from app.core.errors import CoreError, NoRecordError
from app.core.text.quoting import fence, quote_label
from app.core.types import Evidence, ToolCall

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

    def results(self) -> list[ToolResult]:
        """What the context shows of each call (``app.core.context.sections.tools``): its result
        evidences, or the line that says why it produced none."""
        return [ToolResult(o.call.tool_call_id, tuple(o.evidences), "" if o.evidences else outcome_line(o))
                for o in self.calls]


def outcome_line(outcome: ToolOutcome) -> str:
    """A short state line for a call that produced no evidence (refused, failed, timed out); the
    reason is quoted in a fence, since it may name a path or carry an outside error's text."""
    line = f"Tool {quote_label(outcome.call.tool, 60)} was not run ({outcome.call.status})"
    return f"{line}:\n{fence('reason', outcome.error)}" if outcome.error else line


def evidence_ids(outcomes: Sequence[ToolOutcome]) -> list[str]:
    """The result evidence ids of ``outcomes``, in order."""
    return [i for o in outcomes for i in o.call.result_evidence_ids]
