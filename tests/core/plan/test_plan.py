"""Context Plan: budget allocation, tool policy, constraint checks, candidates, degradation, determinism."""

from __future__ import annotations

import itertools

import pytest

from app.core.intent.engine import IntentEngine
from app.core.intent.model import IntentContext, RecentTurn, RunningTask
from app.core.intent.profile import UserProfile
from app.core.plan.builder import (
    ContextPlan,
    PlanBuilder,
    PlanConfig,
    PlanContext,
    allocate_budget,
    channel_sizes,
    check_plan,
    confidence_band,
    overall_confidence,
    segment_weights,
)
from app.core.plan.model import BANDS, CHANNELS, SEGMENTS, MergeRule
from app.core.plan.tool_filter import choose_tools, score_tools
from app.core.plan.tools import ToolSignals, ToolSpec, clarification_question, tool_matches_statement

ENGINE = IntentEngine()
BUILDER = PlanBuilder()
TOOLS = [
    ToolSpec(name="web_search", description="search the web", tags=["web", "search"]),
    ToolSpec(name="file_read", description="read a file", tags=["file"]),
    ToolSpec(name="file_delete", description="delete a file", tags=["file"], action=True),
    ToolSpec(name="send_email", description="send an email", action=True),
    ToolSpec(name="calendar", description="read and add calendar events", tags=["calendar", "schedule"]),
    ToolSpec(name="task_control", description="stop, pause or resume a task", tags=["task", "core"]),
]
NO_EMAIL = UserProfile(prohibitions=["send emails"])


def _ctx(**kw: object) -> PlanContext:
    base: dict[str, object] = {"tools": TOOLS, "profile": NO_EMAIL, "total_budget": 2000, "context_size": 4096,
                               "answer_reserve": 512}
    base.update(kw)
    return PlanContext(**base)  # type: ignore[arg-type]


def _plan(text: str, ictx: IntentContext | None = None, **kw: object) -> ContextPlan:
    return BUILDER.build(ENGINE.infer(text, ictx), _ctx(**kw)).plan


# --------------------------------------------------------------------------- budget arithmetic


def test_allocate_budget_largest_remainder() -> None:
    assert allocate_budget(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    assert allocate_budget(100, {"a": 0.5, "b": 0.3, "c": 0.2}) == {"a": 50, "b": 30, "c": 20}
    assert allocate_budget(7, {"a": 2, "b": 1}) == {"a": 5, "b": 2}  # 4.67 / 2.33
    assert allocate_budget(0, {"a": 1}) == {"a": 0}
    assert allocate_budget(5, {}) == {}


def test_allocate_budget_sums_exactly_and_respects_minimums() -> None:
    weights = {"instruction": 0.1, "state": 0.13, "plan": 0.07, "conversation": 0.21, "evidence": 0.37,
               "memory": 0.12}
    mins = {"instruction": 48, "state": 32, "conversation": 48}
    for total in (0, 1, 7, 100, 127, 128, 129, 1000, 2047, 4096, 10001):
        out = allocate_budget(total, weights, mins)
        assert sum(out.values()) == total
        assert list(out) == list(weights)
        if total >= sum(mins.values()):
            assert all(out[k] >= v for k, v in mins.items())


def test_allocate_budget_scales_minimums_that_do_not_fit() -> None:
    out = allocate_budget(64, {"a": 1.0, "b": 0.0}, {"a": 64, "b": 64})
    assert out == {"a": 32, "b": 32}
    assert allocate_budget(10, {"a": 0.0, "b": 0.0}) == {"a": 5, "b": 5}  # zero weights: even split
    assert allocate_budget(5, {"a": 1.0}, {"z": 2}) == {"a": 3, "z": 2}  # minimum-only key kept, last


def test_allocate_budget_independent_of_dict_order() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 2.0}
    for perm in itertools.permutations(weights):
        out = allocate_budget(12, {k: weights[k] for k in perm})  # 2.4 ×3, 4.8: ties go by name
        assert out == {"a": 3, "b": 2, "c": 2, "d": 5}
        assert list(out) == list(perm)


def test_allocate_budget_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        allocate_budget(-1, {"a": 1})
    with pytest.raises(ValueError):
        allocate_budget(10, {"a": -1})
    with pytest.raises(ValueError):
        allocate_budget(10, {"a": float("nan")})


# --------------------------------------------------------------------------- scoring helpers


