"""The parts a Context Plan is made of, and the default strategy tables (seed 000 §3.4.4, §6.1).

Label tuples (segments, recall channels, timed stages, confidence bands), the policy sections of
a :class:`~app.core.plan.builder.ContextPlan` (history, budget, retrieval, rerank, concurrency, tools),
the recall presets and the default segment, channel and evidence-priority tables that
``PlanConfig`` starts from. Pure data.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from app.core.intent.model import IntentConfidence, Mode, TaskType
from app.core.plan.timespan import DateRange, TimeFocus

SEGMENTS: tuple[str, ...] = ("instruction", "state", "plan", "conversation", "evidence", "memory")
CHANNELS: tuple[str, ...] = ("structured", "vector", "fulltext", "graph", "recent", "memory", "topic", "time")
#: Stages the plan can bound: each index channel of recall runs under ``timeouts_ms["recall"]`` and
#: is skipped (and recorded) past it. The pure stages (route, rerank, compile) cannot be stopped
#: midway and the intent LLM runs before the plan exists, so the plan holds no limit for them.
STAGES: tuple[str, ...] = ("recall",)
Band = Literal["tight", "balanced", "wide"]
BANDS: tuple[Band, ...] = ("tight", "balanced", "wide")


# --------------------------------------------------------------------------- policy sections of a plan


class MergeRule(StrEnum):
    APPEND = "append"  # continue the anchor branch
    FOLD_INTO_TASK = "fold_into_task"  # amend the running task at its next step
    NEW_BRANCH = "new_branch"  # run alongside as its own stream
    CONTROL = "control"  # stop / pause / cancel / resume the target task


class IntentSummary(BaseModel):
    mode: Mode
    task_type: TaskType
    goal: str = ""
    urgency: str = "normal"
    risk: str = "low"
    confidence: IntentConfidence = Field(default_factory=IntentConfidence)
    overall_confidence: float = 0.0
    band: Band = "balanced"


class HistoryPolicy(BaseModel):
    """How much of the anchor's branch the context carries: its main chain, nearest turn first.
    (The branch's recent window is the recall channel ``recent``.)"""

    main_chain_turns: int = 6
    # The level the rest of the branch (beyond those turns) is carried at, as its summary:
    # "none", "brief", "standard" or "detailed" (``app.core.pipeline.summary_items``).
    summary_level: str = "none"


class BudgetPolicy(BaseModel):
    total_tokens: int
    segments: dict[str, int]
    answer_reserve: int
    context_size: int
    tool_calls: int = 0
    timeouts_ms: dict[str, int] = Field(default_factory=dict)


class RetrievalFilters(BaseModel):
    """What the structured channel looks for: the authors the input cites ("Anna said") and the
    kinds of item it names (file, feed, api, memory, task)."""

    authors: list[str] = Field(default_factory=list)
    kinds: list[str] = Field(default_factory=list)


class RetrievalPolicy(BaseModel):
    """Recall: items per channel, the distinct candidates fused at most, the input's date range
    and what it asks of time."""

    channels: dict[str, int]
    candidate_pool: int
    date_range: DateRange | None = None
    time: TimeFocus = Field(default_factory=TimeFocus)
    filters: RetrievalFilters = Field(default_factory=RetrievalFilters)
    # "session": the index channels search this session; "workspace": every session of the
    # workspace (other sessions' hits labelled with their title, gated like any candidate).
    scope: Literal["session", "workspace"] = "session"
    scope_reason: str = ""


class RerankPolicy(BaseModel):
    """Rerank and crop: kept items, the relevance gate's threshold, the kept items one channel
    alone may bring, near-duplicates, diversity, and the order of evidence types in the context."""

    top_k: int
    per_channel_cap: int
    dedup_threshold: float
    mmr_lambda: float
    relevance_threshold: float = 0.3
    evidence_priority: list[str] = Field(default_factory=list)


class ConcurrencyPolicy(BaseModel):
    """How the turn runs beside the session's tasks, as the stream scheduler's host executes it
    (``app.core.engine.streams``, ``app.core.engine.agent``): ``merge_rule`` control applies
    ``control`` (pause, resume, stop, cancel) to ``target_task``, fold_into_task amends it —
    both only with ``allow_interrupt``; new_branch answers in a stream of its own beside the
    tasks, cutting into their generation when ``allow_interrupt``; append continues the anchor's
    branch. ``allow_concurrent`` False: a new task's steps wait until the tasks running now are done.
    ``target_task`` None: the running tasks the stack decision names."""

    allow_concurrent: bool = True
    allow_interrupt: bool = True
    merge_rule: MergeRule = MergeRule.APPEND
    target_task: str | None = None
    control: str | None = None


class ToolPolicy(BaseModel):
    """The tools this plan offers the model (``allowed``, best first, at most ``max_offered``, chosen
    by the tool filter: ``app.core.plan.tool_filter``) with their scores and why (``why``: name →
    reasons), the best
    of those left out (``left_out``: "name (score): why"), and the tools it refuses (``blocked``,
    with ``notes`` saying why: a prohibition, actions held back)."""

    allowed: list[str] = Field(default_factory=list)
    blocked: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # why each tool is blocked
    max_offered: int = 0
    scores: dict[str, float] = Field(default_factory=dict)
    why: dict[str, str] = Field(default_factory=dict)
    left_out: list[str] = Field(default_factory=list)



# --------------------------------------------------------------------------- default strategy tables


class RecallPreset(BaseModel):
    """One recall intensity: how much to fetch, how hard to rerank, how much budget to spend.

    ``relevance_threshold``: high confidence crops harder; low confidence lets weaker items in.
    ``per_channel_cap`` is per ``top_k`` items (scaled with it): low confidence wants support
    from more than one channel.
    """

    channels: dict[str, int]
    top_k: int
    per_channel_cap: int
    relevance_threshold: float
    dedup_threshold: float
    mmr_lambda: float
    budget_fraction: float
    main_chain_turns: int
    tool_calls: int
    time_scale: float
    tools_offered: int = 8  # the most tools the plan offers the model (the tool filter's limit)


def default_presets() -> dict[str, RecallPreset]:
    """The three recall intensities: "tight", "balanced" and "wide"."""

    def ch(*sizes: int) -> dict[str, int]:
        return dict(zip(CHANNELS, sizes, strict=True))

    return {
        "tight": RecallPreset(channels=ch(10, 20, 20, 8, 6, 6, 6, 10), top_k=8, per_channel_cap=6, relevance_threshold=0.35,
                              dedup_threshold=0.92, mmr_lambda=0.8, budget_fraction=0.7,
                              main_chain_turns=4, tool_calls=1, time_scale=0.75, tools_offered=8),
        "balanced": RecallPreset(channels=ch(20, 40, 40, 16, 8, 10, 10, 20), top_k=12, per_channel_cap=5,
                                 relevance_threshold=0.3,
                                 dedup_threshold=0.9, mmr_lambda=0.7, budget_fraction=0.85,
                                 main_chain_turns=6, tool_calls=2, time_scale=1.0, tools_offered=10),
        "wide": RecallPreset(channels=ch(40, 80, 80, 32, 12, 20, 20, 40), top_k=16, per_channel_cap=4, relevance_threshold=0.25,
                             dedup_threshold=0.86, mmr_lambda=0.55, budget_fraction=1.0,
                             main_chain_turns=10, tool_calls=3, time_scale=1.5, tools_offered=10),
    }


SEGMENT_BASE = {"instruction": 0.10, "state": 0.10, "plan": 0.05, "conversation": 0.25, "evidence": 0.40,
                "memory": 0.10}
SEGMENT_DELTAS: dict[str, dict[str, float]] = {
    "task": {"state": 0.10, "plan": 0.05, "conversation": -0.05, "evidence": -0.10},
    "interrupt": {"state": 0.15, "conversation": 0.05, "evidence": -0.15, "memory": -0.05},
    "push": {"evidence": 0.10, "conversation": -0.10},
    "clarify": {"conversation": 0.15, "evidence": -0.15},
    "retrieval": {"evidence": 0.10, "plan": -0.03, "state": -0.05},
    "generation": {"memory": 0.05, "evidence": -0.05},
    "change": {"state": 0.05, "evidence": -0.05},
    "diagnostic": {"evidence": 0.05, "memory": -0.05},
    "planning": {"plan": 0.10, "memory": 0.05, "evidence": -0.15},
}
CHANNEL_FACTORS: dict[str, dict[str, float]] = {
    "interrupt": {"structured": 1.5, "vector": 0.5, "fulltext": 0.5, "recent": 1.5, "memory": 0.5},
    "push": {"structured": 1.5, "vector": 0.5, "recent": 2.0, "memory": 0.5},
    "clarify": {c: 0.5 for c in CHANNELS},
    "retrieval": {"vector": 1.25, "fulltext": 1.25, "memory": 1.25},
    "generation": {"vector": 1.25, "fulltext": 0.75, "memory": 1.25},
    "change": {"structured": 1.5, "vector": 0.75, "graph": 1.25, "recent": 1.25},
    "diagnostic": {"structured": 1.25, "fulltext": 1.5, "recent": 1.5},
    "planning": {"structured": 1.25, "graph": 1.5, "memory": 1.25},
}
EVIDENCE_PRIORITY: dict[str, list[str]] = {
    "retrieval": ["user_input", "rag_doc", "memory", "env_event", "tool_result", "llm_output"],
    "generation": ["user_input", "memory", "rag_doc", "llm_output", "env_event", "tool_result"],
    "change": ["user_input", "tool_result", "env_event", "rag_doc", "memory", "llm_output"],
    "diagnostic": ["tool_result", "env_event", "user_input", "rag_doc", "llm_output", "memory"],
    "planning": ["user_input", "memory", "tool_result", "rag_doc", "env_event", "llm_output"],
    "push": ["env_event", "tool_result", "user_input", "memory", "rag_doc", "llm_output"],
}


class ContextPlan(BaseModel):
    """The CRS of one turn: every control variable the recall, rerank and compile stages obey."""

    candidate_id: str
    strategy: Band = "balanced"  # the recall intensity this plan uses
    intent: IntentSummary
    needs_clarification: bool = False
    clarification_question: str = ""
    required: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    prohibitions: list[str] = Field(default_factory=list)
    preferences: list[str] = Field(default_factory=list)  # soft: the profile's "I prefer X"
    sub_questions: list[str] = Field(default_factory=list)
    history: HistoryPolicy = Field(default_factory=HistoryPolicy)
    budget: BudgetPolicy
    retrieval: RetrievalPolicy
    rerank: RerankPolicy
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    actions_held_back: bool = False
    surface_conflicts: bool = False
    repairs: list[str] = Field(default_factory=list)
