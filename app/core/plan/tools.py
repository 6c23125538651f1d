"""Tool policy of a Context Plan, and the clarification question (seed 000 §3.6.4).

``ToolSpec`` describes a tool; ``tool_relevance`` scores it against an intent (name and tags
against the task type's tool words, plus words shared with the goal), ``tool_matches_statement``
says whether a profile statement ("never send emails") names it, and ``filter_tools`` /
``explain_tools`` give the subset to show the model and why. ``clarification_question`` asks the
one question that resolves the intent's most important uncertainty. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from app.core.intent.model import Intent, Mode, r4
from app.core.plan.model import ContextPlan
from app.core.text.words import content_stems, stem, tokenize


class ToolSpec(BaseModel):
    """A tool the model may call; ``action`` marks tools that change things (write, send, delete)."""

    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    action: bool = False


_TOOL_WORDS: dict[str, frozenset[str]] = {
    k: frozenset(stem(w) for w in v.split())
    for k, v in {
        "retrieval": "search find query lookup fetch read get list browse web db database file docs index recall",
        "generation": "write draft generate create template format render translate summarize",
        "change": "edit write patch rename move delete create update git code file run apply replace",
        "diagnostic": "log logs run test debug trace inspect read query shell profile monitor status",
        "planning": "calendar todo task schedule plan list reminder",
        "interrupt": "task cancel stop pause resume status",
    }.items()
}


#: A file name the input mentions ("notes/plan.md", "sales_q3.csv"): an extension starts with a letter.
_FILE_RE = re.compile(r"(?<![\w@])(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")
_READS_FILES = frozenset({stem("read"), stem("file")})


def names_file(intent: Intent) -> bool:
    """True when the input itself names a file (reference material to read)."""
    return bool(_FILE_RE.search(intent.text))


# --------------------------------------------------------------------------- relevance and filtering


def _name_stems(tool: ToolSpec) -> list[str]:
    raw = tool.name.replace("_", " ").replace("-", " ").replace(".", " ")
    return [stem(w) for w in tokenize(raw) if len(w) > 1]


def _same(a: str, b: str) -> bool:
    return a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))


def tool_matches_statement(tool: ToolSpec, statement: str) -> bool:
    """True when ``statement`` ("send emails") names ``tool`` ("send_email"): verbatim, or every
    word of the tool's name appears in it (prefix-tolerant: "pay" ~ "payment")."""
    if tool.name.lower() in statement.lower():
        return True
    names = _name_stems(tool)
    words = content_stems(statement)
    return bool(names) and all(any(_same(n, w) for w in words) for n in names)


def tool_relevance(tool: ToolSpec, intent: Intent) -> tuple[float, list[str]]:
    """Coarse, explainable relevance of a tool to an intent: (score, reasons); 0 means irrelevant."""
    tags = {t.lower() for t in tool.tags}
    words = set(_name_stems(tool)) | {stem(t) for t in tags}
    score, reasons = 0.0, []
    if tags & {"always", "core"}:
        score, reasons = 1.0, ["always available"]
    if intent.mode == Mode.CLARIFY:
        return score, reasons
    key = "interrupt" if intent.mode == Mode.INTERRUPT else intent.task_type.value
    hits = sorted(words & _TOOL_WORDS.get(key, frozenset()))
    if hits:
        score += min(3, len(hits))
        reasons.append(f"{key} ~ {', '.join(hits)}")
    if _READS_FILES <= words and names_file(intent):
        score += 2.0  # named reference material is read by rule, whatever the task type
        reasons.append("the input names a file")
    goal_words = set(content_stems(intent.goal + " " + " ".join(intent.entities)))
    goal_hits = sorted(goal_words & (words | set(content_stems(tool.description))))
    if goal_hits:
        score += 0.5 * min(4, len(goal_hits))
        reasons.append(f"goal mentions {', '.join(goal_hits)}")
    return r4(score), reasons


def filter_tools(registry: Sequence[ToolSpec], intent: Intent, plan: ContextPlan) -> list[ToolSpec]:
    """The relevant subset of ``registry`` to show the model (seed 000 §3.6.4).

    Blocked tools are never returned; action tools are dropped while actions are held back; the
    rest is kept when relevant to the intent, most relevant first (ties by name).
    """
    blocked = set(plan.tools.blocked)
    scored = []
    for tool in registry:
        if tool.name in blocked or (tool.action and plan.actions_held_back):
            continue
        score, _ = tool_relevance(tool, intent)
        if score > 0 or tool.name in plan.tools.allowed:
            scored.append((-score, tool.name, tool))
    return [t for _, _, t in sorted(scored, key=lambda x: (x[0], x[1]))]


def explain_tools(registry: Sequence[ToolSpec], intent: Intent, plan: ContextPlan) -> list[dict[str, object]]:
    """Per tool: included or not, its relevance score and the reasons (for the intent panel)."""
    included = {t.name for t in filter_tools(registry, intent, plan)}
    out: list[dict[str, object]] = []
    for tool in registry:
        score, reasons = tool_relevance(tool, intent)
        if tool.name in plan.tools.blocked:
            reasons = ["blocked"] + reasons
        elif tool.action and plan.actions_held_back:
            reasons = ["action held back"] + reasons
        out.append({"name": tool.name, "included": tool.name in included, "score": score, "reasons": reasons})
    return out


# --------------------------------------------------------------------------- clarification

_PHRASE = {"qa": "answer a question", "task": "carry out a task", "interrupt": "change the task that is running",
           "push": "look at the recent changes", "clarify": "wait for more detail",
           "retrieval": "look something up", "generation": "write something new", "change": "change something",
           "diagnostic": "find out what went wrong", "planning": "make a plan"}


def _top2(dist: Mapping[str, float]) -> list[str]:
    return sorted(dist, key=lambda k: (-dist[k], k))[:2]


def clarification_question(intent: Intent, running_tasks: Sequence[str] = ()) -> str:
    """One question that resolves the most important uncertainty of ``intent`` (deterministic)."""
    details: dict[str, str] = {}
    for r in intent.uncertainty_reasons:
        code, _, detail = r.partition(":")
        details.setdefault(code, detail.strip())
    goal = intent.goal or "this"
    if "prohibition_conflict" in details:
        return (f"Your profile says \"{details['prohibition_conflict']}\", and this request seems to go against "
                f"it. Should I go ahead anyway, or change the request?")
    if "high_risk_action" in details:
        return (f"This would {details['high_risk_action']} something, which is hard to undo. "
                f"Should I go ahead with \"{goal}\"?")
    if "ambiguous_task" in details:
        names = ", ".join(f"\"{n}\"" for n in running_tasks[:4])
        return f"Several tasks are running{': ' + names if names else ''}. Which one do you mean?"
    if "empty_input" in details:
        return "What would you like me to do?"
    if "vague_goal" in details:
        if intent.entities:
            return f"What exactly would you like me to do with {intent.entities[0]}?"
        return "I couldn't tell what this refers to. Could you say a bit more about what you want?"
    for code, fld in (("low_mode_confidence", "mode"), ("low_task_confidence", "task_type")):
        if code in details and len(intent.distribution.get(fld, {})) >= 2:
            a, b = _top2(intent.distribution[fld])
            return f"Should I {_PHRASE.get(a, a)} or {_PHRASE.get(b, b)} here?"
    return f"Just to check before I start: you want me to {goal.rstrip('?.')}? Anything I should know first?"
