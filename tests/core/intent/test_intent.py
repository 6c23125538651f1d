"""Intent: fusion math, prototypes, text cues, the table of inputs, the LLM signal, the profile, determinism."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from app.core.intent.cues import analyse_text, extract_entities
from app.core.intent.engine import (
    MODE_PRIOR,
    IntentEngine,
    PrototypeBank,
    argmax,
    cue_distribution,
    decisiveness,
    fuse,
    redirect,
    saturate,
)
from app.core.intent.llm import INTENT_JSON_SCHEMA, intent_messages, normalize_llm_intent
from app.core.intent.model import (
    CLARIFY_CODES,
    EnvEventRef,
    Intent,
    IntentContext,
    Mode,
    RecentTurn,
    Risk,
    RunningTask,
    SignalRecord,
    TaskType,
    Urgency,
)
from app.core.intent.profile import UserProfile, parse_profile_statements, statement_matches, to_remember
from app.llm.fakes import HashEmbedder

ENGINE = IntentEngine()

# --------------------------------------------------------------------------- fusion math


def test_saturate_is_monotone_and_bounded() -> None:
    assert saturate(0) == 0.0 and saturate(-3) == 0.0
    values = [saturate(x) for x in (0.5, 1, 2, 4, 8)]
    assert values == sorted(values) and all(0 < v < 1 for v in values)
    assert saturate(1) == pytest.approx(1 - math.exp(-1))


def test_cue_distribution_shares_and_strength() -> None:
    strength, shares = cue_distribution({"qa": 1.0, "task": 3.0, "bogus": 9.0}, ("qa", "task", "push"))
    assert shares == {"qa": 0.25, "task": 0.75}
    assert strength == pytest.approx(saturate(4.0))
    assert cue_distribution({}, ("qa",)) == (0.0, {})


def test_fuse_prior_only_and_with_records() -> None:
    assert fuse([], "mode", MODE_PRIOR, 0.5) == pytest.approx(MODE_PRIOR)
    recs = [SignalRecord(name="rules", field="mode", label="task", weight=2.0, score=1.0),
            SignalRecord(name="rules", field="task_type", label="change", weight=9.0, score=1.0),
            SignalRecord(name="x", field="mode", label="unknown", weight=9.0, score=1.0)]
    dist = fuse(recs, "mode", MODE_PRIOR, 0.5)
    assert list(dist) == list(MODE_PRIOR)  # fixed label order
    assert argmax(dist) == "task"
    assert dist["task"] == pytest.approx((0.5 * 0.3 + 2.0) / (0.5 + 2.0), abs=1e-4)
    assert sum(dist.values()) == pytest.approx(1.0, abs=1e-3)


def test_redirect_moves_mass_and_conserves_it() -> None:
    dist = {"qa": 0.6, "task": 0.2, "interrupt": 0.1, "push": 0.05, "clarify": 0.05}
    out = redirect(dist, 0.5, ("qa", "task"), "interrupt")
    assert out["qa"] == pytest.approx(0.3) and out["task"] == pytest.approx(0.1)
    assert out["interrupt"] == pytest.approx(0.5)
    assert sum(out.values()) == pytest.approx(1.0)
    assert redirect(dist, 0.0, ("qa",), "interrupt") == dist


def test_decisiveness_is_top_times_margin() -> None:
    assert decisiveness({"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}) == 0.0
    assert decisiveness({"a": 1.0, "b": 0.0}) == 1.0
    assert decisiveness({"a": 0.8, "b": 0.1, "c": 0.1}) == pytest.approx(math.sqrt(0.8 * 0.7), abs=1e-4)
    assert decisiveness({"a": 0.5, "b": 0.4, "c": 0.1}) < decisiveness({"a": 0.5, "b": 0.2, "c": 0.3})
    assert decisiveness({}) == 0.0


def test_argmax_breaks_ties_by_label_order() -> None:
    assert argmax({"qa": 0.4, "task": 0.4, "push": 0.2}) == "qa"
    assert argmax({"task": 0.4, "qa": 0.4}) == "task"


# --------------------------------------------------------------------------- prototypes


def _hash_bank() -> tuple[PrototypeBank, HashEmbedder]:
    emb = HashEmbedder(64)
    return PrototypeBank.from_embed(lambda texts: emb.embed(texts)), emb


def test_prototype_bank_scores_are_distributions() -> None:
    bank, emb = _hash_bank()
    assert not bank.is_empty()
    scores = bank.scores(emb.embed(["Stop what you are doing."])[0])
    assert set(scores) == {"mode", "task_type"}
    for fld, labels in (("mode", [m.value for m in Mode]), ("task_type", [t.value for t in TaskType])):
        probs = {k: v for k, v in scores[fld].items() if k != "_best"}
        assert list(probs) == labels
        assert sum(probs.values()) == pytest.approx(1.0, abs=1e-3)
    assert argmax({k: v for k, v in scores["mode"].items() if k != "_best"}) == "interrupt"
    assert scores["mode"]["_best"] == pytest.approx(1.0, abs=1e-3)  # the prototype itself


def test_prototype_bank_degrades_without_vectors() -> None:
    bank, _ = _hash_bank()
    assert PrototypeBank.empty().is_empty()
    assert PrototypeBank.empty().scores([1.0, 0.0]) == {}
    assert bank.scores(None) == {}
    assert bank.scores([1.0, 2.0]) == {}  # wrong dimension: no signal, no error
    assert bank.scores([0.0] * 64) == {}
    assert bank.scores([float("nan")] * 64) == {}
    assert PrototypeBank(labels={"mode": ["qa"]}, vectors={"mode": np.ones((2, 3))}).is_empty()  # mismatch


def test_embedding_signal_moves_the_distribution() -> None:
    bank = PrototypeBank(labels={"mode": ["qa", "task"]}, vectors={"mode": np.array([[1.0, 0.0], [0.0, 1.0]])})
    text = "The deadline moved to Friday."
    base = ENGINE.infer(text)
    with_vec = IntentEngine(bank).infer(text, IntentContext(query_vector=[0.0, 1.0]))
    assert with_vec.distribution["mode"]["task"] > base.distribution["mode"]["task"]
    assert any(s.name == "embedding" and s.label == "task" for s in with_vec.signals)
    assert IntentEngine(bank).infer(text).model_dump() == base.model_dump()  # no vector: no signal


# --------------------------------------------------------------------------- text helpers


def test_extract_entities_kinds_and_order() -> None:
    text = ('Ask Caroline about "Project Phoenix" in /srv/app/main.py and report.md by 2024-05-01, '
            "ticket #42, see https://example.org/x and my_var with 3.5% of HTTP calls in New York")
    ents = extract_entities(text, cap=20)
    for e in ("Caroline", "Project Phoenix", "/srv/app/main.py", "report.md", "2024-05-01", "#42",
              "https://example.org/x", "my_var", "3.5%", "HTTP", "New York"):
        assert e in ents, e
    assert ents.index("Caroline") < ents.index("Project Phoenix") < ents.index("/srv/app/main.py")
    assert "Ask" not in ents and extract_entities("Never write tests. URGENT!") == []


def test_analyse_text_flags() -> None:
    c = analyse_text("Can you fix the login bug?")
    assert not c.question and c.mode.get("task", 0) > c.mode.get("qa", 0)  # polite '?'
    assert analyse_text("stop now").control == "stop"
    assert analyse_text("hold on").control == "pause"
    assert analyse_text("While you're at it, add tests").amend
    assert analyse_text("how far along are you?").status_query
    assert analyse_text("and the second one?").follow_up
    assert analyse_text("hmm").vague and not analyse_text("Thanks!").vague
    assert analyse_text("no rush, whenever").urgency == Urgency.LOW
    assert analyse_text("do it asap").urgency == Urgency.HIGH
    assert analyse_text("delete the branch but don't push").risk_words == ["delete"]
    assert analyse_text("what did we decide yesterday?").time_hints == ["time:past:yesterday"]


# --------------------------------------------------------------------------- the table

RUN1 = [RunningTask(task_id="t1", name="Write the quarterly report", status="active")]
RUN2 = RUN1 + [RunningTask(task_id="t2", name="Migrate the database", status="active")]
FILE_EVENT = EnvEventRef(kind="file", title="notes.md modified", uri="/home/u/notes.md")
NO_DELETE = UserProfile(prohibitions=["delete files in /data"])
STAGING = UserProfile(permissions=["deploy to staging"])


def _ctx(**kw: Any) -> IntentContext:
    return IntentContext(**kw)


Check = Callable[[Intent], bool]
CASES: list[tuple[str, str, IntentContext, Mode, TaskType | None, bool, Check]] = [
    ("fact question", "What is the capital of France?", _ctx(), Mode.QA, TaskType.RETRIEVAL, False,
     lambda i: "France" in i.entities and i.risk == Risk.LOW),
    ("write", "Write a haiku about autumn", _ctx(), Mode.TASK, TaskType.GENERATION, False,
     lambda i: i.goal == "Write a haiku about autumn"),
    ("polite fix", "Can you fix the login bug in auth.py?", _ctx(), Mode.TASK, TaskType.CHANGE, False,
     lambda i: "auth.py" in i.entities and i.risk == Risk.MEDIUM),
    ("why error", "Why does the build fail with a KeyError?", _ctx(), Mode.QA, TaskType.DIAGNOSTIC, False,
     lambda i: "KeyError" in i.entities),
    ("plan", "Plan the migration to Postgres for next week", _ctx(), Mode.TASK, TaskType.PLANNING, False,
     lambda i: "Postgres" in i.entities),
    ("debug", "debug the failing test in test_api.py", _ctx(), Mode.TASK, TaskType.DIAGNOSTIC, False,
     lambda i: "test_api.py" in i.entities),
    ("acceptance", "Summarize the meeting notes and make sure it is under 200 words", _ctx(), Mode.TASK,
     TaskType.GENERATION, False, lambda i: i.acceptance == ["it is under 200 words"]
     and "under 200 words" in i.constraints),
    ("recall person", "Remind me what Bob said about the budget yesterday", _ctx(), Mode.QA, TaskType.RETRIEVAL,
     False, lambda i: "Bob" in i.entities and "time:past:yesterday" in i.plan_hints),
    ("constraints", "Refactor utils.py without changing the public API, don't touch tests", _ctx(), Mode.TASK,
     TaskType.CHANGE, False, lambda i: "touch tests" in i.prohibitions
     and "without changing the public API" in i.constraints),
    ("ack", "Thanks!", _ctx(), Mode.QA, None, False, lambda i: i.goal == "acknowledge the reply"),
    ("statement", "The deadline moved to Friday.", _ctx(), Mode.QA, None, False, lambda i: "Friday" in i.entities),
    ("vague", "hmm", _ctx(), Mode.CLARIFY, None, True, lambda i: "vague_goal" in i.reason_codes()),
    ("empty", "", _ctx(), Mode.CLARIFY, None, True, lambda i: "empty_input" in i.reason_codes()),
    ("stop one task", "stop", _ctx(running_tasks=RUN1), Mode.INTERRUPT, None, False,
     lambda i: "control:stop" in i.plan_hints and i.hint("target_task") == "t1" and i.urgency == Urgency.HIGH),
    ("stop which", "stop", _ctx(running_tasks=RUN2), Mode.INTERRUPT, None, True,
     lambda i: "ambiguous_task" in i.reason_codes()),
    ("cancel named", "cancel the migration", _ctx(running_tasks=RUN2), Mode.INTERRUPT, None, False,
     lambda i: i.hint("target_task") == "t2" and i.hint("control") == "cancel"),
    ("focus task", "pause", _ctx(running_tasks=RUN2, focus_task="t2"), Mode.INTERRUPT, None, False,
     lambda i: i.hint("target_task") == "t2"),
    ("status", "How far along is it?", _ctx(running_tasks=RUN1), Mode.INTERRUPT, None, False,
     lambda i: "status_query" in i.plan_hints),
    ("amend", "While you're at it, add a section on costs", _ctx(running_tasks=RUN1), Mode.INTERRUPT,
     TaskType.CHANGE, False, lambda i: "amend_running_task" in i.plan_hints),
    # A question during a task is about it when it names it or points back at it; an unrelated
    # one is its own Q&A stream (the seed's multi-stream model), with the task still in sight.
    ("question during task", "What's the capital of Peru?", _ctx(running_tasks=RUN1), Mode.QA, TaskType.RETRIEVAL,
     False, lambda i: 0.2 < i.distribution["mode"]["interrupt"] < 0.4),
    ("question pointing back", "Does it cover the costs?", _ctx(running_tasks=RUN1), Mode.INTERRUPT, None,
     False, lambda i: i.hint("target_task") == "t1"),
    ("question about the task", "How is the task going?", _ctx(running_tasks=RUN1), Mode.INTERRUPT, None,
     False, lambda i: i.hint("target_task") == "t1"),
    ("how long, not about the task", "How long does bread dough usually rise?", _ctx(running_tasks=RUN1), Mode.QA,
     None, False, lambda i: "status_query" not in i.plan_hints),
    ("how long, about the task", "How long will it take?", _ctx(running_tasks=RUN1), Mode.INTERRUPT, None,
     False, lambda i: "status_query" in i.plan_hints),
    ("question naming the task", "Which sections are in the report?", _ctx(running_tasks=RUN1), Mode.INTERRUPT,
     None, False, lambda i: i.distribution["mode"]["interrupt"] > 0.7),
    ("new work during task", "Write a poem about the sea", _ctx(running_tasks=RUN1), Mode.TASK,
     TaskType.GENERATION, False, lambda i: i.hint("target_task") is None),
    ("same question idle", "What's the capital of Peru?", _ctx(), Mode.QA, TaskType.RETRIEVAL, False,
     lambda i: i.confidence.mode > 0.7),
    ("follow-up task", "and the second one?", _ctx(recent_turns=[RecentTurn(
        text="Summarize the first two chapters of Dune", mode="task")]), Mode.TASK, TaskType.GENERATION, False,
     lambda i: "follow-up to: Summarize" in i.goal and "Dune" in i.entities),
    ("follow-up qa", "what about Berlin?", _ctx(recent_turns=[RecentTurn(
        text="What is the population of Paris?", mode="qa")]), Mode.QA, TaskType.RETRIEVAL, False,
     lambda i: i.entities[:2] == ["Berlin", "Paris"] and "follow_up" in i.plan_hints),
    ("env file", "", _ctx(recent_env_events=[FILE_EVENT]), Mode.PUSH, TaskType.RETRIEVAL, False,
     lambda i: "notes.md modified" in i.goal and "/home/u/notes.md" in i.entities),
    ("env alert", "", _ctx(trigger="env", recent_env_events=[EnvEventRef(kind="api", title="Build failed on main")]),
     Mode.PUSH, TaskType.DIAGNOSTIC, False, lambda i: i.urgency == Urgency.HIGH),
    ("env mentioned", "What changed in notes.md?", _ctx(recent_env_events=[FILE_EVENT]), Mode.QA,
     TaskType.RETRIEVAL, False, lambda i: "include_env_events" in i.plan_hints),
    ("prohibition conflict", "Clean up /data by deleting stale files", _ctx(profile=NO_DELETE), Mode.TASK,
     TaskType.CHANGE, True, lambda i: i.risk == Risk.HIGH and "prohibition_conflict" in i.reason_codes()
     and "never delete files in /data" in i.constraints),
    ("permitted", "Deploy the app to staging", _ctx(profile=STAGING), Mode.TASK, TaskType.CHANGE, False,
     lambda i: i.risk == Risk.MEDIUM and i.hint("permitted") == "deploy to staging"),
    ("not permitted", "Deploy the app to production", _ctx(profile=STAGING), Mode.TASK, TaskType.CHANGE, True,
     lambda i: i.risk == Risk.HIGH and "high_risk_action" in i.reason_codes()),
    ("urgent", "URGENT: the server is down, check the logs now!", _ctx(), Mode.TASK, TaskType.DIAGNOSTIC, False,
     lambda i: i.urgency == Urgency.HIGH),
    ("no rush", "Translate this paragraph into French, no rush", _ctx(), Mode.TASK, TaskType.GENERATION, False,
     lambda i: i.urgency == Urgency.LOW),
    ("risky", "Delete all files in /tmp/cache", _ctx(), Mode.TASK, TaskType.CHANGE, True,
     lambda i: i.risk == Risk.HIGH and "/tmp/cache" in i.entities),
    ("risky question", "How do I delete a git branch?", _ctx(), Mode.QA, None, False,
     lambda i: i.risk == Risk.MEDIUM),
    ("safe send", "Send me the report", _ctx(), Mode.TASK, None, False, lambda i: i.risk != Risk.HIGH),
    ("profile statement", "Never delete files in /data.", _ctx(), Mode.TASK, None, False,
     lambda i: "profile_update:prohibition" in i.plan_hints and i.risk == Risk.LOW),
    ("compound", "What is Kafka and how does Zookeeper work?", _ctx(), Mode.QA, TaskType.RETRIEVAL, False,
     lambda i: len(i.sub_questions) == 2 and "decompose:2" in i.plan_hints),
    ("vague fix", "fix it", _ctx(), Mode.TASK, TaskType.CHANGE, True, lambda i: "vague_goal" in i.reason_codes()),
    ("vague fix follows", "fix it", _ctx(recent_turns=[RecentTurn(text="The login test fails with a KeyError")]),
     Mode.QA, None, False, lambda i: "KeyError" in i.entities),
]


@pytest.mark.parametrize(("text", "ctx", "mode", "task_type", "clarify", "check"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_intent_table(text: str, ctx: IntentContext, mode: Mode, task_type: TaskType | None, clarify: bool,
                      check: Check) -> None:
    intent = ENGINE.infer(text, ctx)
    assert intent.mode == mode, intent.distribution
    if task_type is not None:
        assert intent.task_type == task_type, intent.distribution
    assert intent.needs_clarification == clarify, intent.uncertainty_reasons
    assert check(intent), intent.model_dump()
    assert intent.llm.status == "skipped"
    for c in (intent.confidence.mode, intent.confidence.task_type, intent.confidence.goal):
        assert 0.0 <= c <= 1.0
    assert intent.needs_clarification == any(code in CLARIFY_CODES for code in intent.reason_codes())


def test_signals_record_every_contribution() -> None:
    intent = ENGINE.infer("stop", IntentContext(running_tasks=RUN1))
    names = {(s.name, s.field, s.label) for s in intent.signals}
    assert ("rules", "mode", "interrupt") in names and ("structure", "mode", "interrupt") in names
    assert any(e.field == "mode" and e.span.lower() == "stop" for e in intent.evidence_spans)


def test_high_confidence_for_clear_inputs() -> None:
    for text in ("What is the capital of France?", "Write a haiku about autumn"):
        c = ENGINE.infer(text).confidence
        assert c.mode > 0.7 and c.task_type > 0.6


# --------------------------------------------------------------------------- the LLM signal


def _kafka(out: Any = None, status: str | None = None) -> Intent:
    return ENGINE.infer("What is Kafka?", IntentContext(llm_output=out, llm_status=status))  # type: ignore[arg-type]


def test_llm_valid_json_moves_the_result() -> None:
    base = _kafka()
    llm = _kafka({"mode": "task", "task_type": "generation", "goal": "Write an essay on Kafka", "confidence": 0.9})
    assert llm.llm.status == "ok"
    assert llm.distribution["mode"]["task"] > base.distribution["mode"]["task"]
    assert llm.distribution["task_type"]["generation"] > base.distribution["task_type"]["generation"]
    assert llm.goal == "Write an essay on Kafka"
    assert "signal_conflict" in llm.reason_codes()
    agree = _kafka({"mode": "qa", "task_type": "retrieval", "goal": "Explain what Kafka is", "confidence": 0.9})
    assert agree.confidence.mode > base.confidence.mode
    assert agree.confidence.task_type > base.confidence.task_type
    assert any(s.name == "llm" for s in agree.signals)


def test_llm_fields_are_merged() -> None:
    out = {"mode": "qa", "task_type": "retrieval", "goal": "Explain Kafka", "confidence": 0.8,
           "entities": ["Apache Kafka"], "acceptance": ["mentions partitions"], "urgency": "high",
           "risk": "medium", "evidence": ["Kafka", "not in the input"], "uncertainty_reasons": ["which version?"],
           "sub_questions": ["What is a topic?"]}
    i = _kafka(out)
    assert "Apache Kafka" in i.entities and i.acceptance == ["mentions partitions"]
    assert i.urgency == Urgency.HIGH and i.risk == Risk.MEDIUM
    assert [e.span for e in i.evidence_spans if e.source == "llm"] == ["Kafka"]
    assert "llm: which version?" in i.uncertainty_reasons
    assert i.sub_questions == []  # one part, about something the input does not ask: the check refuses it


def test_the_models_split_is_used_when_it_passes_the_check() -> None:
    text = "What did we pick for the database and the backups?"  # no rule splits it
    parts = ["What did we pick for the database?", "What did we pick for the backups?"]
    out = {"mode": "qa", "task_type": "retrieval", "goal": "Answer", "confidence": 0.8, "sub_questions": parts}
    assert ENGINE.infer(text, IntentContext(llm_output=out, llm_status="ok")).sub_questions == parts
    guessed = {**out, "sub_questions": ["What did we pick for the database?", "What does Postgres cost?"]}
    assert ENGINE.infer(text, IntentContext(llm_output=guessed, llm_status="ok")).sub_questions == []


@pytest.mark.parametrize("garbage", ["not json {", "[1, 2]", 42, [1, 2], {"mode": "dance"}, {"foo": "bar"},
                                     {"mode": None, "task_type": 7, "goal": ""}, ""])
def test_llm_garbage_degrades_and_is_recorded(garbage: Any) -> None:
    base = _kafka()
    bad = _kafka(garbage, "ok")
    assert bad.llm.status == "invalid" and bad.llm.detail
    assert "llm_invalid" in bad.reason_codes()
    assert (bad.mode, bad.task_type, bad.distribution, bad.goal) == (base.mode, base.task_type,
                                                                    base.distribution, base.goal)


def test_llm_missing_late_error_skipped() -> None:
    assert _kafka(None, "ok").llm.model_dump() == {"status": "invalid", "detail": "no output"}
    assert _kafka(None).llm.status == "skipped" and not _kafka(None).uncertainty_reasons
    late = _kafka({"mode": "task"}, "late")
    assert late.llm.status == "late" and "llm_late" in late.reason_codes() and late.mode == Mode.QA
    err = ENGINE.infer("What is Kafka?", IntentContext(llm_status="error", llm_detail="model crashed"))
    assert err.llm.model_dump() == {"status": "error", "detail": "model crashed"}
    assert "llm_error: model crashed" in err.uncertainty_reasons


def test_normalize_llm_intent_maps_trims_and_drops() -> None:
    fields, problems = normalize_llm_intent({
        "intentStruct": {"goal": "  fix   the build  ", "planHints": "check CI"},
        "Intent": "Command", "taskType": "Debugging", "urgency": "urgent", "risk": "catastrophic",
        "constraints": ["no force push", 3, None], "confidence": 7, "needsClarification": "false", "extra": 1})
    assert fields == {"goal": "fix the build", "plan_hints": ["check CI"], "mode": "task",
                      "task_type": "diagnostic", "urgency": "high", "constraints": ["no force push"],
                      "confidence": 1.0, "needs_clarification": False}
    assert any("risk" in p for p in problems) and any("extra" in p for p in problems)
    assert any("constraints" in p for p in problems)
    assert normalize_llm_intent('{"mode": "qa", "confidence": "high"}')[0] == {"mode": "qa", "confidence": 0.85}
    assert normalize_llm_intent(None) == ({}, ["expected an object, got NoneType"])


def test_llm_flag_requests_clarification() -> None:
    i = _kafka({"mode": "qa", "task_type": "retrieval", "goal": "Explain Kafka", "needs_clarification": True})
    assert i.needs_clarification and "llm_flagged" in i.reason_codes()


def test_schema_and_prompt() -> None:
    props = INTENT_JSON_SCHEMA["properties"]
    assert props["mode"]["enum"] == [m.value for m in Mode]
    assert props["task_type"]["enum"] == [t.value for t in TaskType]
    assert set(INTENT_JSON_SCHEMA["required"]) <= set(props)
    jsonschema = pytest.importorskip("jsonschema")
    sample = {"mode": "qa", "task_type": "retrieval", "goal": "g", "confidence": 0.5, "entities": ["x"]}
    jsonschema.validate(sample, INTENT_JSON_SCHEMA)
    assert normalize_llm_intent(sample)[1] == []
    ctx = IntentContext(running_tasks=RUN1, profile=NO_DELETE, recent_turns=[RecentTurn(text="hi")],
                        recent_env_events=[FILE_EVENT])
    msgs = intent_messages("Stop that", ctx)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    for part in ("Stop that", "Write the quarterly report", "delete files in /data", "notes.md modified", "hi"):
        assert part in user
    assert intent_messages("Stop that", ctx) == msgs
    json.dumps(INTENT_JSON_SCHEMA)


# --------------------------------------------------------------------------- profile


def test_profile_statements_are_parsed() -> None:
    got = [(s.kind, s.text) for s in parse_profile_statements(
        "Never delete files in /data. I prefer short answers! You may deploy to staging; "
        "always write tests first. I don't know. Why don't you stop? Don't ever use tabs, please.")]
    assert got == [("prohibition", "delete files in /data"), ("preference", "short answers"),
                   ("permission", "deploy to staging"), ("preference", "write tests first"),
                   ("prohibition", "use tabs")]


@pytest.mark.parametrize(("text", "kept"), [
    ("Remember that the launch is on Friday.", True),
    ("Note: the budget is 5k.", True),
    ("Keep in mind the deadline is Monday", True),
    ("Don't forget that Ana joins on the 3rd. Never deploy on Fridays.", True),
    ("I prefer metric units.", True),
    ("Remember that I prefer short answers. Draft the offsite agenda.", False),  # work asked for too
    ("Remember the launch is Friday. When is the venue booked?", False),  # and a question
    ("Do you remember the launch date?", False),
    ("Plan and draft the offsite agenda with numbered steps", False),
    ("Notes on the meeting: draft them", False),
    ("Remember.", False),
])
def test_a_statement_to_remember_is_told_from_work(text: str, kept: bool) -> None:
    assert to_remember(text) is kept


@pytest.mark.parametrize(("text", "mode"), [
    ("I am planning a trip to Lisbon in May. Never book night buses. What should I pack?", "qa"),
    ("By the way, I prefer metric units. How far is Kyoto from Tokyo?", "qa"),
    ("Never delete files in /data. Now clean up /data/tmp please", "task"),
    ("I prefer metric units. Draft the announcement for the launch.", "task"),
])
def test_a_rule_said_in_passing_leaves_the_mode_and_goal_to_the_rest(text: str, mode: str) -> None:
    """A profile rule beside a question or a request is kept (a ``profile_update`` hint) but does
    not make the input a task, nor its goal "remember: …": the question or the request decides."""
    intent = ENGINE.infer(text)
    assert intent.mode.value == mode and not intent.goal.startswith("remember:")
    assert any(h.startswith("profile_update:") for h in intent.plan_hints)


def test_profile_update_latest_wins() -> None:
    p, st = UserProfile().updated_from("You may deploy to staging.")
    assert p.permissions == ["deploy to staging"] and len(st) == 1
    p, _ = p.updated_from("Never deploy to staging.")
    assert p.permissions == [] and p.prohibitions == ["deploy to staging"]
    same, none = p.updated_from("What time is it?")
    assert same is p and none == []


def test_statement_matching_ignores_negated_clauses() -> None:
    assert statement_matches("delete files in /data", "delete the old files in data")
    assert not statement_matches("delete files in /data", "never delete files in /data")
    assert not statement_matches("delete files in /data", "delete the temp folder")
    assert not statement_matches("delete files", "archive the files but don't delete anything")
    assert UserProfile(permissions=["deploy to staging"]).permission_hits("deploy to production") == []


# --------------------------------------------------------------------------- determinism


def test_infer_is_deterministic() -> None:
    bank, emb = _hash_bank()
    text = "While you're at it, delete the old logs in /var/log and email Bob by Friday?"

    def ctx() -> IntentContext:
        return IntentContext(query_vector=emb.embed([text])[0].tolist(), running_tasks=list(RUN2),
                             recent_turns=[RecentTurn(text="Clean the server", mode="task")],
                             profile=UserProfile(prohibitions=["email customers"], preferences=["be brief"]),
                             recent_env_events=[FILE_EVENT],
                             llm_output={"mode": "interrupt", "goal": "amend the cleanup", "confidence": 0.7})

    a = IntentEngine(bank).infer(text, ctx()).model_dump_json()
    b = IntentEngine(_hash_bank()[0]).infer(text, ctx()).model_dump_json()
    assert a == b
    assert IntentEngine(bank).infer(text, ctx()).model_dump_json() == a