def test_confidence_helpers() -> None:
    clear = ENGINE.infer("Write a haiku about autumn")
    assert overall_confidence(clear) == min(clear.confidence.mode, clear.confidence.goal, clear.confidence.task_type)
    assert confidence_band(0.9) == "tight" and confidence_band(0.5) == "balanced" and confidence_band(0.1) == "wide"
    assert confidence_band(0.5, PlanConfig(high_confidence=0.5)) == "tight"


def test_segment_weights_follow_mode_and_task_type() -> None:
    qa = segment_weights(ENGINE.infer("What did Bob say about the budget?"))
    task = segment_weights(ENGINE.infer("Plan the migration to Postgres"))
    assert list(qa) == list(SEGMENTS)
    assert qa["evidence"] > task["evidence"] and task["plan"] > qa["plan"] and task["state"] > qa["state"]
    assert all(v > 0 for v in qa.values())


def test_channel_sizes_follow_intent() -> None:
    preset = PlanConfig().presets["balanced"]
    retrieval = channel_sizes(ENGINE.infer("What did Bob say about the budget?"), preset)
    diagnostic = channel_sizes(ENGINE.infer("debug the failing test in test_api.py"), preset)
    assert list(retrieval) == list(CHANNELS)
    assert retrieval["vector"] > preset.channels["vector"]
    assert diagnostic["fulltext"] > retrieval["fulltext"] and diagnostic["recent"] > retrieval["recent"]


def test_tool_matches_statement() -> None:
    by = {t.name: t for t in TOOLS}
    assert tool_matches_statement(by["send_email"], "send emails")
    assert tool_matches_statement(by["file_delete"], "delete files in /data")
    assert not tool_matches_statement(by["file_read"], "delete files in /data")
    assert tool_matches_statement(ToolSpec(name="payment"), "pay anyone")
    assert tool_matches_statement(by["web_search"], "use web_search")


def test_tool_scores_are_explainable() -> None:
    plan_intent = ENGINE.infer("Schedule a meeting with Ana next week on the calendar")
    scored = {t.name: t for t in score_tools(TOOLS, plan_intent, ToolSignals())}
    assert scored["calendar"].score > 0 and any("planning" in r for r in scored["calendar"].reasons)
    assert "send_email" not in scored  # nothing in common with the input
    always = {t.name: t for t in score_tools(TOOLS, ENGINE.infer("hmm"), ToolSignals())}["task_control"]
    assert always.score > 0 and "always available" in always.reasons


def test_the_plan_never_offers_prohibited_tools_and_offers_action_tools_for_confirmation() -> None:
    plan = BUILDER.build(ENGINE.infer("Delete the report file and email Bob the summary"), _ctx()).plan
    assert "send_email" not in plan.tools.allowed and "send_email" in plan.tools.blocked  # prohibited
    # High risk: the answer holds actions back, and the action tool is offered only to be confirmed
    # by the user before it runs (app.core.tools.governance); a plan that asks first calls nothing.
    assert plan.actions_held_back and "file_delete" in plan.tools.allowed
    assert "file_read" in plan.tools.allowed
    assert any(n.startswith("send_email: prohibited (never send emails)") for n in plan.tools.notes)
    assert set(plan.tools.why) == set(plan.tools.allowed)


def test_the_offer_is_ordered_by_score_and_independent_of_registry_order() -> None:
    ctx = _ctx()
    plan = BUILDER.build(ENGINE.infer("Search the web for flights to Lisbon"), ctx).plan
    assert plan.tools.allowed[0] == "web_search"
    again = BUILDER.build(ENGINE.infer("Search the web for flights to Lisbon"), _ctx(tools=list(reversed(TOOLS)))).plan
    assert again.tools.allowed == plan.tools.allowed


def test_similarity_history_and_names_raise_a_tool_and_the_limit_holds() -> None:
    tools = [ToolSpec(name=f"srv.tool_{n}", server="srv", description=f"does thing number {n}") for n in range(30)]
    intent = ENGINE.infer("Which thing should I pick?")
    signals = ToolSignals(similarity={"srv.tool_7": 0.9, "srv.tool_3": 0.5, "srv.tool_9": 0.1},
                          history={"srv.tool_3": 5})
    scored = score_tools(tools, intent, signals)
    assert [t.name for t in scored[:2]] == ["srv.tool_7", "srv.tool_3"]
    assert "similar 0.90" in scored[0].reasons and "used 5× in this session" in scored[1].reasons
    named = score_tools(tools, ENGINE.infer("run tool_12 please"), signals)
    assert named[0].name == "srv.tool_12" and "named" in named[0].reasons
    offer = choose_tools(scored, {t.name: t for t in tools}, limit=1, refuse=lambda _t: None)
    assert [t.name for t in offer.offered] == ["srv.tool_7"]
    assert offer.left_out[0].name == "srv.tool_3" and offer.left_out[0].reasons[0] == "over the plan's limit of 1"
    refused = choose_tools(scored, {t.name: t for t in tools}, limit=2,
                           refuse=lambda t: "no" if t.name == "srv.tool_7" else None)
    assert [t.name for t in refused.offered] == ["srv.tool_3"] and refused.refused == [("srv.tool_7", "no")]


