"""Checkpoints that restore: what a checkpoint keeps of its branch's task stack, and the tasks a
restore makes of it.

``branch_tasks`` is the task stack of a branch at a checkpoint: the root tasks a turn of the
checkpoint's chain spawned (and the task whose card carries the mark), with all their subtasks
and steps, as records. ``restored`` copies the roots that were still open then, with their
steps, for a sibling branch started from the checkpoint: new ids (parents and ``depends_on``
mapped to the copies), the root paused — resuming it continues the work on the new branch —,
steps complete then kept with their results, open steps pending, or paused with the work they
had kept (their ``checkpoint_id``); constraints and env events as they were; no runs and no
turn: the engine draws the root's node as spawned by the checkpoint's turn, where the copies'
streams continue (``TaskAgent._anchor``): a new branch beside the one that went on from there.

Pure and deterministic but for the new ids.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from app.core.tasks.stack import FINAL
from app.core.types import Task, TaskStatus, new_id

RESTORED_NOTE = "restored from a checkpoint"


def branch_tasks(tasks: Sequence[Task], chain_turns: Collection[str], task_ids: Collection[str] = ()) -> list[Task]:
    """The roots spawned by a turn of ``chain_turns`` (or among ``task_ids``), with their descendants."""
    roots = [t for t in tasks if t.parent_task_id is None and (t.turn_id in chain_turns or t.task_id in task_ids)]
    picked = {t.task_id for t in roots}
    for task in tasks:  # creation order: a parent comes before its children
        if task.parent_task_id in picked:
            picked.add(task.task_id)
    return [t for t in tasks if t.task_id in picked]


def restored(kept: Sequence[Task], *, at: str) -> list[Task]:
    """Copies of the open roots of ``kept`` (``branch_tasks`` at the checkpoint) and their
    descendants, ready to resume on a new branch (module doc)."""
    ids: dict[str, str] = {}
    out: list[Task] = []
    for task in kept:
        root = task.parent_task_id is None
        if root and task.status in FINAL:
            continue
        if not root and task.parent_task_id not in ids:
            continue
        ids[task.task_id] = new_id()
        out.append(_copy(task, ids, at=at))
    return out


def _copy(task: Task, ids: dict[str, str], *, at: str) -> Task:
    done = task.status == TaskStatus.COMPLETE
    root = task.parent_task_id is None
    paused = root or (not done and task.checkpoint_id is not None)
    status = TaskStatus.COMPLETE if done else TaskStatus.BLOCKED if paused else TaskStatus.PENDING
    return task.model_copy(update={
        "task_id": ids[task.task_id], "parent_task_id": ids.get(task.parent_task_id or ""),
        "depends_on": [ids[d] for d in task.depends_on if d in ids], "status": status, "paused": paused and not done,
        "error": "" if not done else task.error, "turn_id": None, "node_id": new_id(), "created_at": at,
        "updated_at": at, "runs": [], "attempts": task.attempts if done else 0,
        "notes": [RESTORED_NOTE] if root else [], "progress": task.progress if done or root else 0.0,
    })
