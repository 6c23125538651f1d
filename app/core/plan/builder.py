"""The Context Plan (CRS): the one auditable control object of a turn (seed 000 §3.4.4–3.4.5, §3.6.2, §6.1).

``PlanBuilder.build(intent, ctx)`` generates a few candidate plans (recall tight / balanced / wide ×
act / clarify), checks each against hard constraints (budget arithmetic, tool availability,
blocked tools, prohibitions, permissions, clarification duty), repairs or prunes them, and chooses
one by confidence: high confidence → tight recall and budget; low confidence → wide recall,
stronger reranking, conflicts surfaced, actions held back and a clarification question.

Everything is pure and deterministic: dicts are built in a fixed key order, ties break by name,
floats are rounded, so ``build`` on equal inputs gives a byte-identical ``model_dump_json``.

This module holds the plan itself (``ContextPlan`` and its candidates), the builder's inputs
(``PlanContext``, ``PlanConfig``), the budget arithmetic, the constraint checker (``check_plan``,
one helper per group of checks) and the builder, which drafts each candidate section by section.
The policy sections, label tuples and default tables live in :mod:`app.core.plan.model`, the
sections that follow from the intent alone (history, concurrency, retrieval filters) in
:mod:`app.core.plan.policies`, the tool policy (``ToolSpec``, relevance, filtering) and the
clarification question in :mod:`app.core.plan.tools`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, Field

from app.core.intent.model import CLARIFY_CODES, Intent, Mode, Risk, TaskType, r4
from app.core.intent.profile import UserProfile
from app.core.plan.model import (
    BANDS,
    CHANNEL_FACTORS,
    CHANNELS,
    EVIDENCE_PRIORITY,
    SEGMENT_BASE,
    SEGMENT_DELTAS,
    SEGMENTS,
    STAGES,
    Band,
    BudgetPolicy,
    ContextPlan,
    IntentSummary,
    RecallPreset,
    RerankPolicy,
    RetrievalPolicy,
    ToolPolicy,
    default_presets,
)
from app.core.plan.policies import concurrency_policy, dedup_stripped, history_policy, retrieval_filters
from app.core.plan.timespan import date_range, time_focus
from app.core.plan.tool_filter import (
    DEFAULT_FILTER,
    ScoredTool,
    ToolFilterConfig,
    choose_tools,
    score_tools,
)
from app.core.plan.tools import ToolSignals, ToolSpec, clarification_question, tool_matches_statement

# --------------------------------------------------------------------------- budget arithmetic


def _frac(x: float) -> Fraction:
    """Exact fraction of a float's shortest repr (0.7 → 7/10, not 0.6999…), for intuitive splits."""
    return Fraction(repr(float(x)))


def _largest_remainder(total: int, weights: Mapping[str, Fraction], keys: Sequence[str]) -> dict[str, int]:
    wsum = sum((weights[k] for k in keys), Fraction(0))
    if total <= 0 or wsum <= 0:
        return {k: 0 for k in keys}
    quotas = {k: Fraction(total) * weights[k] / wsum for k in keys}
    out = {k: math.floor(q) for k, q in quotas.items()}
    left = total - sum(out.values())
    # ties: larger remainder, then larger weight, then key name — independent of dict order
    order = sorted(keys, key=lambda k: (-(quotas[k] - out[k]), -weights[k], k))
    for k in order[:left]:
        out[k] += 1
    return out