def test_a_server_named_as_a_server_is_prohibited_whole() -> None:
    write = ToolSpec(name="memory.create_entities", server="memory", action=True)
    assert tool_matches_statement(write, "use the memory server")
    assert tool_matches_statement(write, "create entities")
    assert not tool_matches_statement(write, "forget my memory of Paris")
    assert not tool_matches_statement(ToolSpec(name="time.get", server="time"), "forget it")


# --------------------------------------------------------------------------- checks and repairs


def _valid(plan: ContextPlan, ctx: PlanContext) -> None:
    b = plan.budget
    assert sum(b.segments.values()) == b.total_tokens
    assert b.total_tokens + b.answer_reserve <= b.context_size
    assert b.total_tokens <= ctx.total_budget
    assert not set(plan.tools.allowed) & set(plan.tools.blocked)
    assert set(plan.tools.allowed) <= {t.name for t in ctx.tools}
    for tool in ctx.tools:
        if any(tool_matches_statement(tool, p) for p in ctx.profile.prohibitions):
            assert tool.name in plan.tools.blocked
    if plan.actions_held_back:
        assert not [t for t in ctx.tools if t.action and t.name in plan.tools.allowed]
    if plan.needs_clarification:
        assert plan.clarification_question and plan.budget.tool_calls == 0


def test_check_plan_repairs_a_broken_plan() -> None:
    intent = ENGINE.infer("What did Bob say about the budget?")
    ctx = _ctx()
    plan = BUILDER.build(intent, ctx).plan.model_copy(deep=True)
    plan.repairs = []
    plan.tools.allowed = ["web_search", "teleport", "send_email", "file_delete"]
    plan.tools.blocked = ["web_search"]
    plan.budget.total_tokens = 4000
    plan.budget.segments = {"evidence": 5}
    plan.budget.tool_calls = 99
    fixed, violations, pruned = check_plan(plan, intent, ctx)
    assert not pruned
    text = " | ".join(violations)
    for part in ("'teleport' is not available", "'send_email' allowed but prohibited",
                 "'web_search' is both allowed and blocked", "exceeds context size", "segment quotas",
                 "tool calls 99"):
        assert part in text, part
    assert fixed.tools.allowed == [] or "teleport" not in fixed.tools.allowed
    assert len(fixed.repairs) == len(violations)
    _valid(fixed, ctx)
    assert fixed.budget.total_tokens == ctx.total_budget and list(fixed.budget.segments) == list(SEGMENTS)


def test_check_plan_fixes_reserve_and_small_context() -> None:
    ctx = _ctx(context_size=1000, total_budget=2048, answer_reserve=1200)
    result = BUILDER.build(ENGINE.infer("Write a haiku about autumn"), ctx)
    plan = result.plan
    assert plan.budget.answer_reserve == 250 and plan.budget.total_tokens == 750
    assert any("answer reserve" in r for r in plan.repairs) and any("budget reduced" in r for r in plan.repairs)
    for cand in result.candidates:
        _valid(cand.plan, ctx)


def test_acting_plan_is_pruned_when_clarification_is_required() -> None:
    intent = ENGINE.infer("hmm")
    result = BUILDER.build(intent, _ctx())
    acting = [c for c in result.candidates if not c.plan.needs_clarification]
    assert acting and all(c.pruned and "clarification required" in c.violations[0] for c in acting)
    assert result.plan.needs_clarification


def test_the_agent_running_a_task_acts_where_a_user_would_be_asked() -> None:
    intent = ENGINE.infer("hmm")
    result = BUILDER.build(intent, _ctx(agent_run=True))
    assert not result.plan.needs_clarification and not any(c.pruned for c in result.candidates)
    assert result.plan.actions_held_back  # still wide: risky outputs stay held back


def test_a_plan_that_asks_first_calls_no_tool() -> None:
    result = BUILDER.build(ENGINE.infer("hmm, delete it?"), _ctx())
    for candidate in result.candidates:
        if candidate.plan.needs_clarification:
            assert candidate.plan.budget.tool_calls == 0


# --------------------------------------------------------------------------- candidates and degradation


