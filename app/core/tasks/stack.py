"""Tasks as a stack (../shared/seeds/003): frames with a parent, a status and, once popped, a result.

``TaskStack`` holds the ``Task`` records of one session in creation order and applies the task
operations to them (create, start, block, complete, fail); every operation returns the records it
changed, so the caller can persist exactly those, in order. The rules it keeps:

- a child is created only under an open parent (pending, active, blocked), and a parent's
  children are listed in creation order;
- statuses move along ``TRANSITIONS``; complete and failed are final;
- a frame is popped only when nothing is open above it: completing a task whose subtasks are still
  open parks it as blocked with its result drafted, and the last subtask to finish completes it;
  failing a task fails its open subtasks;
- once popped, a task contributes only its result summary (bound to its result evidence) to
  the context of its parent and siblings;
- a task may have a plan: children with ``step`` 1, 2, … that ``depends_on`` earlier steps; its
  steps may run side by side (``ready_steps``: pending ones whose dependencies completed); the
  steering operations pause (blocked, ``paused``, the checkpoint kept), resume, amend (a
  constraint joins), count a run of a task, note an env event that reached it, rename a step
  not started or drop it from the plan (``app.core.tasks.steering`` says when to use them).

``decide`` picks the frame a build works in, from its mode and anchor chain; it is pure, so
replay reproduces it from the recorded ``TaskInputs`` (a stream that runs an existing task — a step,
a task resumed — says so in ``TaskInputs.run``). ``decision_view`` says what the prompt's
tasks section shows of the decision (``app.core.context.sections.tasks``, which makes the lines):
the stack around the frame (``stack_view``: the path from the root, its subtasks and siblings),
or the running tasks an interruption is about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from pydantic import BaseModel, Field

from app.core.context.sections.tasks import (
    CONTINUE_INSTRUCTION,
    RUN_INSTRUCTION,
    Progress,
    Running,
    StackView,
    TaskSection,
)
from app.core.errors import CoreError, NoRecordError
from app.core.text.sentences import split_after_stops
from app.core.types import Task, TaskStatus, utc_now

OPEN: frozenset[TaskStatus] = frozenset({TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.BLOCKED})
FINAL: frozenset[TaskStatus] = frozenset({TaskStatus.COMPLETE, TaskStatus.FAILED})
TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.ACTIVE, TaskStatus.BLOCKED, TaskStatus.FAILED}),
    TaskStatus.ACTIVE: frozenset({TaskStatus.COMPLETE, TaskStatus.FAILED, TaskStatus.BLOCKED}),
    # blocked → complete: a parent whose own work was done completes when its last subtask does
    TaskStatus.BLOCKED: frozenset({TaskStatus.ACTIVE, TaskStatus.COMPLETE, TaskStatus.FAILED}),
    TaskStatus.COMPLETE: frozenset(),
    TaskStatus.FAILED: frozenset(),
}
WAITING_NOTE = "waiting for subtasks"


class TaskError(CoreError, ValueError):
    """A task operation that breaks the stack's rules; the message says which."""


class NoTaskError(TaskError, NoRecordError):
    """The task id names no task of the stack."""


# --------------------------------------------------------------------------- results


_STEP_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+\S")