def allocate_budget(
    total: int, weights: Mapping[str, float], minimums: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Split ``total`` tokens over segments: minimums first, the rest by weight (largest remainder).

    The result sums exactly to ``total`` (when any segment exists), keeps the key order of
    ``weights`` (then minimum-only keys), and does not depend on the input dicts' order. When the
    minimums alone exceed ``total`` they are scaled down proportionally; all-zero weights split
    the rest evenly.
    """
    return dict(_allocated(total, tuple(weights.items()), tuple((minimums or {}).items())))


@functools.lru_cache(maxsize=1024)
def _allocated(total: int, weight_items: tuple[tuple[str, float], ...],
               minimum_items: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """``allocate_budget`` on hashable arguments, remembered: exact fractions cost ~150 µs a split,
    a build makes six, and the same few splits recur build after build."""
    weights, minimums = dict(weight_items), dict(minimum_items)
    if total < 0:
        raise ValueError("total must be >= 0")
    if any(v < 0 or not math.isfinite(v) for v in weights.values()) or any(v < 0 for v in minimums.values()):
        raise ValueError("weights and minimums must be finite and >= 0")
    keys = list(weights) + [k for k in minimums if k not in weights]
    if not keys:
        return ()
    mins = {k: int(minimums.get(k, 0)) for k in keys}
    if sum(mins.values()) >= total:
        return tuple(_largest_remainder(total, {k: Fraction(mins[k]) for k in keys}, keys).items())
    w = {k: _frac(weights.get(k, 0.0)) for k in keys}
    if sum(w.values()) == 0:
        w = {k: Fraction(1) for k in keys}
    shares = _largest_remainder(total - sum(mins.values()), w, keys)
    return tuple((k, mins[k] + shares[k]) for k in keys)


# --------------------------------------------------------------------------- plan model


class PlanCandidate(BaseModel):
    candidate_id: str
    plan: ContextPlan
    violations: list[str] = Field(default_factory=list)
    repaired: bool = False
    pruned: bool = False
    chosen: bool = False
    reason: str = ""


class PlanResult(BaseModel):
    plan: ContextPlan
    candidates: list[PlanCandidate]


class PlanContext(BaseModel):
    """What the builder needs besides the intent: budget, context size, tools, profile."""

    total_budget: int = 2048
    answer_reserve: int = 512
    context_size: int = 4096
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_signals: ToolSignals = Field(default_factory=ToolSignals)  # similarity and history, as observed
    profile: UserProfile = Field(default_factory=UserProfile)
    running_tasks: list[str] = Field(default_factory=list)  # names, for "which task?" questions
    now: str = ""  # the input's time (ISO): time expressions are read relative to it
    session_turns: int = 0  # turns the session holds before this input
    other_sessions: int = 0  # other sessions of the workspace
    #: The input is the agent running a task the user already asked for (a step, a continuation):
    #: it acts — nobody is there to answer a question, and the user's request was settled when
    #: the task was made. Safety stays: risky actions are still held back.
    agent_run: bool = False


# --------------------------------------------------------------------------- configuration

_SCALED_CHANNELS = frozenset({"vector", "fulltext", "structured", "memory", "topic", "time"})


_POINTS_BACK = re.compile(  # pointing at earlier conversations, not at earlier events ("before May")
    r"\b(?:last\s+time|(?:in|from)\s+(?:a|an|the|our|my|another)\s+(?:previous|earlier|last|other)\s+"
    r"(?:session|conversation|chat)|another\s+session|we\s+(?:discussed|talked|decided|agreed)|"
    r"i\s+(?:told\s+you|mentioned)|(?:do\s+you|you)\s+remember|you\s+(?:said|told\s+me|suggested))\b",
    re.IGNORECASE)


def recall_scope(text: str, ctx: PlanContext, config: PlanConfig) -> tuple[Literal["session", "workspace"], str]:
    """Search the whole workspace when there is another session and either this one holds too
    little to answer from (fewer than ``config.weak_session_turns`` turns) or the input points at
    earlier work ("last time", "we discussed", "remember"); else this session only."""
    if ctx.other_sessions <= 0:
        return "session", ""
    if ctx.session_turns < config.weak_session_turns:
        return "workspace", f"this session holds {ctx.session_turns} turn(s): earlier sessions may know more"
    cue = _POINTS_BACK.search(text)
    if cue is not None:
        return "workspace", f"the input points at earlier work (\"{cue.group(0)}\")"
    return "session", ""


class PlanConfig(BaseModel):
    """Strategy as data: confidence thresholds, recall presets, segment weights, limits."""

    high_confidence: float = 0.7
    weak_session_turns: int = 3  # below this many turns, recall also searches the other sessions
    low_confidence: float = 0.4
    presets: dict[str, RecallPreset] = Field(default_factory=default_presets)
    segment_base: dict[str, float] = Field(default_factory=lambda: dict(SEGMENT_BASE))
    segment_deltas: dict[str, dict[str, float]] = Field(default_factory=lambda: dict(SEGMENT_DELTAS))
    segment_minimums: dict[str, int] = Field(
        default_factory=lambda: {"instruction": 48, "state": 32, "conversation": 48})
    channel_factors: dict[str, dict[str, float]] = Field(default_factory=lambda: dict(CHANNEL_FACTORS))
    stage_timeouts_ms: dict[str, int] = Field(default_factory=lambda: {"recall": 1500})
    max_tool_calls: int = 4
    tool_filter: ToolFilterConfig = Field(default_factory=lambda: DEFAULT_FILTER.model_copy())
    min_answer_reserve: int = 64
    candidate_pool_cap: int = 2000
    tokens_per_item: int = 12  # a short recalled turn, for sizing recall to the budget


DEFAULT_PLAN_CONFIG = PlanConfig()
REQUIRED_ORDER: tuple[str, ...] = ("user_profile", "current_goal", "task_state", "branch_history", "evidence",
                                   "env_state", "tools")


# --------------------------------------------------------------------------- small pure helpers


def _round_int(x: float) -> int:
    return int(math.floor(x + 0.5))


def overall_confidence(intent: Intent) -> float:
    """The weakest field decides: min(mode, goal[, task_type when acting]) — no field masks another."""
    c = intent.confidence
    parts = [c.mode, c.goal] + ([c.task_type] if intent.mode == Mode.TASK else [])
    return r4(min(parts))


def confidence_band(confidence: float, config: PlanConfig = DEFAULT_PLAN_CONFIG) -> Band:
    """High confidence → "tight", low → "wide", otherwise "balanced"."""
    if confidence >= config.high_confidence:
        return "tight"
    return "wide" if confidence < config.low_confidence else "balanced"


def segment_weights(intent: Intent, config: PlanConfig = DEFAULT_PLAN_CONFIG) -> dict[str, float]:
    """Token-share weights per segment: a base, shifted by the mode and the task type."""
    w = {s: config.segment_base.get(s, 0.0) for s in SEGMENTS}
    for key in (intent.mode.value, intent.task_type.value):
        for seg, delta in config.segment_deltas.get(key, {}).items():
            if seg in w:
                w[seg] += delta
    return {s: r4(max(0.01, v)) for s, v in w.items()}


def channel_sizes(intent: Intent, preset: RecallPreset, config: PlanConfig = DEFAULT_PLAN_CONFIG) -> dict[str, int]:
    """Recall size per channel: the preset's base × the mode's and the task type's factors."""
    out: dict[str, int] = {}
    for ch in CHANNELS:
        f = config.channel_factors.get(intent.mode.value, {}).get(ch, 1.0)
        f *= config.channel_factors.get(intent.task_type.value, {}).get(ch, 1.0)
        out[ch] = max(0, _round_int(preset.channels.get(ch, 0) * f))
    return out


def required_information(intent: Intent, ctx: PlanContext, tools_allowed: bool) -> list[str]:
    """What the compiled context must contain for this intent (task-state contract, seed 000 §2.2)."""
    need = {"current_goal"}
    if not ctx.profile.is_empty() or intent.prohibitions:
        need.add("user_profile")
    if intent.mode in (Mode.TASK, Mode.INTERRUPT) or ctx.running_tasks:
        need.add("task_state")
    if "follow_up" in intent.plan_hints or intent.mode in (Mode.TASK, Mode.INTERRUPT, Mode.CLARIFY):
        need.add("branch_history")
    if intent.task_type in (TaskType.RETRIEVAL, TaskType.DIAGNOSTIC) or intent.sub_questions or intent.mode == Mode.QA:
        need.add("evidence")
    if intent.mode == Mode.PUSH or "include_env_events" in intent.plan_hints:
        need.add("env_state")
    if tools_allowed and intent.mode in (Mode.TASK, Mode.INTERRUPT):
        need.add("tools")
    return [r for r in REQUIRED_ORDER if r in need]


# --------------------------------------------------------------------------- constraint check and repair

def check_plan(plan: ContextPlan, intent: Intent, ctx: PlanContext,
               config: PlanConfig = DEFAULT_PLAN_CONFIG, *, in_place: bool = False,
               ) -> tuple[ContextPlan, list[str], bool]:
    """Check ``plan`` against the hard constraints; return (repaired copy, violations, pruned).

    Repairs are appended to ``plan.repairs``. A plan that acts when the intent requires a
    clarification cannot be repaired (that is the other candidate) and is pruned. The checks run
    in a fixed order: clarification duty, risk, tools, tool calls, budget, question, pool size.
    ``in_place``: repair ``plan`` itself, not a copy (a draft nobody else holds: the deep copies
    of the six candidates were a third of the plan stage).
    """
    repair = _Repair(plan if in_place else plan.model_copy(deep=True))
    p = repair.plan
    pruned = intent.needs_clarification and not p.needs_clarification and not ctx.agent_run
    if pruned:
        codes = [c for c in intent.reason_codes() if c in CLARIFY_CODES]
        repair.violations.append(f"clarification required ({', '.join(codes)}) but the plan acts")
    if intent.risk == Risk.HIGH and not intent.hint("permitted") and not p.actions_held_back:
        repair.fix("high risk without permission but actions are not held back", "held back action-type outputs")
        p.actions_held_back = True
    _check_tools(repair, intent, ctx)
    limit = 0 if not p.tools.allowed or p.needs_clarification else config.max_tool_calls
    if p.budget.tool_calls > limit:
        repair.fix(f"tool calls {p.budget.tool_calls} exceed the limit {limit}", f"tool calls set to {limit}")
        p.budget.tool_calls = limit
    _check_budget(repair, intent, ctx, config)
    if p.needs_clarification and not p.clarification_question:
        repair.fix("clarification without a question", "added a clarification question")
        p.clarification_question = clarification_question(intent, ctx.running_tasks)
    if p.retrieval.candidate_pool > config.candidate_pool_cap:
        repair.fix(f"candidate pool {p.retrieval.candidate_pool} above cap",
                   f"candidate pool set to {config.candidate_pool_cap}")
        p.retrieval.candidate_pool = config.candidate_pool_cap
    return p, repair.violations, pruned


class _Repair:
    """A plan under repair and the violations found so far (each fix also lands in ``plan.repairs``)."""

    def __init__(self, plan: ContextPlan) -> None:
        self.plan = plan
        self.violations: list[str] = []

    def fix(self, violation: str, repair: str) -> None:
        """Note a violation and the repair made for it."""
        self.violations.append(violation)
        self.plan.repairs.append(repair)

    def block(self, name: str, why: str) -> None:
        """Move tool ``name`` to the blocked list (out of the allowed one), noting why once."""
        tools = self.plan.tools
        if name in tools.allowed:
            self.fix(f"tool '{name}' allowed but {why}", f"moved '{name}' from allowed to blocked: {why}")
            tools.allowed.remove(name)
        elif name not in tools.blocked:
            self.fix(f"tool '{name}' not blocked but {why}", f"blocked '{name}': {why}")
        if name not in tools.blocked:
            tools.blocked.append(name)
            tools.notes.append(f"{name}: {why}")


def _check_tools(repair: _Repair, intent: Intent, ctx: PlanContext) -> None:
    """Drop unavailable tools; block prohibited ones. (An action tool the plan offers runs only once
    the user confirms it, which is the permission a risky request needs: ``app.core.tools.governance``;
    a plan that asks first has no tool calls in its budget.)"""
    tools = repair.plan.tools
    known = {t.name for t in ctx.tools}
    for name in [n for n in tools.allowed if n not in known]:
        repair.fix(f"tool '{name}' is not available", f"removed unavailable tool '{name}'")
        tools.allowed.remove(name)
    prohibitions = dedup_stripped(list(ctx.profile.prohibitions) + list(intent.prohibitions))
    for tool in ctx.tools:
        hit = next((x for x in prohibitions if tool_matches_statement(tool, x)), None)
        if hit is not None:
            repair.block(tool.name, f"prohibited (never {hit})")
    for name in [n for n in tools.allowed if n in tools.blocked]:
        repair.fix(f"tool '{name}' is both allowed and blocked", f"removed blocked tool '{name}' from allowed")
        tools.allowed.remove(name)


def _check_budget(repair: _Repair, intent: Intent, ctx: PlanContext, config: PlanConfig) -> None:
    """Make the answer reserve fit the context, the budget fit what is left, and the segments sum to it."""
    b = repair.plan.budget
    if b.answer_reserve >= b.context_size or b.answer_reserve < config.min_answer_reserve:
        new = max(config.min_answer_reserve, b.context_size // 4) if b.context_size > 0 else 0
        repair.fix(f"answer reserve {b.answer_reserve} does not fit context size {b.context_size}",
                   f"answer reserve set to {new}")
        b.answer_reserve = new
    cap = min(ctx.total_budget, max(0, b.context_size - b.answer_reserve))
    if b.total_tokens > cap:
        repair.fix(f"budget {b.total_tokens} + reserve {b.answer_reserve} exceeds context size {b.context_size} "
                   f"or total budget {ctx.total_budget}", f"budget reduced to {cap}")
        b.total_tokens = cap
    if sum(b.segments.values()) != b.total_tokens or any(v < 0 for v in b.segments.values()):
        repair.fix(f"segment quotas sum to {sum(b.segments.values())}, not {b.total_tokens}",
                   "segment quotas reallocated")
        b.segments = allocate_budget(b.total_tokens, segment_weights(intent, config), config.segment_minimums)


# --------------------------------------------------------------------------- builder


class PlanBuilder:
    """Generates, checks and chooses Context Plan candidates (seed 000 §3.4.4–3.4.5)."""

    def __init__(self, config: PlanConfig = DEFAULT_PLAN_CONFIG) -> None:
        self.config = config

    def build(self, intent: Intent, ctx: PlanContext | None = None) -> PlanResult:
        """Return the chosen plan and every candidate with its violations and why it won or lost."""
        ctx = ctx or PlanContext()
        overall = overall_confidence(intent)
        band = confidence_band(overall, self.config)
        want_clarify = (intent.needs_clarification or band == "wide") and not ctx.agent_run
        scored = score_tools(ctx.tools, intent, ctx.tool_signals, self.config.tool_filter)
        candidates: list[PlanCandidate] = []
        for clarify in (False, True):
            for strategy in BANDS:
                draft = self._candidate(intent, ctx, strategy, clarify, overall, band, scored)
                plan, violations, pruned = check_plan(draft, intent, ctx, self.config, in_place=True)
                candidates.append(PlanCandidate(candidate_id=plan.candidate_id, plan=plan, violations=violations,
                                                repaired=bool(plan.repairs), pruned=pruned))
        order = sorted(candidates, key=lambda c: (c.plan.needs_clarification != want_clarify,
                                                  abs(BANDS.index(c.plan.strategy) - BANDS.index(band)),
                                                  -BANDS.index(c.plan.strategy)))
        chosen = next((c for c in order if not c.pruned), order[0])
        why = (f"confidence {overall} ({band}) → {band} recall; "
               + ("clarify first" if want_clarify else "no clarification needed"))
        for c in candidates:
            if c is chosen:
                fallback = "" if c.plan.strategy == band else f"; fell back to {c.plan.strategy}"
                c.chosen, c.reason = True, why + fallback
            elif c.pruned:
                c.reason = "pruned: " + "; ".join(c.violations[:1])
            else:
                c.reason = f"not chosen: wants {band}/{'clarify' if want_clarify else 'act'}"
        return PlanResult(plan=chosen.plan, candidates=candidates)

    def _candidate(self, intent: Intent, ctx: PlanContext, strategy: Band, clarify: bool,
                   overall: float, band: Band, scored: Sequence[ScoredTool]) -> ContextPlan:
        """Return the draft plan of one candidate: ``strategy``'s recall preset, acting or clarifying."""
        preset = self.config.presets[strategy]
        budget = self._budget(intent, ctx, preset, clarify)
        # retrieval: the preset's sizes, scaled up when the evidence quota holds more items
        capacity = budget.total_tokens // max(1, self.config.tokens_per_item)  # every segment's leftovers
        scale = max(1.0, capacity / preset.top_k)
        priority_key = "push" if intent.mode == Mode.PUSH else intent.task_type.value
        rerank = RerankPolicy(top_k=_round_int(preset.top_k * scale),
                              per_channel_cap=_round_int(preset.per_channel_cap * scale),
                              dedup_threshold=preset.dedup_threshold, mmr_lambda=preset.mmr_lambda,
                              relevance_threshold=preset.relevance_threshold,
                              evidence_priority=list(EVIDENCE_PRIORITY[priority_key]))
        held_back = clarify or strategy == "wide" or (intent.risk == Risk.HIGH and not intent.hint("permitted"))
        tools = self._tool_policy(intent, ctx, preset, scored)
        allowed = tools.allowed
        conflicts = any(c in ("prohibition_conflict", "signal_conflict") for c in intent.reason_codes())
        summary = IntentSummary(mode=intent.mode, task_type=intent.task_type, goal=intent.goal,
                                urgency=intent.urgency.value, risk=intent.risk.value, confidence=intent.confidence,
                                overall_confidence=overall, band=band)
        return ContextPlan(
            candidate_id=f"{strategy}/{'clarify' if clarify else 'act'}", strategy=strategy, intent=summary,
            needs_clarification=clarify,
            clarification_question=clarification_question(intent, ctx.running_tasks) if clarify else "",
            required=required_information(intent, ctx, bool(allowed) and not clarify),
            constraints=dedup_stripped(list(intent.constraints) + [f"never {x}" for x in ctx.profile.prohibitions]),
            prohibitions=dedup_stripped(list(intent.prohibitions) + list(ctx.profile.prohibitions)),
            preferences=list(ctx.profile.preferences), sub_questions=list(intent.sub_questions),
            history=history_policy(intent, preset, strategy, clarify, budget.total_tokens), budget=budget,
            retrieval=self._retrieval(intent, preset, scale, ctx), rerank=rerank,
            concurrency=concurrency_policy(intent, bool(ctx.running_tasks)), tools=tools,
            actions_held_back=held_back, surface_conflicts=strategy == "wide" or conflicts,
        )

    def _tool_policy(self, intent: Intent, ctx: PlanContext, preset: RecallPreset,
                     scored: Sequence[ScoredTool]) -> ToolPolicy:
        """The tools the plan offers (the tool filter's best ``preset.tools_offered``) and the ones it
        refuses: every prohibited tool. A tool that changes things is offered like any other: it
        runs only once the user confirms it (``app.core.tools.governance``), which is the
        permission a risky request needs, and a plan that asks first calls no tool at all (its
        budget has no tool calls). The checker finds nothing left to repair."""
        prohibitions = dedup_stripped(list(ctx.profile.prohibitions) + list(intent.prohibitions))
        policy = ToolPolicy(max_offered=preset.tools_offered)
        for tool in ctx.tools:
            hit = next((x for x in prohibitions if tool_matches_statement(tool, x)), None)
            if hit is not None:
                policy.blocked.append(tool.name)
                policy.notes.append(f"{tool.name}: prohibited (never {hit})")
        prohibited = set(policy.blocked)

        offer = choose_tools(scored, {t.name: t for t in ctx.tools}, limit=preset.tools_offered,
                             refuse=lambda t: "prohibited" if t.name in prohibited else None,
                             config=self.config.tool_filter)
        policy.allowed = [t.name for t in offer.offered]
        policy.scores = {t.name: t.score for t in offer.offered}
        policy.why = {t.name: "; ".join(t.reasons) for t in offer.offered}
        policy.left_out = [t.line() for t in offer.left_out]
        return policy

    def _budget(self, intent: Intent, ctx: PlanContext, preset: RecallPreset, clarify: bool) -> BudgetPolicy:
        """Return the budget: the preset's share of the total split over segments, stage timeouts, tool calls.

        The recall time limit scales with the preset; an urgent intent halves it.
        """
        cfg = self.config
        total = math.floor(ctx.total_budget * _frac(preset.budget_fraction))
        timeouts = {}
        for stage in STAGES:
            ms = _round_int(cfg.stage_timeouts_ms.get(stage, 0) * preset.time_scale)
            if intent.urgency.value == "high":
                ms = _round_int(ms * 0.5)
            timeouts[stage] = ms
        return BudgetPolicy(total_tokens=total, answer_reserve=ctx.answer_reserve, context_size=ctx.context_size,
                            segments=allocate_budget(total, segment_weights(intent, cfg), cfg.segment_minimums),
                            tool_calls=0 if clarify else preset.tool_calls, timeouts_ms=timeouts)

    def _retrieval(self, intent: Intent, preset: RecallPreset, scale: float, ctx: PlanContext) -> RetrievalPolicy:
        """Return the recall policy: channel sizes (scaled), the pool they are fused from, the date
        range the input's time expression names and what it asks of time (``app.core.plan.timespan``),
        the filters, and the scope (``recall_scope``)."""
        channels = {c: _round_int(n * scale) if c in _SCALED_CHANNELS else n
                    for c, n in channel_sizes(intent, preset, self.config).items()}
        scope, why = recall_scope(intent.text, ctx, self.config)
        return RetrievalPolicy(channels=channels, candidate_pool=sum(channels.values()),
                               date_range=date_range(intent.text, ctx.now), time=time_focus(intent),
                               filters=retrieval_filters(intent), scope=scope, scope_reason=why)

