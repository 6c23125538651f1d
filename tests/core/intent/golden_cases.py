"""Golden cases for intent inference and plan building: a fixed, varied set of inputs and their outputs.

``infer_lines()`` runs ``IntentEngine.infer`` on a few hundred deterministic (text, context,
engine) cases and returns one JSON line per case: ``{"case": id, "intent": <model_dump_json>}``.
``plan_lines()`` runs ``PlanBuilder.build`` on a subset of those intents under several plan
contexts and configs, plus ``check_plan`` on hand-broken plans, one line per case. The committed
files ``golden_infer.jsonl`` and ``golden_plan.jsonl`` beside this module were written from the
code before its functions were split; ``test_golden.py`` proves the output is still identical.

Nothing here is random: contexts are picked by index arithmetic, and the fake embedding is a
bag of hashed words (blake2b bytes read as numbers), so every run gives the same bytes.

Regenerate (only when a behaviour change is intended, and say so in the commit)::

    python3 -m tests.core.intent.golden_cases
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from app.core.intent.engine import IntentEngine, IntentWeights, PrototypeBank
from app.core.intent.model import EnvEventRef, Intent, IntentContext, RecentTurn, RunningTask
from app.core.intent.profile import UserProfile
from app.core.plan.builder import PlanBuilder, PlanConfig, PlanContext, check_plan
from app.core.plan.tools import ToolSpec

HERE = Path(__file__).resolve().parent
INFER_FILE = HERE / "golden_infer.jsonl"
PLAN_FILE = HERE / "golden_plan.jsonl"

# --------------------------------------------------------------------------- fake embedding

DIM = 32
_WORD_RE = re.compile(r"\w+")


def _word_vector(word: str) -> np.ndarray:
    raw = hashlib.blake2b(word.encode("utf-8"), digest_size=2 * DIM).digest()
    return np.frombuffer(raw, dtype="<u2").astype(np.float64) / 32767.5 - 1.0


def fake_embed(texts: list[str]) -> np.ndarray:
    """Deterministic bag-of-hashed-words vectors, unit length (a fixed vector for wordless text)."""
    rows = []
    for text in texts:
        vec = np.zeros(DIM, dtype=np.float64)
        for word in _WORD_RE.findall(text.lower()):
            vec += _word_vector(word)
        norm = float(np.linalg.norm(vec))
        rows.append(vec / norm if norm else _word_vector(""))
    return np.stack(rows)


def query_vector(text: str) -> list[float]:
    return [round(float(x), 12) for x in fake_embed([text])[0]]


BANK = PrototypeBank.from_embed(fake_embed)

# --------------------------------------------------------------------------- inputs

BASIC_TEXTS: tuple[str, ...] = (
    # questions
    "What is the capital of France?",
    "Who was responsible for the migration decision?",
    "When did we last talk about the budget?",
    "How does the garbage collector work in Python?",
    "Why does the build fail with a KeyError?",
    "Is the staging server still running?",
    "Can you explain how OAuth refresh tokens work?",
    "Do you know where I put the invoice from March 3rd?",
    "Which of the two options is cheaper, AWS or GCP?",
    "what's wrong with my test_login function",
    "Tell me about the Treaty of Westphalia",
    "Where is the config file for nginx?",
    "Any idea why it's so slow today?",
    "What did Alice say about the roadmap last week?",
    "I wonder how long the backup takes",
    "How should we prioritize these tasks?",
    "What is Kafka and how does Zookeeper work?",
    "What is the difference between a list and a tuple? And when should I use a set?",
    "Who wrote Dune? When was it published? Was it popular?",
    # commands and task requests
    "Write a haiku about autumn",
    "Please fix the failing test in tests/test_api.py",
    "Can you refactor the parse_config function so that it handles missing keys?",
    "Summarize the attached article in three sentences",
    "Translate this paragraph into French, no rush",
    "Create a checklist for the product launch by Friday",
    "Draft an email to the team about the outage, keep it under 100 words",
    "Rename the variables in utils.py and make sure the tests still pass",
    "Plan the next steps of the project",
    "Make a schedule for next week",
    "Debug the crash in the parser, it should not raise on empty input",
    "Update the README using markdown only, without changing the license section",
    "Implement caching in fetch_data so that repeated calls take less than 10 ms",
    "Write a Python script that renames all .jpg files in ~/Pictures by date, in under 50 lines",
    "Generate a report of last month's sales in a table",
    "Convert the CSV at /data/export.csv to JSON",
    "Investigate why the nightly job failed, check the logs",
    "Help me organize my notes into topics",
    "I need you to build a dashboard for the metrics API",
    "Let's brainstorm names for the new product",
    "Go ahead and merge the feature branch",
    "Add a conclusion to the essay, done when it summarises all three arguments",
    "Optimize the SQL query in reports.sql; it must finish within 2 seconds",
    "Write tests for the date parser; acceptance: all edge cases around 2024-02-29 covered",
)
RISKY_TEXTS: tuple[str, ...] = (
    "Delete all files in /tmp/cache",
    "Deploy the app to production",
    "Deploy the app to staging",
    "Send the invoice to the client",
    "Send me the report",
    "Email it to me when it's done",
    "Drop the users table and reset the database",
    "Clean up /data by deleting stale files",
    "Pay the electricity bill",
    "Don't delete anything, just list the old files",
    "Transfer 500 EUR to Bob's account",
    "rm -rf build/ and rebuild",
)
PROFILE_TEXTS: tuple[str, ...] = (
    "Never delete files in /data.",
    "I prefer short answers.",
    "You may deploy to staging.",
    "Always answer in English.",
    "Don't ever send emails without asking. I'd like bullet points.",
    "Feel free to run the tests whenever you want",
    "Never delete files in /data. Now clean up /data/tmp please",
)
CONTROL_TEXTS: tuple[str, ...] = (
    "stop",
    "Stop what you are doing.",
    "Wait, cancel that task.",
    "cancel the report",
    "pause",
    "hold on",
    "ok, resume",
    "continue",
    "never mind",
    "forget it",
    "How far along is the current job?",
    "status?",
    "are you done yet?",
    "What's the ETA on the report?",
    "While you're at it, also add a conclusion.",
    "and also include the charts from Q3",
    "Meanwhile, fix the typo in the title",
    "does it cover costs?",
    "what have you got so far?",
    "stop the cleanup",
)
OTHER_TEXTS: tuple[str, ...] = (
    # follow-ups
    "and Berlin?",
    "what about Berlin?",
    "and the second one?",
    "same for the other file",
    "why not?",
    "more",
    "again",
    "the last one",
    "how about tomorrow?",
    "but in Spanish",
    # acknowledgements and vague inputs
    "thanks!",
    "ok",
    "great, thank you",
    "Hmm.",
    "Do the thing.",
    "fix it",
    "That one.",
    "You know what I mean.",
    "this",
    "huh?",
    # urgency and time
    "URGENT: the server is down, check the logs now!",
    "Restart the worker asap",
    "Whenever you have time, clean up the downloads folder",
    "What changed in notes.md today?",
    "What did we decide yesterday about the launch?",
    "Remind me what we said in 2021 about hiring",
    "Show me the latest results from this morning",
    "Find what Bob mentioned a moment ago",
    # code, paths, URLs, numbers, dates
    "Why does `foo.bar()` return None in src/app/main.py line 42?",
    "Fetch https://example.com/api/v2/items?page=3 and show the first 10 items",
    "Open ./scripts/setup.sh and check why it fails on line 17",
    "The deadline moved to 2025-03-14.",
    "Compare revenue: 1,234.56 vs 987.65 (up 25%)",
    "def add(a, b): return a + b  # why does this fail for strings?",
    "Call getUserById(42) and log the result to #ops-alerts",
    "Meeting with @carol on Jan 5th, 2026 at 10:30",
    "The file ~/notes/todo.md has 3 items left",
    "HTTP 503 from the API gateway since 14:02",
    # non-English and mixed
    "Wie spät ist es in Berlin?",
    "Peux-tu résumer ce document en trois phrases ?",
    "¿Dónde está la configuración?",
    "東京の天気はどうですか？",
    "Привет, как дела?",
    "Schreib eine kurze E-Mail an Anna",
    "naïve café résumé – “quoted” text and ‘curly’ quotes",
    # statements
    "The deadline moved to Friday.",
    "My favourite colour is green",
    "Anna's birthday is on the 4th of July",
    "I think the meeting went well",
    # whitespace, punctuation, edge cases
    "",
    "   ",
    "\n\t  \n",
    "?",
    "!!!",
    "...",
    "a",
    "I",
    "  Please   write\n a   poem\tabout   the sea  ",
    "PLEASE FIX THE LOGIN PAGE",
    "please",
    "can you?",
    "stop stop stop",
    "don't",
)
TEXTS: tuple[str, ...] = BASIC_TEXTS + RISKY_TEXTS + PROFILE_TEXTS + CONTROL_TEXTS + OTHER_TEXTS

_LONG_PARTS = ("The quarterly report covers revenue, costs and hiring across three regions. ",
               "Please make sure the summary mentions the Berlin office and the delayed launch. ",
               "Why did costs grow by 12% in Q3 compared to Q2? ",
               "Do not include the draft numbers from /data/draft.xlsx. ")
LONG_TEXTS: tuple[str, ...] = (
    "".join(_LONG_PARTS) * 12,
    "Summarize the following log: " + " ".join(f"line {i}: ERROR timeout at 10:{i % 60:02d}" for i in range(120)),
    "word " * 900,
    "Write a story about " + ", ".join(f"character{i}" for i in range(200)),
)

# --------------------------------------------------------------------------- contexts

RUN1 = [RunningTask(task_id="t1", name="Write the quarterly report", status="running")]
RUN2 = [RunningTask(task_id="t1", name="Write the quarterly report", status="running"),
        RunningTask(task_id="t2", name="Clean up the cache folder", status="active")]
RUN_DONE = [RunningTask(task_id="t9", name="Old export", status="Completed"),
            RunningTask(task_id="t8", name="Failed import", status="failed")]
TURNS_QA = [RecentTurn(text="What is the population of Paris?", mode="qa")]
TURNS_TASK = [RecentTurn(text="How are you?", mode="qa"),
              RecentTurn(text="Summarize the first two chapters of Dune", mode="task")]
TURNS_MIXED = [RecentTurn(text="Write the launch email", mode="task"),
               RecentTurn(text="The login test fails with a KeyError", mode="clarify"),
               RecentTurn(text="", mode="push")]
PROFILE_FULL = UserProfile(preferences=["short answers", "bullet points"],
                           prohibitions=["delete files in /data", "send emails"],
                           permissions=["deploy to staging", "run the tests"])
PROFILE_NO_DELETE = UserProfile(prohibitions=["delete files in /data", "drop tables"])
PROFILE_PERMIT = UserProfile(permissions=["deploy to production", "delete files in /tmp/cache", "pay bills"])
FILE_EVENT = EnvEventRef(kind="file", title="notes.md modified", uri="/home/u/notes.md")
FEED_EVENT = EnvEventRef(kind="feed", title="New article: Kafka 4.0 released", uri="https://news.example/kafka")
ALERT_EVENT = EnvEventRef(kind="api", title="Build failed on main", uri="")
BARE_EVENT = EnvEventRef(kind="other", title="", uri="sensor://temp/1")


def _llm_valid(text: str) -> dict[str, Any]:
    words = text.split()
    return {"mode": "task", "task_type": "generation", "goal": "Do what was asked: " + text[:60],
            "acceptance": ["it reads well"], "constraints": ["under 200 words"], "prohibitions": ["no jargon"],
            "entities": ["Kafka"], "plan_hints": ["llm_hint"], "sub_questions": ["part one?", "part two?"],
            "evidence": [" ".join(words[:2]), "not in the text"], "uncertainty_reasons": ["audience unclear"],
            "urgency": "urgent", "risk": "high", "confidence": 0.9, "needs_clarification": False}


def _llm_partial(text: str) -> dict[str, Any]:
    return {"intent": "Question", "type": "lookup", "confidence": "medium", "evidence_spans": [{"span": text[:8]}, 3]}


def _llm_nested(text: str) -> dict[str, Any]:
    return {"intentStruct": {"mode": "interrupt", "taskType": "debugging", "goal": "  check  " + text[:30] + "  ",
                             "needsClarification": "true", "confidence": {"mode": 0.8, "goal": 0.4, "x": "y"}},
            "extra": 1, "risk": "critical"}


LLM_OUTPUTS: dict[str, Callable[[str], Any]] = {
    "valid": _llm_valid,
    "partial": _llm_partial,
    "nested": _llm_nested,
    "invalid_labels": lambda _t: {"mode": "dance", "task_type": 7, "goal": "", "confidence": float("nan"),
                                  "needs_clarification": "maybe", "entities": "one entity", "acceptance": 5},
    "json_string": lambda t: json.dumps({"mode": "qa", "task_type": "retrieval", "goal": "answer: " + t[:40],
                                         "confidence": 1.7, "risk": "low", "urgency": "none",
                                         "needs_clarification": True}),
    "not_json": lambda _t: "I think the user wants a poem {",
    "list": lambda _t: ["mode", "qa"],
    "goal_only": lambda _t: {"goal": "Just the goal, nothing else", "confidence": True},
}


def _ctx_variants(text: str) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, IntentContext fields, use the prototype bank) for every context the cases draw from."""
    qv = query_vector(text)
    return [
        ("plain", {}, False),
        ("vector", {"query_vector": qv}, True),
        ("vector_no_bank", {"query_vector": qv}, False),
        ("bank_no_vector", {}, True),
        ("run1", {"running_tasks": RUN1}, False),
        ("run2", {"running_tasks": RUN2, "query_vector": qv}, True),
        ("run2_focus", {"running_tasks": RUN2, "focus_task": "t2"}, False),
        ("run_done", {"running_tasks": RUN_DONE, "recent_turns": TURNS_QA}, False),
        ("turns_qa", {"recent_turns": TURNS_QA}, False),
        ("turns_task", {"recent_turns": TURNS_TASK, "query_vector": qv}, True),
        ("turns_mixed_run1", {"recent_turns": TURNS_MIXED, "running_tasks": RUN1}, False),
        ("profile_full", {"profile": PROFILE_FULL}, False),
        ("profile_no_delete", {"profile": PROFILE_NO_DELETE, "running_tasks": RUN1}, False),
        ("profile_permit", {"profile": PROFILE_PERMIT, "query_vector": qv}, True),
        ("env_file", {"recent_env_events": [FILE_EVENT]}, False),
        ("env_trigger", {"recent_env_events": [FEED_EVENT, ALERT_EVENT], "trigger": "env"}, False),
        ("env_many", {"recent_env_events": [FILE_EVENT, FEED_EVENT, BARE_EVENT, ALERT_EVENT]}, True),
        ("llm_valid", {"llm_output": _llm_valid(text), "llm_status": "ok"}, False),
        ("llm_partial", {"llm_output": _llm_partial(text), "llm_status": "ok", "recent_turns": TURNS_QA}, False),
        ("llm_nested", {"llm_output": _llm_nested(text), "running_tasks": RUN2}, False),
        ("llm_invalid", {"llm_output": LLM_OUTPUTS["invalid_labels"](text), "llm_status": "ok"}, False),
        ("llm_json_string", {"llm_output": LLM_OUTPUTS["json_string"](text), "query_vector": qv}, True),
        ("llm_not_json", {"llm_output": "I think the user wants a poem {"}, False),
        ("llm_list", {"llm_output": ["mode", "qa"], "llm_status": "ok"}, False),
        ("llm_goal_only", {"llm_output": LLM_OUTPUTS["goal_only"](text), "profile": PROFILE_FULL}, False),
        ("llm_late", {"llm_status": "late"}, False),
        ("llm_error", {"llm_status": "error", "llm_detail": "model crashed"}, False),
        ("llm_invalid_status", {"llm_status": "invalid"}, False),
        ("llm_ok_no_output", {"llm_status": "ok"}, False),
        ("kitchen_sink", {"query_vector": qv, "running_tasks": RUN2, "recent_turns": TURNS_TASK,
                          "profile": PROFILE_FULL, "recent_env_events": [FILE_EVENT, ALERT_EVENT],
                          "llm_output": _llm_valid(text), "llm_status": "ok"}, True),
    ]


