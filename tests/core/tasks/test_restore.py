"""What a checkpoint keeps of the task stack and the copies a restore makes (``tasks/restore.py``)."""

from __future__ import annotations

from app.core.tasks.restore import RESTORED_NOTE, branch_tasks, restored
from app.core.tasks.stack import TaskStack
from app.core.types import Task, TaskStatus

AT = "2026-11-28T10:00:00+00:00"


def _stack() -> tuple[TaskStack, dict[str, Task]]:
    stack = TaskStack()
    root = stack.create("Plan the offsite", turn_id="t1", node_id="n1", at=AT)
    other = stack.create("Write the newsletter", turn_id="t9", node_id="n9", at=AT)
    done = stack.create("Book the venue", parent_task_id=root.task_id, step=1, at=AT)
    stack.complete(done.task_id, "Venue booked", ["ev-venue"], at=AT)
    working = stack.create("Draft the agenda", parent_task_id=root.task_id, step=2, depends_on=[done.task_id], at=AT)
    stack.start(working.task_id, at=AT)
    stack.pause(working.task_id, checkpoint_id="ev-half", at=AT)
    failed = stack.create("Order the food", parent_task_id=root.task_id, step=3, depends_on=[done.task_id], at=AT)
    stack.fail(failed.task_id, "no caterer", at=AT)
    stack.amend(root.task_id, "add a budget section", at=AT)
    return stack, {"root": stack.get(root.task_id), "other": other, "done": stack.get(done.task_id),
                   "working": stack.get(working.task_id), "failed": stack.get(failed.task_id)}


def test_a_checkpoint_keeps_the_tasks_its_chain_spawned_with_their_steps() -> None:
    stack, t = _stack()
    kept = branch_tasks(stack.tasks(), {"t0", "t1"})
    assert [k.task_id for k in kept] == [t[n].task_id for n in ("root", "done", "working", "failed")]
    assert [k.task_id for k in branch_tasks(stack.tasks(), set(), [t["other"].task_id])] == [t["other"].task_id]


def test_restored_copies_are_new_paused_and_keep_what_was_done() -> None:
    stack, t = _stack()
    copies = restored(branch_tasks(stack.tasks(), {"t1"}), at=AT)
    root, done, working, failed = copies
    assert root.task_id != t["root"].task_id and root.paused and root.status == TaskStatus.BLOCKED
    assert root.constraints == ["add a budget section"] and root.notes == [RESTORED_NOTE] and root.turn_id is None
    assert {c.parent_task_id for c in (done, working, failed)} == {root.task_id}
    assert done.status == TaskStatus.COMPLETE and done.result_evidence_ids == ["ev-venue"]
    assert working.paused and working.checkpoint_id == "ev-half" and working.depends_on == [done.task_id]
    assert failed.status == TaskStatus.PENDING and not failed.error and failed.attempts == 0
    assert not any(c.runs for c in copies) and len({c.node_id for c in copies}) == 4
    assert TaskStack([*stack.tasks(), *copies]).check() == []


def test_a_task_finished_at_the_checkpoint_is_not_restored() -> None:
    stack, t = _stack()
    stack.complete(t["other"].task_id, "Sent", at=AT)
    assert restored(branch_tasks(stack.tasks(), {"t9"}), at=AT) == []
