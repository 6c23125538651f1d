"""Structured intent by multi-signal fusion (seed 000 §3.4, §3.6.1; seed 001 §2.2).

``IntentEngine.infer(text, ctx)`` turns one event into an auditable :class:`Intent`: mode, task
type, goal, acceptance, constraints, prohibitions, entities, plan hints, evidence spans and a
confidence per field. Evidence comes from six signals, each recorded as ``SignalRecord`` rows:

* ``rules``      cue words and sentence form of the text (always on: the fast path),
* ``embedding``  cosine similarity of the query vector to labelled prototypes (when vectors exist),
* ``structure``  running tasks and recent turns (interruptions, follow-ups),
* ``profile``    the user's prohibitions and permissions (constraints, risk, conflicts),
* ``env``        recent environment events (push mode, entities),
* ``llm``        the local model's schema-constrained JSON, normalised; any failure only degrades.

Mode is hierarchical: the additive signals give a speech-act distribution, then ``structure``
moves a share of the question/command mass to ``interrupt`` when the input is addressed to a
running task. Confidence per field is ``sqrt(p1 * (p1 - p2))`` of the fused distribution, so a
close second place lowers it as much as a weak first place. Output is deterministic: fixed label
order, fixed tie-breaks, floats rounded to 4 places.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from app.core.profile import (
    STOPWORDS,
    UserProfile,
    content_stems,
    negated_stems,
    parse_profile_statements,
    stem,
    tokenize,
)


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
_LEVEL = {"low": 0, "normal": 1, "medium": 1, "high": 2}

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


class IntentWeights(BaseModel):
    """Signal weights and decision thresholds: strategy as data."""

    prior: float = 0.5
    rules: float = 2.0
    embedding: float = 1.0
    structure: float = 2.5
    env: float = 3.0
    llm: float = 2.0
    embed_temperature: float = 0.1
    clarify_mode_below: float = 0.25
    clarify_task_below: float = 0.12
    clarify_goal_below: float = 0.3
    confirm_high_risk: bool = True
    max_items: int = 12


DEFAULT_WEIGHTS = IntentWeights()

MODE_PRIOR = {"qa": 0.4, "task": 0.3, "interrupt": 0.1, "push": 0.05, "clarify": 0.15}
TASK_PRIOR = {"retrieval": 0.3, "generation": 0.2, "change": 0.2, "diagnostic": 0.15, "planning": 0.15}
_DONE = {"complete", "completed", "done", "failed", "cancelled", "canceled"}

# --------------------------------------------------------------------------- fusion math


def saturate(raw: float) -> float:
    """Map accumulated cue strength in [0, inf) to [0, 1): ``1 - exp(-raw)``."""
    return 1.0 - math.exp(-max(0.0, raw))


def cue_distribution(raw: Mapping[str, float], labels: Sequence[str]) -> tuple[float, dict[str, float]]:
    """Turn raw cue strengths into (strength, shares): shares ∝ raw, strength = saturate(total)."""
    vals = {label: max(0.0, raw.get(label, 0.0)) for label in labels}
    total = sum(vals.values())
    if total <= 0:
        return 0.0, {}
    return saturate(total), {label: v / total for label, v in vals.items() if v > 0}


def fuse(
    records: Sequence[SignalRecord], field_name: str, prior: Mapping[str, float], prior_weight: float
) -> dict[str, float]:
    """Fuse ``prior_weight × prior + Σ weight × score`` per label, normalised, in prior's order."""
    totals = {label: prior_weight * p for label, p in prior.items()}
    for rec in records:
        if rec.field == field_name and rec.label in totals:
            totals[rec.label] += rec.weight * rec.score
    s = sum(totals.values())
    if s <= 0:
        return {label: r4(1.0 / len(totals)) for label in totals}
    return {label: r4(v / s) for label, v in totals.items()}


def redirect(dist: Mapping[str, float], share: float, sources: Sequence[str], target: str) -> dict[str, float]:
    """Move ``share`` of each source label's probability to ``target`` (hierarchical mode)."""
    out = dict(dist)
    share = min(1.0, max(0.0, share))
    for src in sources:
        moved = out[src] * share
        out[src] -= moved
        out[target] += moved
    return {k: r4(v) for k, v in out.items()}


def decisiveness(dist: Mapping[str, float]) -> float:
    """Confidence of a distribution: ``sqrt(p1 × (p1 − p2))`` — top probability × margin."""
    ps = sorted(dist.values(), reverse=True)
    if not ps:
        return 0.0
    p1, p2 = ps[0], ps[1] if len(ps) > 1 else 0.0
    return r4(math.sqrt(max(0.0, p1 * (p1 - p2))))


def argmax(dist: Mapping[str, float]) -> str:
    """Return the label with the highest probability; ties go to the earlier label."""
    best, best_p = "", -1.0
    for label, p in dist.items():
        if p > best_p:
            best, best_p = label, p
    return best


# --------------------------------------------------------------------------- prototypes

PROTOTYPES: dict[str, dict[str, tuple[str, ...]]] = {
    "mode": {
        "qa": ("What is the difference between these two options?", "When did we last talk about this?",
               "Can you explain how this works?", "Who was responsible for that decision?"),
        "task": ("Write a short summary of the document.", "Please fix the failing function.",
                 "Create a checklist for the launch.", "Rename the variables and clean up the code."),
        "interrupt": ("Stop what you are doing.", "Wait, cancel that task.",
                      "While you're at it, also add a conclusion.", "How far along is the current job?"),
        "push": ("A watched file was modified.", "A new item arrived in the news feed.",
                 "The monitored value changed."),
        "clarify": ("Hmm.", "Do the thing.", "You know what I mean.", "That one."),
    },
    "task_type": {
        "retrieval": ("Find what we said about the budget.", "Look up the address in my notes.",
                      "What did she tell me last week?", "Show me the earlier results."),
        "generation": ("Write an email to the team.", "Draft a short story.",
                       "Summarize this article in three sentences.", "Translate the paragraph into French."),
        "change": ("Edit the introduction to be shorter.", "Refactor this function.",
                   "Replace the old value with the new one.", "Update the settings file."),
        "diagnostic": ("Why does the program crash with an error?", "Debug the failing test.",
                       "Something is broken, figure out what went wrong.", "Investigate why it is so slow."),
        "planning": ("Plan the next steps of the project.", "Make a schedule for next week.",
                     "Break the work down into milestones.", "How should we prioritize these tasks?"),
    },
}