N_VARIANTS = 30
PER_TEXT = 2  # contexts per text, picked by index arithmetic so every variant is used many times

WEIGHTS: dict[str, IntentWeights] = {
    "default": IntentWeights(),
    "strict": IntentWeights(clarify_mode_below=0.6, clarify_task_below=0.5, clarify_goal_below=0.7,
                            confirm_high_risk=False, max_items=3, embed_temperature=0.5),
    "no_prior": IntentWeights(prior=0.0, rules=0.0, structure=1.0, embedding=3.0, llm=0.5),
}


def infer_cases() -> Iterator[tuple[str, str, IntentContext, IntentEngine]]:
    """Yield (case id, text, context, engine) for every golden inference case, in a fixed order."""
    engines = {(w, b): IntentEngine(BANK if b else None, weights) for w, weights in WEIGHTS.items()
               for b in (False, True)}
    texts = list(TEXTS) + list(LONG_TEXTS)
    for i, text in enumerate(texts):
        variants = _ctx_variants(text)
        assert len(variants) == N_VARIANTS
        picks = sorted({(i * 7 + k * 11) % N_VARIANTS for k in range(PER_TEXT)})
        for j in picks:
            name, fields, use_bank = variants[j]
            weights = "strict" if (i + j) % 13 == 0 else "no_prior" if (i + j) % 17 == 0 else "default"
            yield f"{i:03d}/{name}/{weights}", text, IntentContext(**fields), engines[(weights, use_bank)]
    # the inputs whose meaning depends most on the context, under the contexts that change it
    targeted = ((RISKY_TEXTS + PROFILE_TEXTS, ("profile_full", "profile_no_delete", "profile_permit")),
                (CONTROL_TEXTS, ("run1", "run2", "run2_focus")))
    for group, (texts_, names) in enumerate(targeted):
        for i, text in enumerate(texts_):
            by_name = {v[0]: v for v in _ctx_variants(text)}
            for name in names:
                _, fields, use_bank = by_name[name]
                yield f"t{group}/{i:02d}/{name}", text, IntentContext(**fields), engines[("default", use_bank)]
    # environment events with no text and every trigger
    env_sets = {"file": [FILE_EVENT], "alert": [ALERT_EVENT], "bare": [BARE_EVENT],
                "many": [FILE_EVENT, FEED_EVENT, BARE_EVENT, ALERT_EVENT], "none": []}
    for set_name, events in env_sets.items():
        for trigger in ("user", "env"):
            for text in ("", "what happened?"):
                ctx = IntentContext(recent_env_events=events, trigger=trigger, running_tasks=RUN1 if events else [])
                yield f"env/{set_name}/{trigger}/{text or 'empty'}", text, ctx, engines[("default", False)]
    # vectors the bank cannot use: wrong dimension, zero, not finite
    for name, vec in (("short", [1.0, 0.0]), ("zero", [0.0] * DIM), ("nan", [float("nan")] * DIM)):
        ctx = IntentContext(query_vector=vec)
        yield f"badvec/{name}", "Write a haiku about autumn", ctx, engines[("default", True)]


