"""A task as steps: the model proposes them as JSON, rules check them, rules make them otherwise.

``STEPS_JSON_SCHEMA`` is what the model is asked for (``steps_messages``: the task's context with
an instruction to plan instead of to answer): 2–7 steps, each a ``name`` (what to do), an
``acceptance`` line (when it is done) and ``depends_on`` (numbers of earlier steps it needs).
``read_steps`` takes whatever came back; ``check_steps`` says what breaks the rules (2–7 steps,
a name of words and an acceptance line for each, names told apart, ``depends_on`` naming
earlier steps only — which also keeps the plan acyclic); a proposal that fails the check is
replaced by ``rule_steps``: the actions the request lists (``split_actions``), or a gather →
draft → check plan of its goal. ``plan_for`` does all of that and says where the plan came from.

``plan_text`` is the task turn's answer (the plan as the user reads it), ``assemble`` the
parent's result once its steps are done: each step's output under its name. Pure and
deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from app.core.intent.cues import is_task_verb
from app.core.ports import ChatMessage
from app.core.text.sentences import split_actions

MIN_STEPS, MAX_STEPS = 2, 7
_TEXT = "^[A-Za-z0-9][^{}\\[\\]\"\\\\\n]*$"  # words, no JSON punctuation: the grammar keeps the model to it
STEPS_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array", "minItems": MIN_STEPS, "maxItems": MAX_STEPS,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 3, "maxLength": 80, "pattern": _TEXT},
                    "acceptance": {"type": "string", "minLength": 3, "maxLength": 120, "pattern": _TEXT},
                    "depends_on": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS},
                                   "maxItems": 3},
                },
                "required": ["name", "acceptance", "depends_on"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["steps"],
    "additionalProperties": False,
}
PLAN_INSTRUCTION = (
    "Do not answer yet: split the task of the last message into 2 to 7 ordered steps. For each step "
    "give its name (a short imperative: what to do), its acceptance (one line: when it is done) and "
    "depends_on (the numbers of earlier steps it needs, [] for none). Answer in JSON only.")
PLAN_MAX_TOKENS = 320  # the JSON of seven short steps


class Step(BaseModel):
    """One step of a plan: what to do, when it is done, the (1-based) earlier steps it needs."""

    name: str
    acceptance: str = ""
    depends_on: list[int] = Field(default_factory=list)


class StepPlan(BaseModel):
    """A task's plan: its steps, where they came from ("model" or "rules"), and what was wrong
    with the model's proposal when the rules made them."""

    steps: list[Step]
    source: str = "rules"
    problems: list[str] = Field(default_factory=list)
    proposal: str = ""  # the model's answer as it came (logged with the plan)