class PrototypeBank:
    """Labelled prototype vectors per field; ``scores`` is a softmax over max-cosine per label."""

    def __init__(self, labels: Mapping[str, Sequence[str]] | None = None,
                 vectors: Mapping[str, np.ndarray] | None = None) -> None:
        self._labels: dict[str, list[str]] = {}
        self._vectors: dict[str, np.ndarray] = {}
        for f, mat in (vectors or {}).items():
            m = np.asarray(mat, dtype=np.float64)
            rows = list((labels or {}).get(f, []))
            if m.ndim != 2 or not m.size or m.shape[0] != len(rows):
                continue  # unusable field: no signal rather than an error
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            self._vectors[f] = m / np.where(norms == 0, 1.0, norms)
            self._labels[f] = rows

    @classmethod
    def from_embed(cls, embed_fn: Callable[[list[str]], np.ndarray],
                   prototypes: Mapping[str, Mapping[str, Sequence[str]]] = PROTOTYPES) -> PrototypeBank:
        """Embed every prototype sentence once (call on the embed executor) and return the bank."""
        labels: dict[str, list[str]] = {}
        vectors: dict[str, np.ndarray] = {}
        for f, per_label in prototypes.items():
            rows = [(label, s) for label, sents in per_label.items() for s in sents]
            if not rows:
                continue
            labels[f] = [label for label, _ in rows]
            vectors[f] = np.asarray(embed_fn([s for _, s in rows]))
        return cls(labels, vectors)

    @classmethod
    def empty(cls) -> PrototypeBank:
        return cls()

    def is_empty(self) -> bool:
        return not any(m.size for m in self._vectors.values())

    def scores(self, query_vector: Sequence[float] | np.ndarray | None,
               temperature: float = 0.1) -> dict[str, dict[str, float]]:
        """Return ``{field: {label: p}}`` plus ``{field: {"_best": cosine}}`` strength; {} if unusable."""
        if query_vector is None:
            return {}
        q = np.asarray(query_vector, dtype=np.float64).ravel()
        qn = float(np.linalg.norm(q))
        if qn == 0 or not np.all(np.isfinite(q)):
            return {}
        out: dict[str, dict[str, float]] = {}
        for f, mat in self._vectors.items():
            if mat.shape[1] != q.shape[0]:
                continue
            sims = mat @ (q / qn)
            best: dict[str, float] = {}
            for label, s in zip(self._labels[f], sims.tolist(), strict=True):
                best[label] = max(best.get(label, -1.0), s)
            order = list(FIELD_LABELS.get(f, ())) or list(best)
            logits = np.array([best.get(label, -1.0) for label in order]) / max(temperature, 1e-6)
            exp = np.exp(logits - logits.max())
            probs = exp / exp.sum()
            dist = {label: r4(p) for label, p in zip(order, probs.tolist(), strict=True)}
            dist["_best"] = r4(max(best.values()))
            out[f] = dist
        return out


# --------------------------------------------------------------------------- text cues

def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_PREFIX_RE = _rx(r"^(?:(?:hey|hi|ok|okay|so|now|then|just|also|and|alright)[,]?\s+)*"
                 r"(?P<req>please|pls|kindly|can you|could you|would you|will you|can u|i need you to|"
                 r"i want you to|i'?d like you to|i would like you to|let'?s|go ahead and|help me(?: to)?)?"
                 r"[,]?\s*(?:please\s+)?")
_WANT_RE = _rx(r"^(?:i|we) (?:really )?(?:need|want|would like|'d like)\b")
_WH_RE = _rx(r"^(?:what|who|whom|whose|when|where|why|which|how)\b")
_AUX_RE = _rx(r"^(?:is|are|was|were|do|does|did|can|could|would|should|will|has|have|had|may|isn'?t|"
              r"aren'?t|don'?t|doesn'?t|didn'?t)\b")
_INFO_RE = _rx(r"\b(?:i wonder|do you know|any idea|tell me)\b")
_CONTROL_RE = _rx(r"^(?:(?:ok|okay|no|hey)[,!]?\s+)?(?P<c>stop|cancel|abort|halt|pause|wait|hold on|hang on|"
                  r"never ?mind|forget (?:it|that)|resume|continue|keep going|go on)\b")
_CONTROL_ACTION = {"stop": "stop", "halt": "stop", "abort": "stop", "cancel": "cancel", "nevermind": "cancel",
                   "never mind": "cancel", "forget it": "cancel", "forget that": "cancel", "pause": "pause",
                   "wait": "pause", "hold on": "pause", "hang on": "pause", "resume": "resume",
                   "continue": "resume", "keep going": "resume", "go on": "resume"}
_AMEND_RE = _rx(r"\b(?:while you'?re at it|while you are at it|in the meantime|meanwhile|"
                r"also (?:add|include|make sure)|and also)\b")
_STATUS_RE = _rx(r"\b(?:status|progress|how far|how long|done yet|finished yet|eta|how'?s it going|"
                 r"how is it going|are you done|still running|almost done)\b")
_FOLLOW_RE = _rx(r"^(?:and|but|also|what about|how about|same for|same with|then|what else|why not|"
                 r"the (?:first|second|third|last|next|other|previous) one|another one|more|again)\b")
_ACK_RE = _rx(r"^(?:thanks|thank you|thx|ok|okay|great|cool|got it|perfect|nice|sounds good)[.! ]*$")
_PRONOUN_RE = _rx(r"\b(?:it|that|this|them|those|these|one)\b")
_URGENT_RE = _rx(r"\b(?:urgent(?:ly)?|asap|immediately|right now|right away|as soon as possible|emergency|"
                 r"critical|hurry)\b|\bnow\s*!*\s*$|!{2,}")
_CALM_RE = _rx(r"\b(?:no rush|no hurry|whenever|when you (?:have|get) (?:time|a chance)|low priority|"
               r"at some point|eventually|not urgent)\b")
_RECENT_RE = _rx(r"\b(?:today|just now|recently|a (?:moment|minute|second) ago|earlier|this (?:morning|"
                 r"afternoon|evening)|last hour|latest)\b")
_PAST_RE = _rx(r"\b(?:yesterday|last (?:week|month|year|time|session)|\d+ (?:days|weeks|months|years) ago|"
               r"previously|back then|in (?:19|20)\d\d)\b")
_ACCEPT_RE = _rx(r"\b(?:so that|such that|make sure(?: that)?|ensure(?: that)?|it (?:should|must|needs to)|"
                 r"until|done when|acceptance:|success(?:ful)? (?:is|when))\s+(?P<x>[^.;!?]+)")
