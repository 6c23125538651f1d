"""The tasks section of the prompt: the task stack around the frame a build works in, or the
running tasks an interruption is about.

The stack itself and which frame a build works in are the tasks stage's
(``app.core.tasks.stack``: ``decide``, ``decision_view``); this section is given what it shows of
them (``TaskSection``) and makes the lines, every one bound to task evidence:

- a frame (``StackView``), under "Task stack:": the root goal (must), the goals on the path
  between root and frame (high), the frame's name, acceptance and status (must), its progress
  and notes (high); under "Task results:", the results of its completed subtasks and siblings
  (medium) — only their result summary, nothing of their work — and failed ones with their
  reason (low). ``demote`` lowers every priority by that many steps (a Q&A turn inside a task's
  branch gets the stack as background);
- a running task an interruption is about (``Running``), under "Running tasks:": its name and
  status with progress (must), acceptance (high), the output so far (high, bound to the
  snapshot evidence of the partial output);
- a task build's step instruction (must): answer in numbered steps for a new task; for a
  stream that runs an existing task (a step of its plan, or a task resumed from its checkpoint),
  the constraints that joined it ("Constraint: …", must), the env events that reached it while it
  ran ("Changed meanwhile: …", must, bound to the event), the work kept at its checkpoint
  (must, bound to the checkpoint evidence) and an instruction to do that step, or to continue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.context.compiler import Item
from app.core.types import BlockType, Priority, Task, TaskStatus

STEP_INSTRUCTION = "Work on the current task: answer in short numbered steps."
RUN_INSTRUCTION = "Work on the current step only: write its part of the task's result."
CONTINUE_INSTRUCTION = "Continue the work so far from where it stops, without repeating it."


@dataclass(frozen=True)
class Progress:
    """A task's stream as a build saw it: steps and tokens so far, the latest output, and the
    evidence a snapshot of that output gets when the context cites it."""

    steps: int = 0
    tokens: int = 0
    max_tokens: int = 0
    partial: str = ""
    evidence_id: str = ""


@dataclass(frozen=True)
class StackView:
    """The task stack around one frame: ``path`` from the root to the frame, the tasks ``around``
    it (its subtasks, then its siblings), the frame's ``progress``; ``demote`` and ``order`` place
    the lines."""

    path: tuple[Task, ...]
    around: tuple[Task, ...] = ()
    progress: Progress | None = None
    demote: int = 0
    order: int = 1000
    # A stream running an existing task: what changed meanwhile (env event id, its fenced note)
    # and the work kept at its checkpoint (evidence id, text), which it continues.
    changes: tuple[tuple[str, str], ...] = ()
    checkpoint: tuple[str, str] | None = None


@dataclass(frozen=True)
class Running:
    """A running task an interruption is about, with its stream's progress."""

    task: Task
    progress: Progress | None = None


@dataclass(frozen=True)
class TaskSection:
    """What the tasks section shows: the running tasks an interruption is about, a frame of the
    stack, and, for a task build, the new frame whose step instruction closes the section."""

    running: tuple[Running, ...] = ()
    stack: StackView | None = None
    instruction_for: str | None = None
    instruction: str = STEP_INSTRUCTION


def result_refs(task: Task) -> tuple[str, ...]:
    """The evidence a popped task's result line is bound to (its result evidence, else its own:
    a task's goal, acceptance and progress lines are bound to its id)."""
    return tuple(task.result_evidence_ids) or (task.task_id,)


def task_items(section: TaskSection) -> list[Item]:
    """The section's lines: the running tasks, the frame's stack, the step instruction."""
    items = running_items(section.running) if section.running else []
    if section.stack is not None:
        items += stack_items(section.stack)
    if section.instruction_for is not None:
        items.append(Item(f"task:{section.instruction_for}:instruction", BlockType.PLAN, section.instruction,
                          Priority.MUST, score=1.0, group="Task stack:", order=999,
                          evidence_ids=(section.instruction_for,)))
    return items


def _demote(priority: Priority, steps: int) -> Priority:
    order = [Priority.MUST, Priority.HIGH, Priority.MEDIUM, Priority.LOW]
    return order[min(len(order) - 1, order.index(priority) + steps)]


