"""The data of an intent: label enums, the ``Intent`` model, its context and its audit records.

Kept apart from :mod:`app.core.intent.engine` so that the cue, LLM, decision and engine modules
can share the models without importing each other. Pure data and one rounding helper, ``r4``,
used wherever a float ends up in a serialised intent or plan.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.core.intent.profile import UserProfile


class Mode(StrEnum):
    QA = "qa"
    TASK = "task"
    INTERRUPT = "interrupt"
    PUSH = "push"
    CLARIFY = "clarify"


class TaskType(StrEnum):
    RETRIEVAL = "retrieval"
    GENERATION = "generation"
    CHANGE = "change"
    DIAGNOSTIC = "diagnostic"
    PLANNING = "planning"


class Urgency(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


MODES: tuple[str, ...] = tuple(m.value for m in Mode)
TASK_TYPES: tuple[str, ...] = tuple(t.value for t in TaskType)
FIELD_LABELS: dict[str, tuple[str, ...]] = {"mode": MODES, "task_type": TASK_TYPES}
DONE_STATUSES = frozenset({"complete", "completed", "done", "failed", "cancelled", "canceled"})

# Reasons that make ``needs_clarification`` true; other uncertainty reasons are informational.
CLARIFY_CODES: tuple[str, ...] = (
    "prohibition_conflict", "high_risk_action", "ambiguous_task", "empty_input", "vague_goal",
    "low_mode_confidence", "low_task_confidence", "llm_flagged",
)


def r4(x: float) -> float:
    """Round to 4 places (and turn -0.0 into 0.0) so serialised floats replay byte-identically."""
    v = round(float(x), 4)
    return 0.0 if v == 0 else v


# --------------------------------------------------------------------------- data


class EvidenceSpan(BaseModel):
    """Which words of which source support which intent field."""

    source: str = "user_input"  # user_input | env | profile | llm | history
    span: str
    field: str


class SignalRecord(BaseModel):
    """One signal's contribution to one label of one field: ``weight × score`` is added."""

    name: str
    field: str
    label: str
    weight: float
    score: float


class IntentConfidence(BaseModel):
    mode: float = 0.0
    task_type: float = 0.0
    goal: float = 0.0


class LlmReport(BaseModel):
    """How the optional LLM signal fared this turn."""

    status: Literal["skipped", "ok", "invalid", "late", "error"] = "skipped"
    detail: str = ""


class Intent(BaseModel):
    """The structured intent of one event (seed 000 §3.4.3 / §3.6.1)."""

    text: str = ""
    mode: Mode
    task_type: TaskType
    goal: str = ""
    acceptance: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    prohibitions: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    plan_hints: list[str] = Field(default_factory=list)
    evidence_spans: list[EvidenceSpan] = Field(default_factory=list)
    uncertainty_reasons: list[str] = Field(default_factory=list)
    urgency: Urgency = Urgency.NORMAL
    risk: Risk = Risk.LOW
    confidence: IntentConfidence = Field(default_factory=IntentConfidence)
    needs_clarification: bool = False
    sub_questions: list[str] = Field(default_factory=list)
    # The input's place in a conversation (``intent.dependence``), read by anchor routing: how much
    # it leans on what came before (the follow-up signal) and how plainly it opens a new topic.
    dependence: float = 0.0
    topic_shift: float = 0.0
    distribution: dict[str, dict[str, float]] = Field(default_factory=dict)
    signals: list[SignalRecord] = Field(default_factory=list)
    llm: LlmReport = Field(default_factory=LlmReport)

    def hint(self, prefix: str) -> str | None:
        """Return the value of the first plan hint ``prefix:value``, or None."""
        for h in self.plan_hints:
            if h.startswith(prefix + ":"):
                return h[len(prefix) + 1 :]
        return None

    def reason_codes(self) -> list[str]:
        """Return the codes (text before ':') of the uncertainty reasons, in order."""
        return [r.split(":", 1)[0] for r in self.uncertainty_reasons]


class RunningTask(BaseModel):
    task_id: str
    name: str = ""
    status: str = "active"


class RecentTurn(BaseModel):
    text: str
    mode: str = "qa"


class EnvEventRef(BaseModel):
    kind: str = "other"  # file | feed | api | other
    title: str = ""
    uri: str = ""


class IntentContext(BaseModel):
    """What the engine knows besides the text. Every field has a safe default."""

    query_vector: list[float] | None = None
    running_tasks: list[RunningTask] = Field(default_factory=list)
    recent_turns: list[RecentTurn] = Field(default_factory=list)  # most recent last
    focus_task: str | None = None
    profile: UserProfile = Field(default_factory=UserProfile)
    recent_env_events: list[EnvEventRef] = Field(default_factory=list)
    trigger: Literal["user", "env"] = "user"
    llm_output: Any = None
    llm_status: Literal["skipped", "ok", "invalid", "late", "error"] | None = None
    llm_detail: str = ""