_CONSTRAINT_RE = _rx(r"\b(?P<x>(?:without|only (?:use|using|in|with|from)|using|keep (?:it|them)?|"
                     r"in (?:under|less than|at most|no more than)|(?:at most|no more than|under|less than|"
                     r"max(?:imum)?|within) \d+|in \d+|by (?:tomorrow|today|tonight|monday|tuesday|wednesday|"
                     r"thursday|friday|saturday|sunday|end of (?:day|week))|in (?:python|javascript|typescript|"
                     r"rust|go|java|markdown|json|yaml|csv|english|french|german|spanish|chinese|japanese|"
                     r"bullet points|a table))\b[^.;!?,]*)")
_PROHIB_RE = _rx(r"(?:^|[,.;:!]\s*|\b(?:and|but|please|just|also)\s+)(?:don'?t|do not|never|avoid|must not)"
                 r"\s+(?P<x>[^.;,!?]+)")
_SUBQ_SPLIT_RE = _rx(r",?\s+(?:and|also|plus)\s+(?=(?:what|who|when|where|why|which|how|is|are|does|do|did|"
                     r"can|could|should|will)\b)")
_PHRASES: tuple[tuple[re.Pattern[str], str, float], ...] = (
    (_rx(r"\bwhat(?:'s| is) wrong\b|\bwent wrong\b|\bnot working\b|\bdoesn'?t work\b|\bstack ?trace\b"),
     "diagnostic", 1.2),
    (_rx(r"\bwhy\b.*\b(?:error|fail\w*|crash\w*|broken|wrong|slow|exception|bug)"), "diagnostic", 1.0),
    (_rx(r"\b(?:a|the|my|our) (?:plan|roadmap|schedule|timeline|strategy|checklist|agenda)\b"), "planning", 1.0),
    (_rx(r"\b(?:next steps|how should (?:i|we)|what should (?:i|we) do|break (?:it|this|the \w+) down)\b"),
     "planning", 1.0),
    (_rx(r"\b(?:look up|what did|when did|where (?:is|are|did)|who (?:said|was|is))\b"), "retrieval", 0.8),
)
_RISK_STEMS = frozenset("delet remov eras wip drop truncat overwrit purg reset deploy publish pay payment "
                        "purchas buy transfer send sent submit rm uninstall kill shutdown".split())


def _words_table(spec: str) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for entry in spec.split():
        word, labels = entry.split("=")
        for part in labels.split(","):
            label, w = part.split(":")
            table.setdefault(stem(word), {})[label] = float(w)
    return table


_TASK_WORDS = _words_table(
    "find=retrieval:1 search=retrieval:1 look=retrieval:.6 list=retrieval:.8 show=retrieval:.8 "
    "fetch=retrieval:.8 retrieve=retrieval:1 recall=retrieval:1 remind=retrieval:1 locate=retrieval:1 "
    "remember=retrieval:.8 mentioned=retrieval:.8 said=retrieval:.8 told=retrieval:.8 where=retrieval:.5 "
    "who=retrieval:.6 when=retrieval:.5 which=retrieval:.4 what=retrieval:.4 tell=retrieval:.6 "
    "explain=retrieval:.6,generation:.3 describe=retrieval:.5,generation:.3 define=retrieval:.8 "
    "compare=retrieval:.5 check=retrieval:.5,diagnostic:.3 "
    "write=generation:1 draft=generation:1 compose=generation:1 generate=generation:1 create=generation:.8 "
    "make=generation:.5 summarize=generation:1 summarise=generation:1 translate=generation:1 "
    "outline=generation:.6,planning:.3 brainstorm=generation:.8 suggest=generation:.6 propose=generation:.6 "
    "rephrase=generation:1 paraphrase=generation:1 poem=generation:.6 essay=generation:.6 story=generation:.6 "
    "fix=change:1,diagnostic:.3 change=change:1 edit=change:1 modify=change:1 update=change:1 "
    "refactor=change:1 rename=change:1 replace=change:1 remove=change:1 delete=change:1 add=change:.7 "
    "implement=change:1 move=change:.8 convert=change:.8 rewrite=change:.8,generation:.4 patch=change:1 "
    "install=change:1 deploy=change:1 configure=change:1 clean=change:.8 merge=change:.8 undo=change:1 "
    "restore=change:1 send=change:.6 publish=change:.6 apply=change:.8 migrate=change:1 upgrade=change:1 "
    "commit=change:.8 insert=change:1 append=change:.8 tweak=change:1 adjust=change:1 correct=change:.8 "
    "improve=change:.6 optimize=change:.6 build=change:.6,generation:.4 "
    "debug=diagnostic:1 diagnose=diagnostic:1 investigate=diagnostic:1 troubleshoot=diagnostic:1 "
    "error=diagnostic:.8 exception=diagnostic:.8 traceback=diagnostic:1 crash=diagnostic:1 "
    "fail=diagnostic:.8 failing=diagnostic:.8 failure=diagnostic:.8 broken=diagnostic:.8 bug=diagnostic:.5 "
    "log=diagnostic:.4 logs=diagnostic:.4 "
    "wrong=diagnostic:.5 issue=diagnostic:.4 slow=diagnostic:.5 leak=diagnostic:.6 timeout=diagnostic:.6 "
    "why=diagnostic:.4 "
    "plan=planning:1 schedule=planning:1 roadmap=planning:1 prioritize=planning:1 prioritise=planning:1 "
    "organize=planning:.8 organise=planning:.8 strategy=planning:.8 milestone=planning:1 "
    "timeline=planning:.8 agenda=planning:.8 steps=planning:.5 todo=planning:.8 checklist=planning:.6"
)
_NON_VERBS = frozenset(stem(w) for w in (
    "where who when which what mentioned said told poem essay story error exception traceback failing failure "
    "broken bug log logs wrong issue slow leak timeout why strategy milestone timeline agenda steps todo "
    "checklist roadmap").split())
_VERBS = frozenset(_TASK_WORDS) - _NON_VERBS
_CLAUSE_VERB_RE = _rx(r"(?:^|[.,;:!?]\s+|\b(?:and|then)\s+)(?:please\s+|just\s+|also\s+)?(?P<v>[a-z]+)\b")
_INTERJECTIONS = frozenset("hmm hm hmmm huh uh um umm er eh ah oh meh idk lol well yeah yes yep no nope sure".split())
_INFO_VERBS = frozenset(stem(w) for w in "tell explain describe show remind define".split())
_FILLERS = frozenset("hey hi ok okay so now then just also and alright please".split())