def stack_items(view: StackView) -> list[Item]:
    """The lines of a frame of the stack (see the module docstring)."""
    frames, current = view.path, view.path[-1]
    items: list[Item] = []

    def add(key: str, segment: BlockType, text: str, priority: Priority, refs: tuple[str, ...], group: str) -> None:
        items.append(Item(f"task:{key}", segment, text, _demote(priority, view.demote), score=1.0,
                          group=group, order=view.order + len(items), evidence_ids=refs))

    stack_group, results_group = "Task stack:", "Task results:"
    if len(frames) > 1:
        root = frames[0]
        add(f"{root.task_id}:root", BlockType.PLAN, f"Root goal: {root.name}", Priority.MUST, (root.task_id,), stack_group)
        for depth, frame in enumerate(frames[1:-1], start=1):
            add(f"{frame.task_id}:path", BlockType.PLAN, f"{'  ' * depth}> {frame.name} ({frame.status.value})",
                Priority.HIGH, (frame.task_id,), stack_group)
    indent = "  " * (len(frames) - 1)
    add(f"{current.task_id}:current", BlockType.PLAN, f"{indent}Current task: {current.name} ({current.status.value})",
        Priority.MUST, (current.task_id,), stack_group)
    if current.acceptance:
        add(f"{current.task_id}:acceptance", BlockType.PLAN, f"{indent}Done when: {current.acceptance}",
            Priority.MUST, (current.task_id,), stack_group)
    seen = view.progress
    if seen is not None:
        add(f"{current.task_id}:progress", BlockType.PLAN,
            f"{indent}Progress: {seen.steps} steps, {seen.tokens}/{seen.max_tokens or '?'} tokens",
            Priority.HIGH, (current.task_id,), stack_group)
    for n, note in enumerate(current.notes):
        add(f"{current.task_id}:note:{n}", BlockType.PLAN, f"{indent}Note: {note}", Priority.HIGH,
            (current.task_id,), stack_group)
    for key, segment, text, refs in steering_lines(view, indent):
        add(key, segment, text, Priority.MUST, refs, stack_group)
    for task in view.around:
        if task.status == TaskStatus.COMPLETE:
            add(f"{task.task_id}:result", BlockType.STATE, f"Done: {task.name} → {task.result_summary or 'no result'}",
                Priority.MEDIUM, result_refs(task), results_group)
        elif task.status == TaskStatus.FAILED:
            add(f"{task.task_id}:failed", BlockType.STATE, f"Failed: {task.name} ({task.error or 'no reason'})",
                Priority.LOW, (task.task_id,), results_group)
    return items


def steering_lines(view: StackView, indent: str) -> list[tuple[str, BlockType, str, tuple[str, ...]]]:
    """The must lines a frame owes to its steering: the constraints that joined it or the task it
    is a step of, what changed meanwhile, the work kept at its checkpoint (key, segment, text, refs)."""
    lines: list[tuple[str, BlockType, str, tuple[str, ...]]] = [
        (f"{frame.task_id}:constraint:{n}", BlockType.PLAN, f"{indent}Constraint: {constraint}", (frame.task_id,))
        for frame in view.path for n, constraint in enumerate(frame.constraints)]
    lines += [(f"{event_id}:change", BlockType.EVIDENCE, f"Changed meanwhile: {note}", (event_id,))
              for event_id, note in view.changes]
    if view.checkpoint is not None:
        evidence_id, text = view.checkpoint
        lines.append((f"{view.path[-1].task_id}:checkpoint", BlockType.STATE, f"{indent}Work so far: {text}",
                      (evidence_id,)))
    return lines


def running_items(running: Sequence[Running], *, order: int = 2000) -> list[Item]:
    """The lines stating each running task an interruption is about (see the module docstring)."""
    items: list[Item] = []
    for seen in running:
        task, state, base = seen.task, seen.progress, order + 100 * len(items)

        def add(key: str, text: str, priority: Priority, refs: tuple[str, ...]) -> None:
            items.append(Item(f"running:{task.task_id}:{key}", BlockType.STATE, text, priority, score=1.0,
                              group="Running tasks:", order=base + len(items), evidence_ids=refs))

        progress = f", {state.steps} steps, {state.tokens}/{state.max_tokens or '?'} tokens" if state else ""
        add("status", f"Running task: {task.name} ({task.status.value}{progress})", Priority.MUST, (task.task_id,))
        if task.acceptance:
            add("acceptance", f"  Done when: {task.acceptance}", Priority.HIGH, (task.task_id,))
        if state is not None and state.partial.strip() and state.evidence_id:
            text = " ".join(state.partial.split())
            add("partial", f"  Output so far: …{text}" if state.tokens > 0 else f"  Output so far: {text}",
                Priority.HIGH, (state.evidence_id,))
    return items
