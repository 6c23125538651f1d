"""The per-turn record: everything a turn's context was built from and what came of it.

Stored as JSON with the turn (``turns.record``), shown by the inspector panels and ``pcm show
turn``, and compared field by field by ``pcm replay turn``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.core.context.compiler import CompiledContext
from app.core.context.compress import Compression
from app.core.context.input_fit import InputCharge
from app.core.context.required import RequiredCheck
from app.core.context.retrieval import RecallResult
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.tools.model import ToolRound


class StageTiming(BaseModel):
    """Milliseconds per build stage (everything but generation) and of the answer."""

    embed_ms: float = 0.0
    intent_ms: float = 0.0
    plan_ms: float = 0.0
    route_ms: float = 0.0
    recall_ms: float = 0.0
    compile_ms: float = 0.0
    tools_ms: float = 0.0  # the turn's tool calls (they run alongside recall)
    build_ms: float = 0.0
    first_token_ms: float | None = None
    answer_ms: float | None = None


class BuildRecord(BaseModel):
    """The deterministic part of a turn: replay must reproduce it exactly."""

    text: str
    at: str
    budget: int
    intent: dict[str, Any]
    plan: dict[str, Any]
    plan_candidates: list[dict[str, Any]] = Field(default_factory=list)
    routing: dict[str, Any]
    anchor_node: str | None
    recall_request: dict[str, Any]
    recall: RecallResult
    context: CompiledContext
    prompt: list[dict[str, str]]
    # How the input was charged against the prompt (tokens, template, limit, what the context
    # gave up, the cut when it was shortened); None in records made before inputs were charged.
    input: InputCharge | None = None
    llm_intent: dict[str, Any] = Field(default_factory=dict)  # the LLM signal as observed (replayed as is)
    tool_specs: list[ToolSpec] = Field(default_factory=list)  # the registry the plan saw (replayed as is)
    # What the plan's tool filter read besides the intent: request-to-tool similarities (an
    # observation of the embedder) and the session's tool history (replayed as recorded).
    tool_signals: ToolSignals = Field(default_factory=ToolSignals)
    tools: ToolRound | None = None  # offered tools, how calls were chosen, their outcomes (replayed as recorded)
    # The task stack as the build saw it (``app.core.tasks.stack.TaskInputs``, replayed as recorded)
    # and the frame it worked in (``StackDecision``); both empty when the session has no tasks.
    tasks: dict[str, Any] = Field(default_factory=dict)
    task: dict[str, Any] = Field(default_factory=dict)
    # Evidence that entered compressed (kept selector, omitted ranges) and the plan's required
    # information checked against the compiled context.
    compressed: list[Compression] = Field(default_factory=list)
    required: list[RequiredCheck] = Field(default_factory=list)
    system_prompt: str = ""  # the session's standing instruction the build used (replayed as recorded)
    excluded: list[str] = Field(default_factory=list)  # ids the caller kept out of recall (another version's)
    # The anchor branch's summaries the build was offered ({"root", "levels": {level: summary}}):
    # an observation of the background summarizer, fed back on replay (``pipeline/summary_items``).
    summaries: dict[str, Any] = Field(default_factory=dict)
    # The progressive detail the user set on this context (``pipeline/detail.Detail``; empty: none).
    detail: dict[str, Any] = Field(default_factory=dict)

    def comparable(self) -> dict[str, Any]:
        """The record without timings of channel queries (wall-clock, not decisions)."""
        data = self.model_dump(mode="json")
        for run in data["recall"]["channels"]:
            run.pop("elapsed_ms", None)
        return data


class TurnRevision(BaseModel):
    """One change of a turn's anchor after the fact (a re-anchor, or the undo of one).

    ``build``/``timing`` are what the turn's record held before this change, so every earlier
    build stays retrievable; ``at_seq`` is the session's turn count when it happened: turns with
    a seq from there on saw the new anchor (the edges carry the same bound).
    """

    kind: str  # "reanchor" | "undo"
    at: str
    at_seq: int
    previous_anchor: str | None
    anchor: str | None
    build: BuildRecord
    timing: StageTiming = Field(default_factory=StageTiming)
    removed_edges: list[str] = Field(default_factory=list)
    added_edges: list[str] = Field(default_factory=list)
    undoes: int | None = None  # for an undo: the index of the re-anchor it took back


class TurnRecord(BaseModel):
    turn_id: str
    session_id: str
    node_id: str | None = None
    build: BuildRecord
    timing: StageTiming = Field(default_factory=StageTiming)
    model: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    finish_reason: str = ""
    answer_message_id: str | None = None
    revisions: list[TurnRevision] = Field(default_factory=list)  # anchor changes, oldest first