@dataclass
class TextCues:
    """What the text alone says: raw cue strength per label, flags, spans (for audit and tests)."""

    body: str = ""
    mode: dict[str, float] = field(default_factory=dict)
    task: dict[str, float] = field(default_factory=dict)
    spans: list[EvidenceSpan] = field(default_factory=list)
    question: bool = False
    control: str | None = None
    amend: bool = False
    status_query: bool = False
    follow_up: bool = False
    ack: bool = False
    vague: bool = False
    urgency: Urgency = Urgency.NORMAL
    risk_words: list[str] = field(default_factory=list)
    time_hints: list[str] = field(default_factory=list)

    def add(self, table: dict[str, float], label: str, strength: float, span: str, fld: str) -> None:
        table[label] = table.get(label, 0.0) + strength
        ev = EvidenceSpan(span=span.strip(), field=fld)
        if ev.span and ev not in self.spans:
            self.spans.append(ev)


def analyse_text(text: str) -> TextCues:
    """Read cue words and sentence form from ``text`` (no context): the rules signal's input."""
    t = re.sub(r"\s+", " ", text.replace("\u2019", "'")).strip()
    c = TextCues()
    if not t:
        return c
    prefix = _PREFIX_RE.match(t)
    req = prefix.group("req") if prefix else None
    c.body = t[prefix.end():].strip() if prefix else t
    body_words = tokenize(c.body)
    first = stem(body_words[0]) if body_words else ""
    if (m := _CONTROL_RE.match(t)) is not None:
        c.control = _CONTROL_ACTION.get(m.group("c").lower(), "stop")
        c.add(c.mode, "interrupt", 2.0, m.group(0), "mode")
    if (m := _AMEND_RE.search(t)) is not None:
        c.amend = True
        c.add(c.mode, "interrupt", 1.0, m.group(0), "mode")
    if (m := _STATUS_RE.search(t)) is not None:
        c.status_query = True  # only the structure signal knows whether a task is running
        c.spans.append(EvidenceSpan(span=m.group(0), field="mode"))
    head_is_task = first in _VERBS and first not in _INFO_VERBS and not c.control
    polite_request = bool(req) and head_is_task  # "can you fix X?": the '?' is politeness
    if "?" in t and not polite_request:
        c.question = True
        c.add(c.mode, "qa", 1.0 if t.endswith("?") else 0.6, "?", "mode")
    if (m := _WH_RE.match(c.body)) is not None and not req:
        c.question = True
        c.add(c.mode, "qa", 1.0, m.group(0), "mode")
        if m.group(0).lower() not in ("why", "how"):  # "what changed" asks to look something up
            c.add(c.task, "retrieval", 0.8, m.group(0), "task_type")
    elif (m := _AUX_RE.match(t)) is not None and not req and not c.control:
        c.question = True
        c.add(c.mode, "qa", 0.8, m.group(0), "mode")
    if (m := _INFO_RE.search(t)) is not None:
        c.add(c.mode, "qa", 0.8, m.group(0), "mode")
    if first in _INFO_VERBS:
        c.add(c.mode, "qa", 1.2, body_words[0], "mode")
    elif head_is_task and not _WH_RE.match(c.body):
        c.add(c.mode, "task", 1.5, body_words[0], "mode")
        if req:
            c.add(c.mode, "task", 1.0, req, "mode")
    elif req and not c.question:
        c.add(c.mode, "task", 0.8, req, "mode")
    for m in _CLAUSE_VERB_RE.finditer(t):  # imperatives that open a later clause: "..., check the logs"
        verb = stem(m.group("v").lower())
        if m.start("v") > 0 and verb in _VERBS and verb not in _INFO_VERBS and verb != first:
            c.add(c.mode, "task", 1.0, m.group("v"), "mode")
    if (m := _WANT_RE.match(t)) is not None and not c.question:
        c.add(c.mode, "task", 1.0, m.group(0), "mode")
    if not c.mode and content_stems(c.body):  # a plain statement ("the deadline moved"): inform
        c.add(c.mode, "qa", 0.8, c.body[:60], "mode")
    # task type: every known word counts; the head verb's main label counts double
    negated = negated_stems(t)
    tokens = tokenize(t)
    head_index = len(tokens) - len(body_words)
    for i, word in enumerate(tokens):
        s = stem(word)
        table = _TASK_WORDS.get(s, {})
        main = next(iter(table), "")
        for label, w in table.items():
            boost = 2.0 if (i == head_index and label == main) else 1.0
            c.add(c.task, label, w * boost * (0.3 if s in negated else 1.0), word, "task_type")
    for pattern, label, w in _PHRASES:
        if (m := pattern.search(t)) is not None:
            c.add(c.task, label, w, m.group(0), "task_type")
    # flags
    stems = [x for x in content_stems(c.body) if x not in _INTERJECTIONS]
    c.ack = bool(_ACK_RE.match(t))
    if c.ack:
        c.add(c.mode, "qa", 1.5, t, "mode")
    c.follow_up = bool(_FOLLOW_RE.match(t)) and len(tokenize(t)) <= 7
    pronoun_only = len(stems) <= 1 and bool(_PRONOUN_RE.search(c.body)) and len(tokenize(c.body)) <= 4
    if not c.ack and not c.control and (not stems or pronoun_only) and not extract_entities(t):
        c.vague = True
        c.follow_up = c.follow_up or pronoun_only
        c.add(c.mode, "clarify", 1.5 if not stems else 0.8, t, "mode")
    if (m := _CALM_RE.search(t)) is not None:
        c.urgency = Urgency.LOW
        c.spans.append(EvidenceSpan(span=m.group(0), field="urgency"))
    elif (m := _URGENT_RE.search(t)) is not None or c.control in ("stop", "cancel", "pause"):
        c.urgency = Urgency.HIGH
        c.spans.append(EvidenceSpan(span=m.group(0) if m else str(c.control), field="urgency"))
    for word in tokenize(t):
        if stem(word) in _RISK_STEMS and stem(word) not in negated and word not in c.risk_words:
            c.risk_words.append(word)
            c.spans.append(EvidenceSpan(span=word, field="risk"))
    for pattern, hint in ((_RECENT_RE, "recent"), (_PAST_RE, "past")):
        for m in pattern.finditer(t):
            c.time_hints.append(f"time:{hint}:{m.group(0).lower()}")
    return c


def _dedup(items: Sequence[str], cap: int) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        v = re.sub(r"\s+", " ", str(item)).strip()
        if v and v.lower() not in seen:
            seen[v.lower()] = v[:200]
    return list(seen.values())[:cap]


