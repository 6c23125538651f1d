"""The working state of one intent inference, and the decisions taken after fusion.

:class:`app.core.intent.engine.IntentEngine` runs the signals in a fixed order; each appends its
``SignalRecord`` rows, evidence spans, reasons and hints to one :class:`Trace` and hands back a
small reading (:class:`StructureReading`, :class:`EnvReading`, :class:`LlmReading`; what the rules
read of the text alone is :class:`InputReading`, read once per input and given to every inference
about it). Once mode and task type are fused, the functions here derive the rest of the intent:

* ``goal_of`` / ``llm_goal``  the goal and its confidence,
* ``structured_fields``       acceptance, constraints, prohibitions, entities and sub-questions,
  with ``profile_signal`` (the user's prohibitions and permissions: conflicts, risk) inside it,
* ``urgency_of`` / ``risk_of`` urgency and risk,
* ``dedup_spans``             the evidence spans, deduplicated.

Pure and deterministic: the order of every list in the trace is part of the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.intent.cues import (
    ACCEPT_RE,
    CONSTRAINT_RE,
    ENV_ALERT_RE,
    PROHIB_RE,
    TextCues,
    clean_goal,
    env_goal,
    extract_entities,
)
from app.core.intent.decompose import TIME_RELATION, checked_model_parts, decompose
from app.core.intent.model import (
    EnvEventRef,
    EvidenceSpan,
    LlmReport,
    Mode,
    RecentTurn,
    Risk,
    RunningTask,
    SignalRecord,
    TaskType,
    Urgency,
    r4,
)
from app.core.intent.profile import ProfileStatement, UserProfile, to_remember
from app.core.text.words import content_stems

_LEVEL = {"low": 0, "normal": 1, "medium": 1, "high": 2}

# --------------------------------------------------------------------------- the state of one inference


@dataclass
class Trace:
    """The audit trail one inference accumulates, in order: signal records, evidence, reasons, hints."""

    records: list[SignalRecord] = field(default_factory=list)
    spans: list[EvidenceSpan] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)

    def rec(self, name: str, fld: str, label: str, weight: float, score: float) -> None:
        """Record that signal ``name`` adds ``weight × score`` to ``label`` of field ``fld``."""
        self.records.append(SignalRecord(name=name, field=fld, label=label, weight=r4(weight), score=r4(score)))


@dataclass(frozen=True)
class StructureReading:
    """What the interaction structure says about the input."""

    running: list[RunningTask]  # the tasks not yet done
    target: RunningTask | None  # the running task the input addresses, if one can be told
    ambiguous: bool  # several tasks run and the input names none of them
    followed: RecentTurn | None  # the previous turn, when the input follows it up
    share: float  # the share of the qa/task mass that moves to interrupt


@dataclass(frozen=True)
class EnvReading:
    """What the recent environment events say about the input."""

    events: list[EnvEventRef]
    trigger: bool  # the turn reacts to the events (push mode)
    entities: list[str]  # URIs and names of the events that trigger the turn or that it mentions


@dataclass(frozen=True)
class LlmReading:
    """How the optional LLM output fared, and its normalised fields."""

    report: LlmReport
    fields: dict[str, Any]
    conf: float  # the model's own confidence, 0.6 when it gave none


@dataclass(frozen=True)
class InputReading:
    """What the rules signal read from an input's text alone (``IntentEngine.read``): the text
    normalised, its cues (as the rules signal left them; not changed after), the profile
    statements it makes, the rules signal's records and the evidence spans and hints so far. One
    reading serves every inference about the input: the queue's guess of its path, the fast
    intent that decides whether the model is asked, and the build's intent."""

    text: str
    cues: TextCues
    statements: tuple[ProfileStatement, ...]
    records: tuple[SignalRecord, ...]
    spans: tuple[EvidenceSpan, ...]
    hints: tuple[str, ...]


