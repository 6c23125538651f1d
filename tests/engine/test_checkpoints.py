"""Checkpoints keep their branch's state and restore it on a sibling branch (``engine/checkpoints.py``),
on the scripted agent model with real SQLite + LanceDB: a checkpoint marked while a task was
planned and paused keeps its task stack, the summaries on offer and the turn's detail settings;
after the task went on to completion, "Restore" brings it back paused as it was, resuming it
runs its steps on a new branch beside the first one, and an input sent from there starts with
the kept detail and, as the restored task's steps, the branch summaries kept then (not those that
went on with the first branch). The task state and every turn replay exactly."""

from __future__ import annotations

import pytest

from app.core.engine.branches import BranchError
from app.core.engine.facade import Engine
from app.core.pipeline.detail import DetailAction
from app.core.pipeline.record import TurnRecord
from app.core.session.state import SessionState
from app.core.tasks.restore import RESTORED_NOTE
from app.core.types import TaskStatus
from tests.conftest import EngineFactory
from tests.engine.agent_model import PLAN, AgentModel

TASK = "Plan and draft the team offsite with numbered steps"


async def _a_question_and_a_held_task(engine: Engine) -> tuple[SessionState, TurnRecord, TurnRecord, str]:
    """A new session with a question answered, then a task planned and held before its steps run:
    (the session's state, the question's record, the task turn's record, the task's id)."""
    state = await engine.open_session(None)
    sid = state.session_id
    first = await engine.scheduler(sid).submit("Where should the team offsite be held?").done
    handle = engine.run_task(sid, TASK, hold=True)
    record = await handle.done
    root_id = handle.task_id
    assert first is not None and record is not None and root_id is not None
    assert (await engine.wait_task(sid, root_id, timeout=60)).paused
    return state, first, record, root_id


def test_restore_starts_a_sibling_branch_with_the_task_stack_and_detail_kept(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, first, record, root_id = await _a_question_and_a_held_task(engine)
        sid = state.session_id
        focused = await engine.detail(record.turn_id, DetailAction(kind="focus", node_id=first.node_id))
        mark = record.node_id
        await engine.checkpoint(sid, mark, "before the steps ran")
        kept = state.graph.node(mark).attrs["checkpoint_state"]
        assert [t["task_id"] for t in kept["tasks"]][0] == root_id and len(kept["tasks"]) == 1 + len(PLAN["steps"])
        assert kept["detail"]["focus"] == focused.detail.focus == first.node_id and kept["turn_id"] == record.turn_id

        step = next(t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id)
        assert step.node_id is not None
        await engine.checkpoint(sid, step.node_id)  # a step's card: its task's branch
        on_step = state.graph.node(step.node_id).attrs["checkpoint_state"]
        assert on_step["turn_id"] == record.turn_id and on_step["tasks"][0]["task_id"] == root_id
        await engine.checkpoint(sid, step.node_id, remove=True)
        assert state.graph.node(step.node_id).attrs["checkpoint_state"] is None

        await engine.resume_task(sid, root_id)  # the first branch goes on to the end
        assert (await engine.wait_task(sid, root_id, timeout=60)).status == TaskStatus.COMPLETE
        with pytest.raises(BranchError):
            await engine.restore_checkpoint(sid, first.node_id)  # no checkpoint there

        restored = await engine.restore_checkpoint(sid, mark)
        assert restored.anchor == mark and restored.detail.focus == first.node_id
        [copy] = [t for t in restored.tasks if t.parent_task_id is None]
        assert copy.task_id != root_id and copy.paused and copy.name == TASK and copy.notes == [RESTORED_NOTE]
        steps = [t for t in restored.tasks if t.parent_task_id == copy.task_id]
        assert [s.name for s in steps] == [s["name"] for s in PLAN["steps"]]
        assert all(s.status == TaskStatus.PENDING for s in steps)
        assert (await engine.wait_task(sid, root_id, timeout=1)).status == TaskStatus.COMPLETE  # the first untouched

        await engine.resume_task(sid, copy.task_id)
        done = await engine.wait_task(sid, copy.task_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE, done.error
        tasks = {t.task_id: t for t in await engine.list_tasks(sid)}
        first_step = next(t for t in tasks.values() if t.parent_task_id == copy.task_id and t.step == 1)
        run_node = state.node_of(first_step.runs[0])
        assert run_node is not None and state.graph.parent(run_node) == mark  # the new branch starts there
        original_step = next(t for t in tasks.values() if t.parent_task_id == root_id and t.step == 1)
        assert state.graph.parent(state.node_of(original_step.runs[0]) or "") == mark
        assert len(state.graph.children(mark)) >= 2  # beside the first branch

        reply = await engine.scheduler(sid).submit("What is left to book?", anchor_override=mark,
                                                   detail_from=restored.turn_id).done
        assert (await engine.turn_record(reply.turn_id)).build.detail["focus"] == first.node_id
        assert await engine.replay_state(sid) == []
        for turn_id in await engine.turn_statuses(sid):
            assert await engine.replay(turn_id) == [], turn_id

    make_engine.run(body, chat=AgentModel(), max_streams=2)


def test_a_restored_branch_is_offered_the_summaries_its_checkpoint_kept(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, first, record, root_id = await _a_question_and_a_held_task(engine)
        sid = state.session_id
        await engine.summarize(sid)
        mark = record.node_id
        await engine.checkpoint(sid, mark)
        root = state.graph.root_of(mark)
        kept = state.graph.node(mark).attrs["checkpoint_state"]["summaries"][root]
        assert kept and first.node_id and state.graph.root_of(first.node_id) == root

        await engine.resume_task(sid, root_id)  # the first branch goes on, and its summaries with it
        assert (await engine.wait_task(sid, root_id, timeout=60)).status == TaskStatus.COMPLETE
        await engine.summarize(sid)
        now = {s.level: s.summary_id for s in await engine.session_summaries(sid)
               if s.subject == "branch" and s.subject_id == root}
        assert now and all(now[level] != kept[level] for level in kept)  # they moved on

        restored = await engine.restore_checkpoint(sid, mark)
        assert restored.summaries[root] == kept
        reply = await engine.scheduler(sid).submit("What is left to book?", anchor_override=mark,
                                                   detail_from=restored.turn_id).done
        offered = (await engine.turn_record(reply.turn_id)).build.summaries
        assert offered["root"] == root
        assert {level: s["summary_id"] for level, s in offered["levels"].items()} == kept
        [copy] = [t for t in restored.tasks if t.parent_task_id is None]
        await engine.resume_task(sid, copy.task_id)  # the restored task's steps read them too
        assert (await engine.wait_task(sid, copy.task_id, timeout=60)).status == TaskStatus.COMPLETE
        step = next(t for t in await engine.list_tasks(sid) if t.parent_task_id == copy.task_id and t.step == 1)
        offered = (await engine.turn_record(step.runs[0])).build.summaries
        assert {level: s["summary_id"] for level, s in offered["levels"].items()} == kept
        later = await engine.scheduler(sid).submit("And the catering?", anchor_override=reply.node_id).done
        offered = (await engine.turn_record(later.turn_id)).build.summaries  # no restored checkpoint: the current
        assert {level: s["summary_id"] for level, s in offered["levels"].items()} != kept
        for turn_id in await engine.turn_statuses(sid):
            assert await engine.replay(turn_id) == [], turn_id

    make_engine.run(body, chat=AgentModel(), max_streams=2)