_ENTITY_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"https?://\S+[\w/]"),
    re.compile(r"\"([^\"]{1,80})\"|\u201c([^\u201d]{1,80})\u201d|`([^`]{1,80})`|"
               r"(?:(?<=\s)|^)'([^']{2,80})'(?=[\s.,;:!?]|$)"),
    re.compile(r"(?:~|\.{1,2})?/[\w.\-]+(?:/[\w.\-]+)*|\b[\w\-]+(?:/[\w\-]+)*\.(?:py|js|ts|tsx|md|txt|json|yaml|yml|"
               r"toml|csv|html|css|ini|cfg|log|sql|rs|go|java|c|cpp|h|sh|pdf|docx?|xlsx?|pptx?|png|jpe?g)\b"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|"
               r"Sept|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?(?:,? \d{4})?\b|\b\d{1,2}(?:st|nd|rd|th)? (?:of )?"
               r"(?:January|February|March|April|May|June|July|August|September|October|November|December)\b"),
    re.compile(r"[#@][\w\-]+|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|"
               r"\b[A-Z]{2,}\d*\b|\b[A-Z]\d+[A-Z\d]*\b"),
    re.compile(r"\b[A-Z][a-z]+(?:[ \-][A-Z][a-z]+)*\b"),
    re.compile(r"\b\d+(?:[.,:]\d+)*%?"),
)
_SENTENCE_OPENERS = frozenset("never always don't maybe perhaps thanks sorry actually urgent wait stop while after "
                               "before since because although once until still however first next finally ask let "
                               "give take call see go try keep help put bring open close read run start test note "
                               "hello dear".split())
_NOT_NAMES = frozenset("I OK ASAP ETA FYI URGENT IMPORTANT NOTE TODO PLEASE NOW BTW IMO".split())


def extract_entities(text: str, cap: int = 12) -> list[str]:
    """Return names, paths, quoted terms, identifiers, capitalised words, dates and numbers, in order."""
    taken: list[tuple[int, int, str]] = []
    common = STOPWORDS | set(_TASK_WORDS) | _FILLERS | _INTERJECTIONS | _SENTENCE_OPENERS
    for pattern in _ENTITY_PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span()
            value = next((g for g in m.groups() if g), m.group(0)) if m.groups() else m.group(0)
            if pattern is _ENTITY_PATTERNS[5]:
                words = value.split(" ")
                while words and (words[0].lower() in common or stem(words[0].lower()) in common):
                    start += len(words[0]) + 1
                    words = words[1:]
                value = " ".join(words)
            value = value.strip(" .,;:!?")
            if not value or value in _NOT_NAMES or any(s < end and start < e for s, e, _ in taken):
                continue
            taken.append((start, end, value))
    return _dedup([v for _, _, v in sorted(taken)], cap)


def _clean_goal(body: str) -> str:
    words = body.split(" ")
    while words and words[0].lower().strip(",") in _FILLERS:
        words = words[1:]
    goal = " ".join(words).strip().rstrip(".!;, ")
    goal = re.sub(r"[,\s]*please$", "", goal, flags=re.IGNORECASE)
    return goal[:240].rsplit(" ", 1)[0] if len(goal) > 240 else goal


def split_sub_questions(text: str) -> list[str]:
    """Split a compound question into atomic sub-questions (empty when it is not compound)."""
    sentences = [s.strip() for s in re.findall(r"[^?]+\?", text) if s.strip()]
    if len(sentences) >= 2:
        return [re.sub(r"^[\s.,;!]+", "", s) for s in sentences]
    parts = [p.strip() for p in _SUBQ_SPLIT_RE.split(text.strip()) if p.strip()]
    if len(parts) >= 2 and "?" in text:
        return [p if p.endswith("?") else p.rstrip(".,;") + "?" for p in parts]
    return []


# --------------------------------------------------------------------------- LLM signal

_STR_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": 6}
INTENT_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": list(MODES)},
        "task_type": {"type": "string", "enum": list(TASK_TYPES)},
        "goal": {"type": "string"},
        "acceptance": _STR_LIST,
        "constraints": _STR_LIST,
        "prohibitions": _STR_LIST,
        "entities": _STR_LIST,
        "plan_hints": _STR_LIST,
        "sub_questions": _STR_LIST,
        "evidence": _STR_LIST,
        "uncertainty_reasons": _STR_LIST,
        "urgency": {"type": "string", "enum": [u.value for u in Urgency]},
        "risk": {"type": "string", "enum": [r.value for r in Risk]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "needs_clarification": {"type": "boolean"},
    },
    "required": ["mode", "task_type", "goal", "confidence"],
    "additionalProperties": False,
}
_LIST_FIELDS = ("acceptance", "constraints", "prohibitions", "entities", "plan_hints", "sub_questions",
                "evidence", "uncertainty_reasons")
_KEY_ALIASES = {"intent": "mode", "tasktype": "task_type", "type": "task_type", "planhints": "plan_hints",
                "subquestions": "sub_questions", "uncertaintyreasons": "uncertainty_reasons",
                "needsclarification": "needs_clarification", "evidence_spans": "evidence"}
_SYNONYMS: dict[str, dict[str, str]] = {
    "mode": {"question": "qa", "q&a": "qa", "qna": "qa", "answer": "qa", "query": "qa", "chat": "qa",
             "command": "task", "instruction": "task", "execute": "task", "execution": "task",
             "task_execution": "task", "action": "task", "request": "task", "interruption": "interrupt",
             "cancel": "interrupt", "stop": "interrupt", "amend": "interrupt", "notification": "push",
             "proactive": "push", "event": "push", "clarification": "clarify", "ambiguous": "clarify",
             "unclear": "clarify"},
    "task_type": {"search": "retrieval", "lookup": "retrieval", "question_answering": "retrieval",
                  "qa": "retrieval", "recall": "retrieval", "information": "retrieval", "write": "generation",
                  "writing": "generation", "summarization": "generation", "summary": "generation",
                  "code_generation": "generation", "creative": "generation", "translation": "generation",
                  "edit": "change", "modify": "change", "modification": "change", "code_change": "change",
                  "update": "change", "refactor": "change", "debug": "diagnostic", "debugging": "diagnostic",
                  "diagnosis": "diagnostic", "troubleshooting": "diagnostic", "plan": "planning",
                  "schedule": "planning", "scheduling": "planning"},
    "urgency": {"medium": "normal", "urgent": "high", "critical": "high", "none": "low"},
    "risk": {"normal": "medium", "moderate": "medium", "none": "low", "critical": "high"},
}
_ALLOWED = {"mode": MODES, "task_type": TASK_TYPES, "urgency": tuple(u.value for u in Urgency),
            "risk": tuple(r.value for r in Risk)}


def _label_of(value: Any, fld: str) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("-", "_").replace(" ", "_")
    return v if v in _ALLOWED[fld] else _SYNONYMS[fld].get(v)