def infer_lines() -> list[str]:
    """One JSON line per inference case: the case id and the intent's exact ``model_dump_json``."""
    return [_line(cid, "intent", engine.infer(text, ctx).model_dump_json())
            for cid, text, ctx, engine in infer_cases()]


def _line(case_id: str, key: str, payload_json: str) -> str:
    return f'{{"case": {json.dumps(case_id)}, "{key}": {payload_json}}}'


# --------------------------------------------------------------------------- plans

TOOLS = [
    ToolSpec(name="web_search", description="search the web", tags=["web", "search"]),
    ToolSpec(name="file_read", description="read a file", tags=["file"]),
    ToolSpec(name="file_delete", description="delete a file", tags=["file"], action=True),
    ToolSpec(name="send_email", description="send an email", action=True),
    ToolSpec(name="calendar", description="read and add calendar events", tags=["calendar", "schedule"]),
    ToolSpec(name="task_control", description="stop, pause or resume a task", tags=["task", "core"]),
    ToolSpec(name="deploy", description="deploy the app", tags=["git"], action=True),
    ToolSpec(name="run_tests", description="run the test suite", tags=["test", "run"]),
]

PLAN_CONTEXTS: dict[str, PlanContext] = {
    "default": PlanContext(),
    "tools": PlanContext(tools=TOOLS, profile=PROFILE_FULL, running_tasks=["Write the quarterly report"]),
    "tools_permit": PlanContext(tools=TOOLS, profile=PROFILE_PERMIT, total_budget=6000, context_size=8192,
                                answer_reserve=1024),
    "tight_ctx": PlanContext(tools=TOOLS[:4], total_budget=3000, context_size=1024, answer_reserve=256,
                             running_tasks=["A", "B", "C", "D", "E"]),
    "bad_reserve": PlanContext(total_budget=500, context_size=300, answer_reserve=400),
    "tiny": PlanContext(total_budget=10, context_size=0, answer_reserve=0, tools=TOOLS[5:]),
}
PLAN_CONFIGS: dict[str, PlanConfig] = {
    "default": PlanConfig(),
    "odd": PlanConfig(high_confidence=0.5, low_confidence=0.45, max_tool_calls=1, min_answer_reserve=300,
                      candidate_pool_cap=50, tokens_per_item=40),
}