def test_candidates_cover_recall_and_clarification() -> None:
    result = BUILDER.build(ENGINE.infer("Write a haiku about autumn"), _ctx())
    ids = [c.candidate_id for c in result.candidates]
    assert ids == [f"{b}/{c}" for c in ("act", "clarify") for b in BANDS]
    assert sum(c.chosen for c in result.candidates) == 1
    chosen = next(c for c in result.candidates if c.chosen)
    assert chosen.plan == result.plan and chosen.reason.startswith("confidence")
    assert all(c.reason for c in result.candidates)
    for cand in result.candidates:
        _valid(cand.plan, _ctx())


def test_high_confidence_is_tight_and_acts() -> None:
    plan = _plan("Write a haiku about autumn")
    assert plan.candidate_id == "tight/act" and plan.intent.band == "tight"
    assert not plan.needs_clarification and not plan.actions_held_back and not plan.surface_conflicts
    assert plan.clarification_question == ""
    assert plan.budget.total_tokens == 1400  # 0.7 × 2000


def test_low_confidence_widens_recall_and_holds_back() -> None:
    high = _plan("Write a haiku about autumn")
    low = _plan("hmm")
    assert low.candidate_id == "wide/clarify"
    assert low.needs_clarification and low.clarification_question.endswith("?")
    assert low.actions_held_back and low.surface_conflicts
    assert low.retrieval.candidate_pool > high.retrieval.candidate_pool
    assert low.rerank.per_channel_cap < high.rerank.per_channel_cap
    assert low.rerank.mmr_lambda < high.rerank.mmr_lambda
    assert low.rerank.dedup_threshold < high.rerank.dedup_threshold
    assert low.budget.total_tokens > high.budget.total_tokens
    assert low.history.main_chain_turns > high.history.main_chain_turns
    assert low.budget.tool_calls == 0


def test_medium_confidence_is_balanced() -> None:
    plan = _plan("What is the capital of France?")
    assert plan.intent.band == "balanced" and plan.candidate_id == "balanced/act"


def test_prohibition_conflict_asks_and_surfaces() -> None:
    profile = UserProfile(prohibitions=["delete files in /data"])
    intent = ENGINE.infer("Clean up /data by deleting stale files", IntentContext(profile=profile))
    plan = BUILDER.build(intent, _ctx(profile=profile)).plan
    assert plan.needs_clarification and plan.surface_conflicts and plan.actions_held_back
    assert "delete files in /data" in plan.clarification_question
    assert "file_delete" in plan.tools.blocked
    assert "never delete files in /data" in plan.constraints and "user_profile" in plan.required


def test_risky_action_needs_confirmation() -> None:
    plan = _plan("Delete all files in /tmp/cache")
    assert plan.needs_clarification and plan.actions_held_back
    # It asks first: no tool call this turn (the delete tool would need the user's confirmation anyway).
    assert "delete" in plan.clarification_question and plan.budget.tool_calls == 0


def test_interrupt_policies() -> None:
    run = [RunningTask(task_id="t1", name="Write the quarterly report")]
    stop = _plan("stop", IntentContext(running_tasks=run), running_tasks=["Write the quarterly report"])
    assert stop.concurrency.merge_rule == MergeRule.CONTROL and stop.concurrency.target_task == "t1"
    assert not stop.concurrency.allow_concurrent and stop.retrieval.date_range is None
    assert "task_state" in stop.required and stop.history.main_chain_turns <= 4
    amend = _plan("While you're at it, add a section on costs", IntentContext(running_tasks=run))
    assert amend.concurrency.merge_rule == MergeRule.FOLD_INTO_TASK
    run2 = run + [RunningTask(task_id="t2", name="Migrate the database")]
    which = _plan("stop", IntentContext(running_tasks=run2), running_tasks=["Write the quarterly report",
                                                                             "Migrate the database"])
    assert which.needs_clarification and "Migrate the database" in which.clarification_question


def test_push_and_follow_up_policies() -> None:
    from app.core.intent.model import EnvEventRef

    push = _plan("", IntentContext(recent_env_events=[EnvEventRef(kind="feed", title="New release of numpy")]))
    assert push.intent.mode == "push" and "env_state" in push.required
    assert push.rerank.evidence_priority[0] == "env_event" and not push.concurrency.allow_interrupt
    follow = _plan("what about Berlin?", IntentContext(recent_turns=[RecentTurn(text="What is the population "
                                                                                 "of Paris?", mode="qa")]))
    assert follow.history.main_chain_turns > push.history.main_chain_turns and "branch_history" in follow.required