def normalize_llm_intent(raw: Any, max_items: int = 12) -> tuple[dict[str, Any], list[str]]:
    """Normalise the model's JSON: map or drop unknown labels, ignore wrong types, trim strings.

    Returns (the usable fields, the problems found). Never raises; an unusable value gives ({}, [...]).
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}, ["not JSON"]
    if not isinstance(raw, dict):
        return {}, [f"expected an object, got {type(raw).__name__}"]
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(key, str) and key.lower() in ("intentstruct", "intent_struct") and isinstance(value, dict):
            flat.update({k: v for k, v in value.items() if isinstance(k, str)})
    flat.update({k: v for k, v in raw.items()
                 if isinstance(k, str) and k.lower() not in ("intentstruct", "intent_struct")})
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key in sorted(flat):
        value = flat[key]
        norm = key.strip().lower()
        norm = _KEY_ALIASES.get(norm.replace("_", ""), _KEY_ALIASES.get(norm, norm))
        if norm in _ALLOWED:
            label = _label_of(value, norm)
            if label is None:
                problems.append(f"{norm}: unknown label {str(value)[:40]!r}")
            else:
                out[norm] = label
        elif norm == "goal":
            if isinstance(value, str) and value.strip():
                out["goal"] = re.sub(r"\s+", " ", value).strip()[:240]
            else:
                problems.append("goal: not a non-empty string")
        elif norm in _LIST_FIELDS:
            items = [value] if isinstance(value, (str, dict)) else value if isinstance(value, list) else None
            if items is None:
                problems.append(f"{norm}: not a list")
                continue
            texts = [i.get("span", "") if isinstance(i, dict) else i for i in items]
            kept = [s for s in texts if isinstance(s, str) and s.strip()]
            if len(kept) < len(texts):
                problems.append(f"{norm}: dropped {len(texts) - len(kept)} non-string item(s)")
            out[norm] = _dedup(kept, max_items)
        elif norm == "confidence":
            if isinstance(value, dict):
                nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
                value = sum(nums) / len(nums) if nums else None
            if isinstance(value, str):
                value = {"high": 0.85, "medium": 0.6, "low": 0.3}.get(value.strip().lower(), value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out["confidence"] = r4(min(1.0, max(0.0, float(value))))
            else:
                problems.append("confidence: not a number")
        elif norm == "needs_clarification":
            if isinstance(value, bool):
                out[norm] = value
            elif isinstance(value, str) and value.strip().lower() in ("true", "false"):
                out[norm] = value.strip().lower() == "true"
            else:
                problems.append("needs_clarification: not a boolean")
        else:
            problems.append(f"unknown field {norm!r}")
    return out, problems


def intent_messages(text: str, ctx: IntentContext | None = None) -> list[dict[str, str]]:
    """Build the chat prompt that asks the local model for ``INTENT_JSON_SCHEMA`` JSON."""
    ctx = ctx or IntentContext()
    system = (
        "You analyse one input for a context manager. Reply with one JSON object only.\n"
        "mode: qa (a question to answer), task (do, make or change something), interrupt (addresses a "
        "running task: stop, pause, amend it, ask its status), push (reacting to an environment event), "
        "clarify (too vague to act on).\n"
        "task_type: retrieval, generation, change, diagnostic or planning.\n"
        "goal: what the user wants now, one sentence. acceptance: what counts as done. constraints and "
        "prohibitions: only what the user said. entities: names, files, dates, quoted terms. "
        "sub_questions: the parts of a compound question. evidence: exact words of the input that support "
        "your answer. uncertainty_reasons: what is missing or ambiguous; never guess missing facts.\n"
        "confidence: 0 to 1."
    )
    lines = [f"Input: {text.strip() or '(no user text)'}"]
    running = [t for t in ctx.running_tasks if t.status.lower() not in _DONE]
    if running:
        lines.append("Running tasks: " + "; ".join(f"{t.name} [{t.status}]" for t in running))
    if ctx.recent_turns:
        lines.append("Recent turns: " + " | ".join(f"({t.mode}) {t.text[:160]}" for t in ctx.recent_turns[-3:]))
    if ctx.profile.prohibitions:
        lines.append("User prohibitions: " + "; ".join(ctx.profile.prohibitions))
    if ctx.recent_env_events:
        events = ctx.recent_env_events[-5:]
        lines.append("Environment events: " + "; ".join(f"{e.kind}: {e.title or e.uri}" for e in events))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


# --------------------------------------------------------------------------- engine

_ENV_ALERT_RE = _rx(r"\b(?:error|alert|fail\w*|crash\w*|down|critical|exception)\b")
_SAFE_SEND_RE = _rx(r"\b(?:send|email|mail)\s+(?:it\s+)?(?:to\s+)?me\b")


def _target_task(text: str, running: Sequence[RunningTask], focus: str | None,
                 head: str = "") -> tuple[RunningTask | None, bool, bool]:
    """Return (the task the input addresses, whether that is ambiguous, whether the text names a task).

    The head verb is left out of the name match: "write a poem" does not name "Write the report".
    """
    if not running:
        return None, False, False
    stems = set(content_stems(text)) - {head}
    overlaps = [len(stems & set(content_stems(t.name))) for t in running]
    named = max(overlaps) > 0
    for t in running:
        if focus is not None and t.task_id == focus:
            return t, False, named
    if len(running) == 1:
        return running[0], False, named
    best = max(overlaps)
    if best > 0 and overlaps.count(best) == 1:
        return running[overlaps.index(best)], False, named
    return None, True, named


def _env_goal(events: Sequence[EnvEventRef]) -> str:
    recent = list(events)[-3:]
    if not recent:
        return ""
    if len(events) == 1:
        e = recent[0]
        return f"Review the {e.kind} event: {e.title or e.uri}"
    return f"Review {len(events)} environment events: " + "; ".join(e.title or e.uri for e in recent)


class IntentEngine:
    """Fuses rules, embeddings, structure, profile, environment and (optional) LLM JSON into an Intent.

    Pure and deterministic: the same text and context always give an identical ``Intent``.
    """

    def __init__(self, bank: PrototypeBank | None = None, weights: IntentWeights = DEFAULT_WEIGHTS) -> None:
        self.bank = bank
        self.weights = weights

    def infer(self, text: str, ctx: IntentContext | None = None) -> Intent:
        """Return the structured intent of ``text`` (may be empty for an environment event)."""
        ctx = ctx or IntentContext()
        w = self.weights
        text = re.sub(r"\s+", " ", (text or "").replace("\u2019", "'")).strip()
        cues = analyse_text(text)
        records: list[SignalRecord] = []
        spans = list(cues.spans)
        reasons: list[str] = []
        hints: list[str] = list(cues.time_hints)

        def rec(name: str, fld: str, label: str, weight: float, score: float) -> None:
            records.append(SignalRecord(name=name, field=fld, label=label, weight=r4(weight), score=r4(score)))

        # (a) rules: the cue shares form the distribution, their total sets the weight
        statements = parse_profile_statements(text)
        if statements:  # "never X" / "I prefer X": an instruction about how to work
            cues.add(cues.mode, "task", 1.2, statements[0].span, "mode")
            hints.extend(f"profile_update:{s.kind}" for s in statements)
        for fld, table in (("mode", cues.mode), ("task_type", cues.task)):
            strength, shares = cue_distribution(table, FIELD_LABELS[fld])
            for label, share_ in shares.items():
                rec("rules", fld, label, w.rules * strength, share_)
        # (b) embedding similarity to prototypes
        if self.bank is not None and text and ctx.query_vector is not None:
            for fld, dist in self.bank.scores(ctx.query_vector, w.embed_temperature).items():
                strength = min(1.0, max(0.0, dist.get("_best", 0.0)))
                for label in FIELD_LABELS.get(fld, ()):
                    rec("embedding", fld, label, w.embedding * strength, dist.get(label, 0.0))
        # (c) interaction structure: follow-ups and running tasks
        running = [t for t in ctx.running_tasks if t.status.lower() not in _DONE]
        head = stem(tokenize(cues.body)[0]) if tokenize(cues.body) else ""
        target, ambiguous, named = _target_task(text, running, ctx.focus_task, head)
        prev = ctx.recent_turns[-1] if ctx.recent_turns else None
        follow_up = prev is not None and bool(text) and (
            cues.follow_up or (cues.control == "resume" and not running))
        if follow_up and prev is not None:
            prev_mode = next((t.mode for t in reversed(ctx.recent_turns) if t.mode in ("qa", "task")), "qa")
            rec("structure", "mode", prev_mode, w.structure, 1.0)
            strength, shares = cue_distribution(analyse_text(prev.text).task, TASK_TYPES)
            for label, share_ in shares.items():
                rec("structure", "task_type", label, 0.8 * w.structure * strength, share_)
            hints.append("follow_up")
            spans.append(EvidenceSpan(source="history", span=prev.text[:120], field="goal"))
        share = 0.0
        if running and text:
            if cues.control:
                share = 0.9
                hints.append(f"control:{cues.control}")
            elif cues.amend:
                share = 0.85
                hints.append("amend_running_task")
            elif cues.status_query:
                share = 0.8
                hints.append("status_query")
            elif cues.question:
                share = 0.8 if named else 0.55
            else:
                share = 0.6 if named else 0.2
            rec("structure", "mode", "interrupt", share, 1.0)
        # (e) environment
        events = list(ctx.recent_env_events)
        env_trigger = ctx.trigger == "env" or (not text and bool(events))
        env_entities: list[str] = []
        if env_trigger:
            rec("env", "mode", "push", w.env, 1.0)
            titles = " ".join(e.title for e in events)
            rec("env", "task_type", "diagnostic" if _ENV_ALERT_RE.search(titles) else "retrieval", w.env, 1.0)
            env_entities = [e.uri for e in events[-5:] if e.uri] + extract_entities(titles)
            spans.extend(EvidenceSpan(source="env", span=(e.title or e.uri)[:120], field="goal") for e in events[-3:])
            hints.append("include_env_events")
        elif events and text:
            stems = set(content_stems(text))
            hits = [e for e in events if stems & set(content_stems(e.title + " " + e.uri))]
            if hits:
                hints.append("include_env_events")
                env_entities = [e.uri for e in hits if e.uri] + extract_entities(" ".join(e.title for e in hits))
        if not text and not env_trigger:
            rec("rules", "mode", "clarify", w.rules, 1.0)
            reasons.append("empty_input: no text and no environment event")
        # (f) the LLM's JSON, normalised; failure only degrades
        report, llm_fields = self._llm_signal(ctx, reasons)
        llm_conf = float(llm_fields.get("confidence", 0.6))
        for fld in ("mode", "task_type"):
            if fld in llm_fields:
                rec("llm", fld, llm_fields[fld], w.llm * (0.5 + 0.5 * llm_conf), 1.0)
                rule_table = cues.mode if fld == "mode" else cues.task
                if rule_table:
                    rule_top = argmax({k: rule_table.get(k, 0.0) for k in FIELD_LABELS[fld]})
                    if rule_top != llm_fields[fld] and saturate(rule_table[rule_top]) >= 0.6:
                        reasons.append(f"signal_conflict: {fld} rules={rule_top} llm={llm_fields[fld]}")
        # fusion
        mode_dist = fuse(records, "mode", MODE_PRIOR, w.prior)
        if share > 0:
            mode_dist = redirect(mode_dist, share, ("qa", "task"), "interrupt")
        task_dist = fuse(records, "task_type", TASK_PRIOR, w.prior)
        mode, task_type = Mode(argmax(mode_dist)), TaskType(argmax(task_dist))
        if mode == Mode.INTERRUPT and target is not None:
            hints.append(f"target_task:{target.task_id}")
        # goal and its confidence
        own_stems = content_stems(cues.body)
        entities = extract_entities(text)
        goal = _clean_goal(cues.body)
        goal_conf = min(1.0, (len(own_stems) + 0.5 * len(entities)) / 4.0) * (0.4 if cues.vague else 1.0)
        if env_trigger:
            goal, goal_conf = _env_goal(events) or goal, 0.8 if events else 0.3
        elif mode == Mode.INTERRUPT and cues.control:
            goal = f"{cues.control} the running task" + (f" '{target.name}'" if target else "")
            goal_conf = 0.9 if target else 0.5
        elif follow_up and prev is not None:
            goal = f"{goal} (follow-up to: {_clean_goal(prev.text)[:160]})"
            goal_conf = max(goal_conf, 0.4 + 0.4 * min(1.0, len(content_stems(prev.text)) / 4.0))
            entities = entities + extract_entities(prev.text)
        elif cues.ack:
            goal, goal_conf = "acknowledge the reply", 0.7
        elif statements:
            goal = "remember: " + "; ".join(f"{s.kind} {s.text}" for s in statements)
            goal_conf = 0.8
        if goal and not env_trigger:
            spans.append(EvidenceSpan(span=cues.body[:200], field="goal"))
        if "goal" in llm_fields:
            goal = llm_fields["goal"]
            llm_goal = min(1.0, len(content_stems(goal)) / 4.0) * (0.5 + 0.5 * llm_conf)
            goal_conf = max(goal_conf, llm_goal)
        # structured fields from the text, the profile and the LLM
        acceptance = [m.group("x") for m in _ACCEPT_RE.finditer(text)]
        constraints = [m.group("x") for m in _CONSTRAINT_RE.finditer(text)]
        prohibitions = [m.group("x") for m in _PROHIB_RE.finditer(text)]
        for fld, found in (("acceptance", acceptance), ("constraints", constraints), ("prohibitions", prohibitions)):
            spans.extend(EvidenceSpan(span=x.strip(), field=fld) for x in found)
        profile = ctx.profile
        prohibitions += profile.prohibitions
        constraints += [f"never {p}" for p in profile.prohibitions]
        hints += [f"prefer:{p}" for p in profile.preferences]
        conflicts = profile.prohibition_hits(text) if text else []
        permitted = profile.permission_hits(text) if text else []
        for hit in conflicts:
            rec("profile", "risk", "high", 1.0, 1.0)
            reasons.append(f"prohibition_conflict: never {hit}")
            spans.append(EvidenceSpan(source="profile", span=hit, field="prohibitions"))
        hints += [f"permitted:{p}" for p in permitted]
        if permitted:
            rec("profile", "risk", "medium", 1.0, 1.0)
        sub_questions = split_sub_questions(text)
        if sub_questions:
            hints.append(f"decompose:{len(sub_questions)}")
        for fld, target_list in (("acceptance", acceptance), ("constraints", constraints),
                                 ("prohibitions", prohibitions), ("entities", entities),
                                 ("plan_hints", hints), ("sub_questions", sub_questions)):
            target_list.extend(llm_fields.get(fld, []) if fld != "sub_questions" or not sub_questions else [])
        low = text.lower()
        spans.extend(EvidenceSpan(source="llm", span=s, field="llm") for s in llm_fields.get("evidence", [])
                     if s.lower() in low)
        reasons.extend(f"llm: {r}" for r in llm_fields.get("uncertainty_reasons", []))
        entities = entities + env_entities
        # urgency and risk
        urgency = cues.urgency
        if env_trigger and _ENV_ALERT_RE.search(" ".join(e.title for e in events)):
            urgency = Urgency.HIGH
        if urgency == Urgency.NORMAL and "urgency" in llm_fields:
            urgency = Urgency(llm_fields["urgency"])
        acting = mode in (Mode.TASK, Mode.INTERRUPT) and not statements
        risk_words = [] if _SAFE_SEND_RE.search(text) else cues.risk_words
        risk = Risk.MEDIUM if acting and task_type == TaskType.CHANGE else Risk.LOW
        if risk_words:
            risk = Risk.HIGH if acting else Risk.MEDIUM
            if permitted and risk == Risk.HIGH:
                risk = Risk.MEDIUM
        if conflicts:
            risk = Risk.HIGH
        if "risk" in llm_fields and _LEVEL[llm_fields["risk"]] > _LEVEL[risk.value]:
            risk = Risk(llm_fields["risk"])
        # confidence decomposition and clarification triggers
        conf = IntentConfidence(mode=decisiveness(mode_dist), task_type=decisiveness(task_dist), goal=r4(goal_conf))
        top2 = sorted(mode_dist, key=lambda k: (-mode_dist[k], MODES.index(k)))[:2]
        if mode == Mode.CLARIFY and not any(r.startswith("empty_input") for r in reasons):
            reasons.append(f"vague_goal: '{text[:60]}' names nothing to act on")
        if conf.mode < w.clarify_mode_below:
            reasons.append(f"low_mode_confidence: {top2[0]} vs {top2[1]} ({conf.mode})")
        if mode == Mode.TASK and conf.task_type < w.clarify_task_below:
            reasons.append(f"low_task_confidence: {conf.task_type}")
        control_goal = mode == Mode.INTERRUPT and cues.control is not None
        if goal_conf < w.clarify_goal_below and mode != Mode.CLARIFY and not env_trigger and not control_goal:
            reasons.append(f"vague_goal: goal confidence {conf.goal}")
        if w.confirm_high_risk and acting and risk_words and not permitted:
            reasons.append(f"high_risk_action: {', '.join(risk_words)}")
        if mode == Mode.INTERRUPT and ambiguous:
            reasons.append(f"ambiguous_task: {len(running)} running tasks, none named")
        if llm_fields.get("needs_clarification") is True:
            reasons.append("llm_flagged: the model asked for clarification")
        if acting and task_type in (TaskType.CHANGE, TaskType.GENERATION) and not acceptance:
            reasons.append("no_acceptance: no success criterion stated")
        reasons = _dedup(reasons, 3 * w.max_items)
        needs = any(r.split(":", 1)[0] in CLARIFY_CODES for r in reasons)
        return Intent(
            text=text, mode=mode, task_type=task_type, goal=goal,
            acceptance=_dedup(acceptance, w.max_items), constraints=_dedup(constraints, w.max_items),
            prohibitions=_dedup(prohibitions, w.max_items), entities=_dedup(entities, w.max_items),
            plan_hints=_dedup(hints, 2 * w.max_items), evidence_spans=_dedup_spans(spans),
            uncertainty_reasons=reasons, urgency=urgency, risk=risk, confidence=conf,
            needs_clarification=needs, sub_questions=_dedup(sub_questions, w.max_items),
            distribution={"mode": mode_dist, "task_type": task_dist}, signals=records, llm=report,
        )

    def _llm_signal(self, ctx: IntentContext, reasons: list[str]) -> tuple[LlmReport, dict[str, Any]]:
        """Normalise the optional LLM output; record how it fared. Never raises."""
        if ctx.llm_status in ("late", "error", "invalid"):
            detail = ctx.llm_detail or {"late": "arrived after the deadline", "error": "failed"}.get(
                ctx.llm_status, "unusable output")
            reasons.append(f"llm_{ctx.llm_status}: {detail}")
            return LlmReport(status=ctx.llm_status, detail=detail), {}
        if ctx.llm_output is None:
            if ctx.llm_status == "ok":
                reasons.append("llm_invalid: no output")
                return LlmReport(status="invalid", detail="no output"), {}
            return LlmReport(status="skipped"), {}
        fields, problems = normalize_llm_intent(ctx.llm_output, self.weights.max_items)
        if not any(k in fields for k in ("mode", "task_type", "goal")):
            detail = "; ".join(problems) or "no usable field"
            reasons.append(f"llm_invalid: {detail}")
            return LlmReport(status="invalid", detail=detail), {}
        return LlmReport(status="ok", detail="; ".join(problems)), fields


def _dedup_spans(spans: Sequence[EvidenceSpan]) -> list[EvidenceSpan]:
    seen: dict[tuple[str, str, str], EvidenceSpan] = {}
    for s in spans:
        if s.span:
            seen.setdefault((s.source, s.span.lower(), s.field), s)
    return list(seen.values())[:32]