@dataclass
class IntentFields:
    """The structured fields of an intent, from the text, the profile and the LLM, before dedup."""

    acceptance: list[str]
    constraints: list[str]
    prohibitions: list[str]
    entities: list[str]
    sub_questions: list[str]
    conflicts: list[str]  # profile prohibitions the input would break
    permitted: list[str]  # profile permissions that cover the input


# --------------------------------------------------------------------------- decisions after fusion


def goal_of(text: str, cues: TextCues, mode: Mode, statements: Sequence[ProfileStatement],
            structure: StructureReading, env: EnvReading, trace: Trace) -> tuple[str, float, list[str]]:
    """Return (goal, its confidence, the entities of the text and of a followed-up turn).

    The cleaned text is the goal unless the turn reacts to events, controls a running task,
    follows up a turn, acknowledges a reply or only states profile rules.
    """
    entities = extract_entities(text)
    goal = clean_goal(cues.body)
    goal_conf = min(1.0, (len(cues.body_stems) + 0.5 * len(entities)) / 4.0) * (0.4 if cues.vague else 1.0)
    prev = structure.followed
    if env.trigger:
        goal, goal_conf = env_goal(env.events) or goal, 0.8 if env.events else 0.3
    elif mode == Mode.INTERRUPT and cues.control:
        target = structure.target
        goal = f"{cues.control} the running task" + (f" '{target.name}'" if target else "")
        goal_conf = 0.9 if target else 0.5
    elif prev is not None:
        goal = f"{goal} (follow-up to: {clean_goal(prev.text)[:160]})"
        goal_conf = max(goal_conf, 0.4 + 0.4 * min(1.0, len(content_stems(prev.text)) / 4.0))
        entities = entities + extract_entities(prev.text)
    elif cues.ack:
        goal, goal_conf = "acknowledge the reply", 0.7
    elif statements and to_remember(text):  # beside a question or request, that is the goal
        goal = "remember: " + "; ".join(f"{s.kind} {s.text}" for s in statements)
        goal_conf = 0.8
    if goal and not env.trigger:
        trace.spans.append(EvidenceSpan(span=cues.body[:200], field="goal"))
    return goal, goal_conf, entities


def llm_goal(goal: str, goal_conf: float, llm: LlmReading) -> tuple[str, float]:
    """Return (goal, confidence) with the LLM's goal, when it gave one, replacing the rules' goal."""
    if "goal" not in llm.fields:
        return goal, goal_conf
    model_goal = llm.fields["goal"]
    return model_goal, max(goal_conf, min(1.0, len(content_stems(model_goal)) / 4.0) * (0.5 + 0.5 * llm.conf))


def structured_fields(text: str, profile: UserProfile, entities: list[str], llm: LlmReading,
                      trace: Trace) -> IntentFields:
    """Return acceptance, constraints, prohibitions, entities and sub-questions from text, profile and LLM.

    The text's criteria come first, then the profile signal's, then the LLM's lists; the
    sub-questions are the rules' (``app.core.intent.decompose``), else the LLM's when they pass
    its check.
    """
    acceptance = [m.group("x") for m in ACCEPT_RE.finditer(text)]
    constraints = [m.group("x") for m in CONSTRAINT_RE.finditer(text)]
    prohibitions = [m.group("x") for m in PROHIB_RE.finditer(text)]
    for fld, found in (("acceptance", acceptance), ("constraints", constraints), ("prohibitions", prohibitions)):
        trace.spans.extend(EvidenceSpan(span=x.strip(), field=fld) for x in found)
    parts = decompose(text)
    fields = IntentFields(acceptance=acceptance, constraints=constraints, prohibitions=prohibitions,
                          entities=entities, sub_questions=list(parts.parts), conflicts=[], permitted=[])
    profile_signal(text, profile, fields, trace)
    if fields.sub_questions:
        trace.hints.append(f"decompose:{len(fields.sub_questions)}")
    if parts.relation:  # the first part is asked about the time before/after the last part's event
        trace.hints.append(f"{TIME_RELATION}:{parts.relation}")
    _merge_llm_lists(text, fields, llm, trace)
    return fields


