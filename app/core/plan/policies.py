"""Policy sections of a candidate plan that follow from the intent alone (seed 000 §3.4.4).

:class:`app.core.plan.builder.PlanBuilder` draws every candidate from a recall preset; the
sections here depend on the intent (and the preset) only: how much branch history to include
(``history_policy``), how the turn runs beside running tasks (``concurrency_policy``) and the
soft retrieval filters drawn from the intent's words (``retrieval_filters``). ``dedup_stripped``
is the list clean-up the builder shares. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.intent.model import Intent, Mode, Risk, TaskType
from app.core.plan.model import (
    Band,
    ConcurrencyPolicy,
    HistoryPolicy,
    MergeRule,
    RecallPreset,
    RetrievalFilters,
)
from app.core.text.words import content_stems, stem

_AUTHOR_RE = re.compile(r"\b([A-Z][a-z]+)(?:'s\b|\s+(?:said|say|says|told|tell|wrote|write|mentioned|mention|"
                        r"asked|ask|thinks?|thought|suggested)\b)|\b(?:from|by)\s+([A-Z][a-z]+)\b")
_KIND_WORDS = {"file": {"file", "fil", "folder", "document", "doc"}, "feed": {"feed", "new", "article", "rss", "post"},
               "api": {"api", "endpoint", "metric", "valu"}, "task": {"task", "todo", "job"},
               "memory": {"remember", "memory", "memori", "not"}}




def dedup_stripped(items: Sequence[str]) -> list[str]:
    """Return the non-blank ``items``, stripped, without case-insensitive repeats, in order of first use."""
    seen: dict[str, str] = {}
    for item in items:
        if item.strip() and item.strip().lower() not in seen:
            seen[item.strip().lower()] = item.strip()
    return list(seen.values())


SUMMARY_LEVELS = ("brief", "standard", "detailed")


def summary_level(intent: Intent, strategy: Band, budget: int) -> str:
    """The level the branch beyond the raw turns is summarized at: by budget (brief under 512
    tokens, standard under 1536, else detailed), one level finer when the intent is unsure (a
    wide plan), brief for an interruption or a standalone lookup (evidence answers those)."""
    level = 0 if budget < 512 else 1 if budget < 1536 else 2
    if strategy == "wide":
        level = min(2, level + 1)
    lookup = intent.mode == Mode.QA and intent.task_type == TaskType.RETRIEVAL and "follow_up" not in intent.plan_hints
    if intent.mode == Mode.INTERRUPT or lookup:
        level = 0
    return SUMMARY_LEVELS[level]


def history_policy(intent: Intent, preset: RecallPreset, strategy: Band, clarify: bool, budget: int = 0) -> HistoryPolicy:
    """Return how much of the branch to include: the preset's turns, more for a follow-up or a
    question back, fewer for a standalone lookup or an interruption; and the summary level of
    the rest (``summary_level``; none without a budget)."""
    follow_up = "follow_up" in intent.plan_hints
    turns = preset.main_chain_turns + (2 if follow_up or clarify else 0)
    if intent.mode == Mode.QA and intent.task_type == TaskType.RETRIEVAL and not follow_up:
        turns = min(turns, 2)  # a standalone lookup is answered by evidence, not by the branch
    if intent.mode == Mode.INTERRUPT:
        turns = min(turns, 4)
    if strategy == "wide" or intent.task_type == TaskType.PLANNING:
        turns += 2  # low confidence or a plan: more of the branch
    return HistoryPolicy(main_chain_turns=turns, summary_level=summary_level(intent, strategy, budget) if budget else "none")


def concurrency_policy(intent: Intent, tasks_running: bool) -> ConcurrencyPolicy:
    """Return how the turn runs beside running tasks (``ConcurrencyPolicy``): control the target
    (pause, resume, stop, cancel), fold an amendment into it, answer beside it at once (a question
    about it, or any question while it runs), run a new task beside it (after it, when the new
    one is risky), or continue the branch."""
    target = intent.hint("target_task")
    control = intent.hint("control")
    if intent.mode == Mode.INTERRUPT and control:
        return ConcurrencyPolicy(allow_concurrent=False, allow_interrupt=True, merge_rule=MergeRule.CONTROL,
                                 target_task=target, control=control)
    if intent.mode == Mode.INTERRUPT and "amend_running_task" in intent.plan_hints:
        return ConcurrencyPolicy(allow_concurrent=True, allow_interrupt=True,
                                 merge_rule=MergeRule.FOLD_INTO_TASK, target_task=target)
    if intent.mode == Mode.INTERRUPT or (intent.mode == Mode.QA and tasks_running):
        return ConcurrencyPolicy(allow_concurrent=True, allow_interrupt=True, merge_rule=MergeRule.NEW_BRANCH,
                                 target_task=target)
    if intent.mode == Mode.PUSH:
        return ConcurrencyPolicy(allow_concurrent=True, allow_interrupt=False, merge_rule=MergeRule.NEW_BRANCH)
    if intent.mode == Mode.TASK and tasks_running:
        return ConcurrencyPolicy(allow_concurrent=intent.risk != Risk.HIGH, allow_interrupt=False,
                                 merge_rule=MergeRule.NEW_BRANCH)
    return ConcurrencyPolicy(allow_concurrent=True, allow_interrupt=True, merge_rule=MergeRule.APPEND)


def retrieval_filters(intent: Intent) -> RetrievalFilters:
    """Return the filters of the structured channel: authors the text cites ("Anna said", "from
    Bob") that are also entities, and kinds of item its words name (file, feed, api, task, memory)."""
    authors = [a for m in _AUTHOR_RE.finditer(intent.text) for a in m.groups() if a and a in intent.entities]
    words = set(content_stems(intent.text)) | {stem(e.rsplit(".", 1)[-1]) for e in intent.entities if "." in e}
    kinds = [k for k, ws in _KIND_WORDS.items() if words & ws]
    if any("/" in e or "." in e for e in intent.entities) and "file" not in kinds:
        kinds.insert(0, "file")
    return RetrievalFilters(authors=dedup_stripped(authors), kinds=[k for k in _KIND_WORDS if k in kinds])