def steps_messages(prompt: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The planning call's messages: the task's compiled context with ``PLAN_INSTRUCTION`` as
    the system message (the context's own system message is replaced)."""
    rest = [m for m in prompt if m["role"] != "system"]
    return [{"role": "system", "content": PLAN_INSTRUCTION}, *rest]


def read_steps(raw: Any) -> tuple[list[Step], list[str]]:
    """The steps of the model's answer (parsed JSON, or its text), and why none could be read."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return [], ["the answer is not JSON"]
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        return [], ["the answer has no list of steps"]
    steps: list[Step] = []
    for n, item in enumerate(raw["steps"], start=1):
        try:
            step = Step.model_validate(item)
        except ValidationError:
            return [], [f"step {n} is not a name, an acceptance line and depends_on"]
        steps.append(step.model_copy(update={"name": " ".join(step.name.split()),
                                             "acceptance": " ".join(step.acceptance.split())}))
    return steps, []


_WORD = re.compile(r"[A-Za-z]{2,}")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def check_steps(steps: Sequence[Step], goal: str = "") -> list[str]:
    """What breaks the rules of a plan (empty: it passes): 2–7 steps; each named by two words or
    more (not the task's goal again, no two alike) with an acceptance line of two words or more;
    ``depends_on`` naming earlier steps only (so the plan has no cycle)."""
    problems = []
    if not MIN_STEPS <= len(steps) <= MAX_STEPS:
        problems.append(f"{len(steps)} steps (a plan has {MIN_STEPS} to {MAX_STEPS})")
    seen: set[tuple[str, ...]] = set()
    whole = tuple(_words(goal))
    for n, step in enumerate(steps, start=1):
        words = tuple(_words(step.name))
        if len(words) < 2:
            problems.append(f"step {n}: its name says nothing ({step.name!r})")
        elif words in seen or words == whole:
            problems.append(f"step {n}: its name repeats {'the task' if words == whole else 'another step'}")
        seen.add(words)
        if len(_words(step.acceptance)) < 2:
            problems.append(f"step {n}: no acceptance line ({step.acceptance!r})")
        if any(not 1 <= d < n for d in step.depends_on):
            problems.append(f"step {n}: depends on {step.depends_on}, not only on earlier steps")
    return problems


_ACTION_VERBS = frozenset("book buy order pick choose invite call research collect gather review test prepare "
                          "set pack print label ask email confirm reserve decide estimate measure read note "
                          "sort share tidy visit contact arrange finish start file archive clean".split())


def _is_action(clause: str) -> bool:
    head = clause.split(" ", 1)[0].strip(",:").lower()
    return is_task_verb(head) or head in _ACTION_VERBS


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip(" .,;:")
    return text[:1].upper() + text[1:]


def _listed(goal: str) -> list[str]:
    """The actions a request lists ("plan and draft the agenda": plan the agenda, draft it); a
    bare verb borrows the object of the action after it. Empty unless it lists 2–7."""
    clauses = [c for c in split_actions(goal) if c]
    if len(clauses) < MIN_STEPS or not all(_is_action(c) for c in clauses):
        return []
    out = []
    for n, clause in enumerate(clauses):
        if " " not in clause and n + 1 < len(clauses) and " " in clauses[n + 1]:
            clause = f"{clause} {clauses[n + 1].split(' ', 1)[1]}"
        out.append(_sentence(clause))
    return out if MIN_STEPS <= len(out) <= MAX_STEPS and len(set(out)) == len(out) else []


#: How the answer should look, not what to do: left out of the steps' names.
_FORMAT_RE = re.compile(r"\s+(?:with|in|as)\s+(?:short\s+)?(?:numbered\s+)?(?:steps|bullets|bullet points|a list)\b\.?",
                        re.IGNORECASE)


def rule_steps(goal: str, acceptance: str = "") -> list[Step]:
    """The rules' plan of a task: one step per action its request lists, each after the one before;
    otherwise three: gather what the goal needs, do it, check the result against the goal."""
    goal = _FORMAT_RE.sub("", goal)
    listed = _listed(goal)
    if listed:
        return [Step(name=name, acceptance=f"the result of \u201c{name}\u201d is written out",
                     depends_on=[n] if n else []) for n, name in enumerate(listed)]
    what = _sentence(goal)[:100] or "The task"
    lowered = what[:1].lower() + what[1:]
    return [
        Step(name=f"Gather what is needed to {lowered}"[:120],
             acceptance="the facts, inputs and open questions are listed"),
        Step(name=f"Write the result: {lowered}"[:120], acceptance=acceptance or "a complete first version is written",
             depends_on=[1]),
        Step(name="Check the result against the task", acceptance="every part of the task and its constraints "
             "is covered, and gaps are named", depends_on=[2]),
    ]


def plan_for(goal: str, acceptance: str, proposal: Any) -> StepPlan:
    """The steps of a task: the model's ``proposal`` when it passes ``check_steps``, else the
    rules' (``rule_steps``), with what was wrong with the proposal. ``proposal`` None: the model
    was not asked (the rules' plan, no problem noted)."""
    if proposal is None:
        return StepPlan(steps=rule_steps(goal, acceptance), source="rules")
    steps, problems = read_steps(proposal)
    problems = problems or check_steps(steps, goal)
    if not problems:
        return StepPlan(steps=steps, source="model")
    return StepPlan(steps=rule_steps(goal, acceptance), source="rules", problems=problems)


def plan_text(name: str, plan: StepPlan) -> str:
    """The plan as the task turn answers it: its steps, their acceptance and what each waits for."""
    who = "proposed by the model" if plan.source == "model" else "made by rules"
    lines = [f"Plan for \u201c{name}\u201d ({len(plan.steps)} steps, {who}):"]
    for n, step in enumerate(plan.steps, start=1):
        after = f" (after {', '.join(str(d) for d in step.depends_on)})" if step.depends_on else ""
        lines.append(f"{n}. {step.name}{after} \u2014 done when: {step.acceptance}")
    return "\n".join(lines)


def assemble(name: str, parts: Sequence[tuple[str, str]]) -> str:
    """A task's result from its steps' outputs: each under its step's name, in plan order."""
    sections = [f"{n}. {step}\n{output.strip()}" for n, (step, output) in enumerate(parts, start=1)]
    return f"{name}\n\n" + "\n\n".join(sections)