def summarize_result(text: str, max_chars: int = 240) -> str:
    """The result summary of a task's output: its first sentence(s), at most ``max_chars``.

    Sentences are added while the summary is shorter than 80 characters (a lone "Sure." says
    nothing); a summary still too long is cut at a word and ends with "…".
    """
    clean = " ".join(text.replace("*", "").replace("#", "").split())
    out = ""
    for sentence in split_after_stops(clean):
        if not out:
            out = sentence
        elif len(out) < 80 and len(out) + 1 + len(sentence) <= max_chars:
            out = f"{out} {sentence}"
        else:
            break
    if len(out) > max_chars:
        out = out[: max_chars - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    return out


def count_steps(text: str) -> int:
    """Steps of a streamed task output: numbered or bulleted lines, else non-empty lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    numbered = sum(1 for line in lines if _STEP_LINE.match(line))
    return numbered or len(lines)


# --------------------------------------------------------------------------- the stack


class TaskStack:
    """The tasks of one session in creation order, with the stack operations over them."""

    def __init__(self, tasks: Iterable[Task] = ()) -> None:
        self._tasks: dict[str, Task] = {}
        for task in tasks:
            self._tasks[task.task_id] = task

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> list[Task]:
        """Every task, in creation order."""
        return list(self._tasks.values())

    def get(self, task_id: str) -> Task:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise NoTaskError(f"unknown task {task_id!r}") from None

    def put(self, task: Task) -> None:
        """Store a record as given (loading, replaying a change); a new id goes last."""
        self._tasks[task.task_id] = task

    def children(self, task_id: str | None) -> list[Task]:
        """The subtasks of ``task_id`` (None: the roots), in creation order."""
        return [t for t in self._tasks.values() if t.parent_task_id == task_id]

    def path(self, task_id: str) -> list[Task]:
        """The frames from the root down to ``task_id`` (itself last)."""
        out: list[Task] = []
        seen: set[str] = set()
        current: str | None = task_id
        while current is not None and current not in seen:
            seen.add(current)
            task = self.get(current)
            out.append(task)
            current = task.parent_task_id
        return out[::-1]

    def open_descendants(self, task_id: str) -> list[Task]:
        """Open tasks below ``task_id``, depth first in creation order."""
        out: list[Task] = []
        stack = self.children(task_id)[::-1]
        while stack:
            task = stack.pop()
            if task.status in OPEN:
                out.append(task)
            stack.extend(self.children(task.task_id)[::-1])
        return out

    def current_frame(self, root_id: str) -> Task:
        """The top of the stack under ``root_id``: the deepest open frame (the latest child first)."""
        frame = self.get(root_id)
        while True:
            open_children = [c for c in self.children(frame.task_id) if c.status in OPEN]
            if not open_children:
                return frame
            frame = open_children[-1]

    # ------------------------------------------------------------------ operations

    def _set(self, task_id: str, status: TaskStatus | None, at: str | None, **fields: object) -> Task:
        task = self.get(task_id)
        if status is not None and status != task.status:
            if status not in TRANSITIONS[task.status]:
                raise TaskError(f"task {task_id!r} cannot go from {task.status.value} to {status.value}")
            fields["status"] = status
        fields["updated_at"] = at or utc_now()
        updated = task.model_copy(update=fields)
        self._tasks[task_id] = updated
        return updated

    def create(self, name: str, *, parent_task_id: str | None = None, acceptance: str = "",
               task_id: str | None = None, turn_id: str | None = None, node_id: str | None = None,
               at: str | None = None, step: int = 0, depends_on: Sequence[str] = ()) -> Task:
        """Push a new pending frame (a root, or a child of an open parent; ``step`` > 0 makes it
        that step of its parent's plan, after the steps it ``depends_on``); return it."""
        if parent_task_id is not None and self.get(parent_task_id).status not in OPEN:
            raise TaskError(f"task {parent_task_id!r} is {self.get(parent_task_id).status.value}: "
                            "a popped frame takes no subtasks")
        for dep in depends_on:
            if self.get(dep).parent_task_id != parent_task_id:
                raise TaskError(f"task {dep!r} is not a step of the same task")
        at = at or utc_now()
        values: dict[str, object] = {"name": name, "parent_task_id": parent_task_id, "acceptance": acceptance,
                                     "turn_id": turn_id, "node_id": node_id, "created_at": at, "updated_at": at,
                                     "step": step, "depends_on": list(depends_on)}
        if task_id is not None:
            if task_id in self._tasks:
                raise TaskError(f"task {task_id!r} exists already")
            values["task_id"] = task_id
        task = Task.model_validate(values)
        self._tasks[task.task_id] = task
        return task

    def start(self, task_id: str, *, at: str | None = None) -> list[Task]:
        """Make the frame active (its stream produced its first token); return the change."""
        task = self.get(task_id)
        if task.status == TaskStatus.ACTIVE:
            return []
        return [self._set(task_id, TaskStatus.ACTIVE, at)]

    def block(self, task_id: str, note: str, *, at: str | None = None) -> list[Task]:
        """Park the frame as blocked with a note saying why; return the change."""
        task = self.get(task_id)
        return [self._set(task_id, TaskStatus.BLOCKED, at, notes=[*task.notes, note])]

    def note(self, task_id: str, text: str, *, at: str | None = None) -> list[Task]:
        """Add a progress note (no status change); return the change."""
        return [self._set(task_id, None, at, notes=[*self.get(task_id).notes, text])]

    def set_progress(self, task_id: str, progress: float, *, at: str | None = None) -> list[Task]:
        """Record progress in [0, 1] (no status change); return the change."""
        return [self._set(task_id, None, at, progress=round(max(0.0, min(1.0, progress)), 4))]

    def complete(self, task_id: str, result_summary: str, evidence_ids: Sequence[str] = (),
                 *, at: str | None = None) -> list[Task]:
        """Pop the frame with its result; return every task that changed.

        With subtasks still open the frame cannot pop yet: it is parked as blocked ("waiting for
        subtasks") with its result drafted, and completes when its last subtask finishes. A popped
        frame may complete a parent that was waiting for it.
        """
        task = self.get(task_id)
        fields = {"result_summary": result_summary, "result_evidence_ids": list(evidence_ids)}
        if self.open_descendants(task_id):
            notes = task.notes if WAITING_NOTE in task.notes else [*task.notes, WAITING_NOTE]
            return [self._set(task_id, TaskStatus.BLOCKED, at, notes=notes, **fields)]
        if task.status == TaskStatus.PENDING:  # finished without ever streaming (no model)
            self._set(task_id, TaskStatus.ACTIVE, at)
        changed = [self._set(task_id, TaskStatus.COMPLETE, at, progress=1.0, **fields)]
        return changed + self._settle(task.parent_task_id, at)

    def fail(self, task_id: str, reason: str, *, at: str | None = None) -> list[Task]:
        """Fail the frame (stopped, error) and every open frame above it; return the changes.

        A parent waiting for its subtasks completes once none is left open (it has its result).
        """
        task = self.get(task_id)
        if task.status in FINAL:
            return []
        changed = [self._set(d.task_id, TaskStatus.FAILED, at, error=f"parent task failed: {reason}")
                   for d in self.open_descendants(task_id)[::-1]]
        changed.append(self._set(task_id, TaskStatus.FAILED, at, error=reason))
        return changed + self._settle(task.parent_task_id, at)

    def _settle(self, parent_id: str | None, at: str | None) -> list[Task]:
        """Complete a parent that only waited for its subtasks, once none is open."""
        if parent_id is None:
            return []
        parent = self.get(parent_id)
        if parent.status != TaskStatus.BLOCKED or WAITING_NOTE not in parent.notes or self.open_descendants(parent_id):
            return []
        notes = [n for n in parent.notes if n != WAITING_NOTE]
        changed = [self._set(parent_id, TaskStatus.COMPLETE, at, progress=1.0, notes=notes)]
        return changed + self._settle(parent.parent_task_id, at)

    # ------------------------------------------------------------------ steering (the resident agent)

    def pause(self, task_id: str, *, checkpoint_id: str | None = None, at: str | None = None) -> list[Task]:
        """Park an open task as paused (blocked, ``paused``), keeping ``checkpoint_id`` — the
        evidence of its output so far — when given; return the change (none if it is paused)."""
        task = self.get(task_id)
        if task.status not in OPEN:
            raise TaskError(f"task {task_id!r} is {task.status.value}: only an open task can be paused")
        if task.paused and checkpoint_id is None:
            return []
        fields: dict[str, object] = {"paused": True}
        if checkpoint_id is not None:
            fields["checkpoint_id"] = checkpoint_id
        return [self._set(task_id, TaskStatus.BLOCKED, at, **fields)]

    def keep(self, task_id: str, checkpoint_id: str, *, at: str | None = None) -> list[Task]:
        """Keep ``checkpoint_id`` (the output so far) as the task's checkpoint, its status as it is
        (a step restarted from it); return the change."""
        return [self._set(task_id, None, at, checkpoint_id=checkpoint_id)]

    def resume(self, task_id: str, *, at: str | None = None) -> list[Task]:
        """Take a paused task up again (active, no longer paused); return the change."""
        task = self.get(task_id)
        if not task.paused:
            return []
        return [self._set(task_id, TaskStatus.ACTIVE, at, paused=False)]

    def amend(self, task_id: str, constraint: str, *, at: str | None = None) -> list[Task]:
        """Join ``constraint`` to an open task's constraints (once); return the change."""
        task = self.get(task_id)
        if task.status not in OPEN:
            raise TaskError(f"task {task_id!r} is {task.status.value}: only an open task can be amended")
        if constraint in task.constraints:
            return []
        return [self._set(task_id, None, at, constraints=[*task.constraints, constraint])]

    def run(self, task_id: str, turn_id: str, *, at: str | None = None) -> list[Task]:
        """A stream starts running the task (a step, or a task resumed from its checkpoint) as
        turn ``turn_id``: one more attempt, the turn joins its ``runs``; return the change."""
        task = self.get(task_id)
        return [self._set(task_id, None, at, runs=[*task.runs, turn_id], attempts=task.attempts + 1)]

    def add_event(self, task_id: str, event_id: str, *, at: str | None = None) -> list[Task]:
        """An env event reached the task while it ran (its next step's context shows it)."""
        task = self.get(task_id)
        if event_id in task.events:
            return []
        return [self._set(task_id, None, at, events=[*task.events, event_id])]

    def steps(self, task_id: str) -> list[Task]:
        """The task's plan: its steps in order."""
        return sorted((c for c in self.children(task_id) if c.step), key=lambda t: t.step)

    def ready_steps(self, task_id: str) -> list[Task]:
        """The steps that may start now: pending, not paused, every step they depend on complete."""
        done = {t.task_id for t in self.steps(task_id) if t.status == TaskStatus.COMPLETE}
        return [t for t in self.steps(task_id)
                if t.status == TaskStatus.PENDING and not t.paused and set(t.depends_on) <= done]

    def rename(self, task_id: str, name: str, acceptance: str | None = None, *, at: str | None = None) -> list[Task]:
        """Give a step that has not started a new name (and acceptance line); return the change."""
        task = self.get(task_id)
        if task.status != TaskStatus.PENDING or task.attempts:
            raise TaskError(f"step {task.step} has started: it keeps its name")
        fields: dict[str, object] = {"name": name}
        if acceptance is not None:
            fields["acceptance"] = acceptance
        return [self._set(task_id, None, at, **fields)]

    def drop_step(self, task_id: str, reason: str, *, at: str | None = None) -> list[Task]:
        """Take a step that has not started out of its plan (failed with ``reason``, kept as
        history), and out of the ``depends_on`` of the steps after it; return the change."""
        task = self.get(task_id)
        if not task.step or task.status != TaskStatus.PENDING or task.attempts:
            raise TaskError("only a step that has not started can be removed")
        changed = [self._set(task_id, TaskStatus.FAILED, at, error=reason)]
        for later in self.steps(task.parent_task_id or ""):
            if task_id in later.depends_on:
                deps = [d for d in later.depends_on if d != task_id]
                changed.append(self._set(later.task_id, None, at, depends_on=deps))
        return changed

    # ------------------------------------------------------------------ invariants

    def check(self) -> list[str]:
        """Every broken rule of the stack, as sentences (empty when the stack is consistent)."""
        problems: list[str] = []
        position = {tid: n for n, tid in enumerate(self._tasks)}
        for task in self._tasks.values():
            parent = task.parent_task_id
            if parent is not None:
                if parent not in self._tasks:
                    problems.append(f"task {task.task_id}: parent {parent} does not exist")
                    continue
                if position[parent] > position[task.task_id]:
                    problems.append(f"task {task.task_id}: created before its parent {parent}")
            try:
                ids = [t.task_id for t in self.path(task.task_id)]
            except TaskError:
                continue
            if ids[0] != task.task_id and self.get(ids[0]).parent_task_id is not None:
                problems.append(f"task {task.task_id}: its parent chain loops")
            if task.status == TaskStatus.COMPLETE and self.open_descendants(task.task_id):
                problems.append(f"task {task.task_id}: complete with open subtasks")
            # one frame at a time is pushed on a task; its plan's steps may run side by side
            active = [c.task_id for c in self.children(task.task_id) if c.status == TaskStatus.ACTIVE and not c.step]
            if len(active) > 1:
                problems.append(f"task {task.task_id}: {len(active)} active subtasks {active}")
        return problems


# --------------------------------------------------------------------------- build inputs


class LiveTask(BaseModel):
    """A task's stream as a build saw it: the output so far and the evidence that snapshot gets."""

    task_id: str
    partial: str = ""  # the latest part of the output streamed so far
    tokens: int = 0
    max_tokens: int = 0
    steps: int = 0
    evidence_id: str = ""  # cited by the build → stored as an llm_output evidence with the turn


class TaskRun(BaseModel):
    """A stream that runs an existing task — a step of its plan, or a task resumed or restarted
    from its checkpoint — as its build saw it: the work kept at the checkpoint (continued, not
    repeated) and the env events that reached the task while it ran (id, fenced note)."""

    task_id: str
    checkpoint_id: str = ""
    checkpoint: str = ""
    events: list[tuple[str, str]] = Field(default_factory=list)


class TaskInputs(BaseModel):
    """What a build knows of the session's tasks (recorded with the turn; replay feeds it back)."""

    tasks: list[Task] = Field(default_factory=list)
    live: list[LiveTask] = Field(default_factory=list)
    new_task_id: str | None = None  # the id a task-mode input's task gets (None: no task is made)
    parent_task_id: str | None = None  # an explicit parent for that task (None: from the anchor)
    run: TaskRun | None = None  # the existing task the stream runs (no new task is made)
    force_task: bool = False  # the input is a new task whatever its intent says (``Engine.run_task``)

    def running(self) -> list[Task]:
        """The tasks an interruption may address, in creation order: open tasks (not steps) that a
        live stream works on — the task itself or a step of its plan — or that the user paused."""
        by_id = {t.task_id: t for t in self.tasks}
        working = {by_id[lt.task_id].parent_task_id if by_id[lt.task_id].step else lt.task_id
                   for lt in self.live if lt.task_id in by_id}
        return [t for t in self.tasks if t.status in OPEN and not t.step and (t.task_id in working or t.paused)]

    def live_of(self, task_id: str) -> LiveTask | None:
        """The live stream working on a task: its own, else the first of its steps'."""
        by_id = {t.task_id: t for t in self.tasks}
        for seen in self.live:
            task = by_id.get(seen.task_id)
            if seen.task_id == task_id or (task is not None and task.step and task.parent_task_id == task_id):
                return seen
        return None


class StackDecision(BaseModel):
    """Which part of the task stack a build works in (recorded with the turn as ``task``)."""

    path: str = "qa"  # qa | task | interrupt
    current: str | None = None  # the frame the build works on (the new task for a task build)
    parent: str | None = None  # the parent of a new task
    name: str = ""  # the new task's name
    acceptance: str = ""
    targets: list[str] = Field(default_factory=list)  # running tasks an interruption is about
    run: bool = False  # the build runs ``current``, an existing task (a step, a resumed task)


def progress_of(seen: LiveTask) -> Progress:
    """What the tasks section shows of a task's stream as a build saw it."""
    return Progress(steps=seen.steps, tokens=seen.tokens, max_tokens=seen.max_tokens, partial=seen.partial,
                    evidence_id=seen.evidence_id)


def stack_view(tasks: Sequence[Task], current_task_id: str, *, demote: int = 0,
               live: Mapping[str, LiveTask] | None = None, order: int = 1000) -> StackView:
    """The stack around ``current_task_id`` as the tasks section shows it: the path of frames from
    the root, the current task's subtasks and its siblings (their results), and its progress when
    ``live`` holds its stream. ``demote`` lowers every line's priority by that many steps."""
    stack = TaskStack(tasks)
    frames = stack.path(current_task_id)
    current = frames[-1]
    around = [*stack.children(current.task_id),
              *(s for s in stack.children(current.parent_task_id) if s.task_id != current.task_id)]
    seen = live.get(current.task_id) if live else None
    return StackView(path=tuple(frames), around=tuple(around), progress=progress_of(seen) if seen else None,
                     demote=demote, order=order)


def decide(inputs: TaskInputs, *, mode: str, chain_turns: Sequence[str], goal: str,
           acceptance: Sequence[str], target: str | None) -> StackDecision:
    """Which frame a build works in.

    ``chain_turns`` are the turn ids of the anchor's chain, nearest first; the nearest task they
    spawned gives the branch's frame. A task build pushes a new frame: a child of the explicit
    parent, else of the branch's frame while it is open (of that frame's parent once it has
    popped: the new task is its sibling). An interruption targets the addressed running task,
    or all running tasks. Anything else works in the branch's open frame, if there is one.
    """
    stack = TaskStack(inputs.tasks)
    if inputs.run is not None and inputs.run.task_id in stack:
        task = stack.get(inputs.run.task_id)
        return StackDecision(path="task", current=task.task_id, parent=task.parent_task_id, name=task.name,
                             acceptance=task.acceptance, run=True)
    by_turn: dict[str, Task] = {}
    for task in inputs.tasks:
        if task.turn_id is not None:
            by_turn.setdefault(task.turn_id, task)
    branch = next((by_turn[t] for t in chain_turns if t in by_turn), None)
    if (mode == "task" or inputs.force_task) and inputs.new_task_id is not None:
        parent = inputs.parent_task_id if inputs.parent_task_id in stack else None
        if parent is None and branch is not None:
            if branch.status in OPEN:
                parent = branch.task_id
            elif branch.parent_task_id is not None and stack.get(branch.parent_task_id).status in OPEN:
                parent = branch.parent_task_id
        if parent is not None and stack.get(parent).status not in OPEN:
            parent = None
        return StackDecision(path="task", current=inputs.new_task_id, parent=parent,
                             name=goal.strip()[:120] or "task", acceptance="; ".join(acceptance))
    running = [t.task_id for t in inputs.running()]
    if mode == "interrupt" and running:
        targets = [target] if target in running else running
        return StackDecision(path="interrupt", current=targets[0], targets=targets)
    current = branch.task_id if branch is not None and branch.status in OPEN else None
    return StackDecision(path="qa", current=current)


def _frame(decision: StackDecision) -> Task:
    """The new task of a task build, as its context shows it (not stored yet)."""
    # (its acceptance is the intent's, stated by the plan's "Done when" line already)
    return Task(task_id=decision.current or "", name=decision.name, parent_task_id=decision.parent,
                created_at="", updated_at="")


def popped(inputs: TaskInputs, decision: StackDecision) -> list[Task]:
    """The completed tasks whose result stands in for their work in the decision's context (the
    popped subtasks and siblings of its frame): the pipeline leaves their answers out of recall."""
    if decision.current is None:
        return []
    tasks = [*inputs.tasks, _frame(decision)] if decision.path == "task" else list(inputs.tasks)
    stack = TaskStack(tasks)
    if decision.current not in stack:
        return []
    frame = stack.get(decision.current)
    near = [*stack.children(frame.task_id), *stack.children(frame.parent_task_id)]
    return [t for t in near if t.task_id != frame.task_id and t.status == TaskStatus.COMPLETE]


def decision_view(inputs: TaskInputs, decision: StackDecision) -> TaskSection:
    """What the tasks section shows of a decision (see ``decide``): a task build's new frame with
    its stack and step instruction; an interruption's running tasks with the first one's stack as
    background; a build inside a task's branch, that frame's stack as background; else nothing."""
    live = {lt.task_id: lt for lt in inputs.live}
    if decision.run and inputs.run is not None:
        run = inputs.run
        view = stack_view(inputs.tasks, run.task_id)
        view = replace(view, changes=tuple((e, n) for e, n in run.events),
                       checkpoint=(run.checkpoint_id, run.checkpoint) if run.checkpoint else None)
        return TaskSection(stack=view, instruction_for=run.task_id,
                           instruction=CONTINUE_INSTRUCTION if run.checkpoint else RUN_INSTRUCTION)
    if decision.path == "task" and decision.current is not None:
        frame = _frame(decision)
        return TaskSection(stack=stack_view([*inputs.tasks, frame], frame.task_id), instruction_for=frame.task_id)
    if decision.path == "interrupt":
        by_id = {t.task_id: t for t in inputs.tasks}
        running = tuple(Running(by_id[t], progress_of(seen) if (seen := inputs.live_of(t)) is not None else None)
                        for t in decision.targets if t in by_id)
        first = decision.targets[0] if decision.targets else None
        stack = stack_view(inputs.tasks, first, demote=1, order=3000) if first is not None and first in by_id else None
        return TaskSection(running=running, stack=stack)
    if decision.current is not None:
        return TaskSection(stack=stack_view(inputs.tasks, decision.current, demote=1, live=live))
    return TaskSection()