def profile_signal(text: str, profile: UserProfile, fields: IntentFields, trace: Trace) -> None:
    """Add the profile's prohibitions and preferences; record conflicts with it and permissions from it.

    Sets ``fields.conflicts`` (prohibitions the input would break: high risk) and
    ``fields.permitted`` (permissions that cover it: medium risk).
    """
    fields.prohibitions += profile.prohibitions
    fields.constraints += [f"never {p}" for p in profile.prohibitions]
    trace.hints.extend(f"prefer:{p}" for p in profile.preferences)
    fields.conflicts = profile.prohibition_hits(text) if text else []
    fields.permitted = profile.permission_hits(text) if text else []
    for hit in fields.conflicts:
        trace.rec("profile", "risk", "high", 1.0, 1.0)
        trace.reasons.append(f"prohibition_conflict: never {hit}")
        trace.spans.append(EvidenceSpan(source="profile", span=hit, field="prohibitions"))
    trace.hints.extend(f"permitted:{p}" for p in fields.permitted)
    if fields.permitted:
        trace.rec("profile", "risk", "medium", 1.0, 1.0)


def _merge_llm_lists(text: str, fields: IntentFields, llm: LlmReading, trace: Trace) -> None:
    """Append the LLM's list fields, its evidence found in the text and its uncertainty reasons."""
    got = llm.fields
    for target, fld in ((fields.acceptance, "acceptance"), (fields.constraints, "constraints"),
                        (fields.prohibitions, "prohibitions"), (fields.entities, "entities"),
                        (trace.hints, "plan_hints")):
        target.extend(got.get(fld, []))
    if not fields.sub_questions:
        fields.sub_questions.extend(checked_model_parts(text, got.get("sub_questions", [])))
    low = text.lower()
    trace.spans.extend(EvidenceSpan(source="llm", span=s, field="llm") for s in got.get("evidence", [])
                       if s.lower() in low)
    trace.reasons.extend(f"llm: {r}" for r in got.get("uncertainty_reasons", []))


def urgency_of(cues: TextCues, env: EnvReading, llm: LlmReading) -> Urgency:
    """Return the urgency: the text's, high for an environment alert, else the LLM's over "normal"."""
    urgency = cues.urgency
    if env.trigger and ENV_ALERT_RE.search(" ".join(e.title for e in env.events)):
        urgency = Urgency.HIGH
    if urgency == Urgency.NORMAL and "urgency" in llm.fields:
        urgency = Urgency(llm.fields["urgency"])
    return urgency


def risk_of(task_type: TaskType, acting: bool, risk_words: Sequence[str], fields: IntentFields,
            llm: LlmReading) -> Risk:
    """Return the risk: high when acting on risk words (medium when permitted) or breaking a profile
    prohibition, medium for a change or for risk words in a question; the LLM may only raise it."""
    risk = Risk.MEDIUM if acting and task_type == TaskType.CHANGE else Risk.LOW
    if risk_words:
        risk = Risk.HIGH if acting else Risk.MEDIUM
        if fields.permitted and risk == Risk.HIGH:
            risk = Risk.MEDIUM
    if fields.conflicts:
        risk = Risk.HIGH
    if "risk" in llm.fields and _LEVEL[llm.fields["risk"]] > _LEVEL[risk.value]:
        risk = Risk(llm.fields["risk"])
    return risk


def dedup_spans(spans: Sequence[EvidenceSpan]) -> list[EvidenceSpan]:
    """Return the non-empty spans, first of each (source, lower-cased span, field), at most 32."""
    seen: dict[tuple[str, str, str], EvidenceSpan] = {}
    for s in spans:
        if s.span:
            seen.setdefault((s.source, s.span.lower(), s.field), s)
    return list(seen.values())[:32]
