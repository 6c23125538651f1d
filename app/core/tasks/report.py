"""A task as the front ends show it: ``pcm task list|show``, ``pcm ask`` on a task, the MCP
task tools. ``task_report`` is the structured form (the task, its steps with ``depends_on`` as
step numbers, its state in words), ``task_lines`` the text a person reads. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.tasks.steering import card_line
from app.core.types import Task, TaskStatus


def state_word(task: Task) -> str:
    """The task's state in one word: "paused" for a paused task, else its status."""
    return "paused" if task.paused else task.status.value


def steps_of(tasks: Sequence[Task], root_id: str) -> list[Task]:
    """The steps of ``root_id``'s plan, in order."""
    return sorted((t for t in tasks if t.parent_task_id == root_id and t.step), key=lambda t: t.step)


def roots(tasks: Sequence[Task]) -> list[Task]:
    """The tasks that are not steps, oldest first."""
    return sorted((t for t in tasks if not t.step), key=lambda t: t.created_at)


def task_report(tasks: Sequence[Task], root_id: str) -> dict[str, Any]:
    """One task with its steps: ids, names, acceptance lines, states, ``depends_on`` (as step
    numbers), results and errors; the constraints and the line its card shows."""
    by_id = {t.task_id: t for t in tasks}
    root = by_id[root_id]
    steps = steps_of(tasks, root_id)
    number = {s.task_id: s.step for s in steps}
    return {
        "task_id": root.task_id, "name": root.name, "state": state_word(root), "status": root.status.value,
        "paused": root.paused, "constraints": list(root.constraints), "error": root.error,
        "result": root.result_summary, "result_evidence_ids": list(root.result_evidence_ids),
        "checkpoint_id": root.checkpoint_id, "card": card_line(root, steps), "updated_at": root.updated_at,
        "steps": [{"step": s.step, "task_id": s.task_id, "name": s.name, "acceptance": s.acceptance,
                   "state": state_word(s), "depends_on": [number.get(d, 0) for d in s.depends_on],
                   "attempts": s.attempts, "result": s.result_summary, "error": s.error} for s in steps],
    }


def task_lines(report: dict[str, Any]) -> list[str]:
    """The report as lines: the task and its state, then one line per step."""
    head = f"{report['task_id'][:8]}  [{report['state']}]  {report['name']}"
    lines = [head + (f"  \u2014 {report['card']}" if report["card"] else "")]
    lines += [f"  constraint: {c}" for c in report["constraints"]]
    for step in report["steps"]:
        after = f" (after {', '.join(str(d) for d in step['depends_on'])})" if step["depends_on"] else ""
        lines.append(f"  {step['step']}. [{step['state']}] {step['name']}{after}")
        if step["error"]:
            lines.append(f"     error: {step['error']}")
    if report["error"]:
        lines.append(f"  error: {report['error']}")
    return lines


def is_settled(task: Task) -> bool:
    """Whether nothing more happens to the task until the user acts: done, failed or paused."""
    return task.paused or task.status in (TaskStatus.COMPLETE, TaskStatus.FAILED)