def plan_cases() -> Iterator[tuple[str, Intent, PlanContext, PlanBuilder]]:
    """Yield (case id, intent, plan context, builder) for a subset of the inference cases."""
    builders = {name: PlanBuilder(cfg) for name, cfg in PLAN_CONFIGS.items()}
    names = list(PLAN_CONTEXTS)
    for n, (cid, text, ictx, engine) in enumerate(infer_cases()):
        if n % 5:
            continue
        pname = names[(n // 5) % len(names)]
        cname = "odd" if (n // 5) % 7 == 3 else "default"
        yield f"{cid}|{pname}/{cname}", engine.infer(text, ictx), PLAN_CONTEXTS[pname], builders[cname]


def _broken_plan_lines() -> list[str]:
    """``check_plan`` on plans broken by hand, to reach the repairs the builder never needs."""
    engine = IntentEngine()
    builder = PlanBuilder()
    out = []
    for k, text in enumerate(("Delete all files in /tmp/cache", "What is the capital of France?",
                              "Send the invoice to the client", "stop", "fix it")):
        intent = engine.infer(text, IntentContext(running_tasks=RUN1 if k == 3 else []))
        ctx = PLAN_CONTEXTS["tools"]
        for variant in range(4):
            plan = builder.build(intent, ctx).plan.model_copy(deep=True)
            if variant == 0:
                plan.tools.allowed += ["ghost_tool", "send_email", "file_delete", "deploy"]
                plan.budget.tool_calls = 99
            elif variant == 1:
                plan.needs_clarification, plan.clarification_question = True, ""
                plan.retrieval.candidate_pool = 10**6
            elif variant == 2:
                plan.needs_clarification, plan.actions_held_back = False, False
                plan.budget.segments = {"instruction": -5, "evidence": 10}
                plan.budget.total_tokens, plan.budget.answer_reserve = 10**6, 10
            else:
                plan.tools.allowed, plan.tools.blocked = ["run_tests", "web_search"], ["web_search"]
                plan.budget.context_size, plan.budget.answer_reserve = 0, 0
            checked, violations, pruned = check_plan(plan, intent, ctx, PLAN_CONFIGS["default" if k % 2 else "odd"])
            payload = ('{"plan": ' + checked.model_dump_json() + ', "violations": ' + json.dumps(violations)
                       + ', "pruned": ' + json.dumps(pruned) + "}")
            out.append(_line(f"check/{k}/{variant}", "check", payload))
    return out


def plan_lines() -> list[str]:
    """One JSON line per plan case (the ``PlanResult``'s exact ``model_dump_json``), then the checks."""
    lines = [_line(cid, "plan", builder.build(intent, pctx).model_dump_json())
             for cid, intent, pctx, builder in plan_cases()]
    return lines + _broken_plan_lines()


def write() -> None:
    """Write both golden files from the current code."""
    for path, lines in ((INFER_FILE, infer_lines()), (PLAN_FILE, plan_lines())):
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(lines)} cases, {path.stat().st_size} bytes")


if __name__ == "__main__":
    write()
