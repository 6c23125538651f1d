"""Steering a task while it runs: what an amendment says, where it takes effect, what the card says.

The user (or a changed file) may pause, resume, amend or cancel a task. The engine applies those
(``app.core.engine.agent``); the pure rules it applies are here:

- ``root_task``: a step is steered through its task (pausing "the task" pauses its plan);
- ``amendment``: the words of an amendment as a constraint ("While you're at it, also add a budget
  section" → "add a budget section"); ``added_step``: the step an amendment that asks for more
  adds to the plan ("Add a budget section", done when the result has one);
- ``amend_effect``: where an amendment takes effect — at the next step that has not started
  ("next_step"), by restarting the running step from its checkpoint ("restart"), or when the
  paused task is resumed ("on_resume");
- ``card_line``: the line a task's card shows about it (paused, amended and where, restarted).

Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from app.core.tasks.stack import TaskStack
from app.core.tasks.steps import Step
from app.core.types import Task, TaskStatus

_CUE_RE = re.compile(r"^(?:(?:ok|okay|oh|and|also|please|hey)[,]?\s+)*(?:while you'?re at it|while you are at it|"
                     r"in the meantime|meanwhile|and also|also)[,:]?\s+(?:please\s+)?(?:also\s+)?", re.IGNORECASE)
_ADD_RE = re.compile(r"^(?:please\s+)?(?:add|include|put in|write|cover|insert|append|make sure (?:it|there) "
                     r"(?:has|includes?|covers?))\s+(?P<what>.{3,100}?)\s*[.!]?$", re.IGNORECASE)
NEXT_STEP, RESTART, ON_RESUME = "next_step", "restart", "on_resume"


def root_task(stack: TaskStack, task_id: str) -> Task:
    """The task a control addresses: a step's task (its parent), else the task itself."""
    task = stack.get(task_id)
    if task.step and task.parent_task_id is not None and task.parent_task_id in stack:
        return stack.get(task.parent_task_id)
    return task


def amendment(text: str) -> str:
    """An amendment's words as a constraint: the cue that introduced it left out, one line."""
    words = " ".join(text.split()).strip()
    body = _CUE_RE.sub("", words).strip().rstrip(".!")
    return (body[:1].lower() + body[1:]) if body else words


def added_step(constraint: str) -> Step | None:
    """The step an amendment adds to a plan when it asks for more ("add a budget section" →
    "Add a budget section", done when the result has it); None for other amendments."""
    m = _ADD_RE.match(constraint)
    if m is None:
        return None
    what = m.group("what").strip().rstrip(".!")
    what = re.sub(r"^(?:also|too)\s+", "", what, flags=re.IGNORECASE)
    return Step(name=f"Add {what}", acceptance=f"the result has {what}")


def amend_effect(stack: TaskStack, root: Task, live: Collection[str]) -> str:
    """Where an amendment of ``root`` takes effect: the next step not started yet, else a
    restart of what runs now (``live``: the task ids whose streams run) from its checkpoint, else
    when the paused (or waiting) task runs again."""
    steps = stack.steps(root.task_id)
    if any(s.status == TaskStatus.PENDING and not s.attempts for s in steps):
        return NEXT_STEP
    running = [s.task_id for s in steps if s.task_id in live] or ([root.task_id] if root.task_id in live else [])
    return RESTART if running else ON_RESUME


_EFFECT_WORDS = {NEXT_STEP: "takes effect at the next step", RESTART: "the running step restarts from its checkpoint",
                 ON_RESUME: "takes effect when the task runs again"}


def amended_note(constraint: str, effect: str) -> str:
    """The note an amendment leaves on its task: what it says and where it takes effect."""
    return f"amended: {constraint} ({_EFFECT_WORDS.get(effect, effect)})"


def card_line(task: Task, steps: list[Task]) -> str:
    """What a task's card says of its state beyond the status: paused (with its checkpoint),
    the latest amendment and where it took effect, its plan's progress."""
    parts = []
    if task.paused:
        parts.append("paused" + (" (work so far kept)" if task.checkpoint_id else ""))
    amended = [n for n in task.notes if n.startswith("amended: ")]
    if amended:
        parts.append(amended[-1])
    kept = [s for s in steps if s.attempts or s.status != TaskStatus.FAILED]  # (a removed step never ran)
    if kept:
        done = sum(1 for s in kept if s.status == TaskStatus.COMPLETE)
        parts.append(f"{done}/{len(kept)} steps done")
    return "; ".join(parts)