def test_retrieval_filters_and_date_range() -> None:
    plan = _plan("What did Caroline say about the trip to Paris today?", now="2024-03-20T15:00:00Z")
    assert plan.retrieval.filters.authors == ["Caroline"]
    dates = plan.retrieval.date_range
    assert dates is not None and (dates.start, dates.end, dates.mode) == ("2024-03-20T00:00:00", "2024-03-20T15:00:01",
                                                                          "filter")
    assert _plan("What did Caroline say about Paris?", now="2024-03-20T15:00:00Z").retrieval.date_range is None
    march = _plan("What did we plan in March?", now="2024-03-20T15:00:00Z").retrieval.date_range
    assert march is not None and march.mode == "prefer" and march.start == "2024-03-01T00:00:00"
    files = _plan("Summarize notes.md and the todo list")
    assert files.retrieval.filters.kinds[:1] == ["file"] and "task" in files.retrieval.filters.kinds


def test_clarification_question_falls_back_to_mode_choice() -> None:
    intent = ENGINE.infer("The deadline moved to Friday.")
    intent = intent.model_copy(update={"uncertainty_reasons": ["low_mode_confidence: qa vs task (0.1)"]})
    assert clarification_question(intent).startswith("Should I answer a question or carry out a task")


def test_engine_attribute_paths() -> None:
    """The paths the engine reads (keep them stable)."""
    plan = _plan("What did Bob say about the budget?")
    assert set(plan.budget.segments) == set(SEGMENTS) and set(plan.retrieval.channels) == set(CHANNELS)
    assert isinstance(plan.rerank.top_k, int) and 0 < plan.rerank.dedup_threshold < 1
    assert 0 < plan.rerank.mmr_lambda < 1 and plan.history.main_chain_turns > 0
    assert isinstance(plan.tools.allowed, list) and isinstance(plan.tools.blocked, list)
    assert isinstance(plan.needs_clarification, bool) and isinstance(plan.clarification_question, str)


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("text", ["Write a haiku about autumn", "hmm", "Delete all files in /tmp/cache",
                                  "What did Caroline say about the trip to Paris today?", ""])
def test_build_is_deterministic(text: str) -> None:
    def fresh() -> str:
        ictx = IntentContext(running_tasks=[RunningTask(task_id="t1", name="Write the report")],
                             profile=UserProfile(prohibitions=["send emails"], permissions=["read files"]))
        intent = IntentEngine().infer(text, ictx)
        ctx = PlanContext(tools=[t.model_copy() for t in TOOLS], profile=UserProfile(prohibitions=["send emails"]),
                          total_budget=3000, context_size=4096, answer_reserve=700, running_tasks=["Write the report"])
        return PlanBuilder().build(intent, ctx).model_dump_json()

    first = fresh()
    assert fresh() == first
    intent = ENGINE.infer(text)
    assert BUILDER.build(intent, _ctx()).model_dump_json() == BUILDER.build(intent, _ctx()).model_dump_json()


_REPLAY_SCRIPT = """
import json
from app.core.intent.engine import IntentEngine
from app.core.intent.model import EnvEventRef, IntentContext, RecentTurn, RunningTask
from app.core.plan.builder import PlanBuilder, PlanContext
from app.core.plan.tools import ToolSpec
from app.core.intent.profile import UserProfile
profile = UserProfile(prohibitions=["send emails", "delete files in /data"], permissions=["read files"])
tools = [ToolSpec(name=n, tags=t, action=a) for n, t, a in (("web_search", ["web"], False),
         ("file_delete", ["file"], True), ("send_email", [], True), ("calendar", ["schedule"], False))]
ctx = IntentContext(running_tasks=[RunningTask(task_id="t1", name="Migrate the database")], profile=profile,
                    recent_turns=[RecentTurn(text="What did Caroline say about Paris?", mode="qa")],
                    recent_env_events=[EnvEventRef(kind="file", title="notes.md modified", uri="/n/notes.md")])
out = []
for text in ["and Berlin?", "Clean up /data by deleting stale files, then email Bob", "stop the migration",
             "Plan next week and summarize notes.md", "", "What changed in notes.md today?"]:
    intent = IntentEngine().infer(text, ctx)
    out.append(PlanBuilder().build(intent, PlanContext(tools=tools, profile=profile)).model_dump_json())
print(json.dumps(out))
"""


def test_build_is_identical_across_processes() -> None:
    """Replay runs in another process: set iteration order (PYTHONHASHSEED) must not leak into plans."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", _REPLAY_SCRIPT], cwd=root, env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] and len(outputs[0]) > 1000
