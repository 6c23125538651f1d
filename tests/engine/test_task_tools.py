"""Tasks made or changed by the ``create_task``/``update_task`` tools go through the task stack like
any other task: a task node, a ``spawned`` edge from the turn that called the tool, a
``task.changed`` revision, the stack's transition rules, and later builds see them. Real SQLite and
LanceDB in tmp dirs, the scripted model, inputs driven through the stream scheduler.
"""

from __future__ import annotations

from app.core.engine.facade import Engine
from app.core.tasks.replay import TASK_EVENT
from app.core.types import EdgeKind, NodeKind, TaskStatus
from tests.conftest import EngineFactory, stored


async def _ask(engine: Engine, session_id: str, text: str) -> dict:
    handle = engine.scheduler(session_id).submit(text)
    record = await handle.done
    return record.build.model_dump(mode="json")


def test_a_task_created_by_the_tool_is_on_the_stack_with_its_node_edge_and_revision(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        build = await _ask(engine, sid, "Remind me to renew the passport before March")
        calls = [c["call"]["tool"] for c in build["tools"]["calls"]]
        assert "create_task" in calls, build["tools"]
        tasks = [t for t in await engine.list_tasks(sid) if "passport" in t.name.lower()]
        assert len(tasks) == 1, [t.name for t in await engine.list_tasks(sid)]
        task = tasks[0]
        # the task has a node, spawned from the node of the turn whose tool call made it
        assert task.node_id is not None and state.graph.node(task.node_id).kind == NodeKind.TASK
        turn_node = state.node_of(task.turn_id)
        assert turn_node is not None
        assert task.node_id in {e.dst for e in state.graph.out_edges(turn_node, EdgeKind.SPAWNED)}
        # both the creation and the link are revisions of the task log, and the log replays
        events = await stored(engine, lambda store: store.list_events(sid))
        ops = [e["payload"]["op"] for e in events if e["type"] == TASK_EVENT]
        assert ops[:2] == ["create", "link"], ops
        assert await engine.replay_state(sid) == []
        # later builds see it
        later, _ = await engine.build(sid, "What is on my list?")
        assert task.task_id in {t["task_id"] for t in later.tasks["tasks"]}

        # update_task follows the stack's transition rules: completing pops the frame
        build = await _ask(engine, sid, "Mark the passport task as done")
        assert "update_task" in [c["call"]["tool"] for c in build["tools"]["calls"]], build["tools"]
        done = next(t for t in await engine.list_tasks(sid) if t.task_id == task.task_id)
        assert done.status == TaskStatus.COMPLETE and done.progress == 1.0
        assert state.graph.node(task.node_id).attrs["status"] == "complete"
        assert await engine.replay_state(sid) == []

    make_engine.run(body)


def test_replay_of_a_turn_whose_tool_made_a_task_is_exact(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        await _ask(engine, sid, "Remind me to water the plants on Friday")
        second = engine.scheduler(sid).submit("Which plants need water?")
        record = await second.done
        for turn_id in (state.turn_order[0], record.turn_id):
            assert await engine.replay(turn_id) == []

    make_engine.run(body)


def test_an_env_event_routed_to_a_task_is_not_a_task_state_difference(make_engine: EngineFactory) -> None:
    from app.core.types import EnvEvent

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        change = await engine.create_task(sid, "Update budget.md with the Q3 numbers")
        await engine.start_task(sid, change.tasks[0].task_id)
        routed = await engine.ingest_env(sid, [EnvEvent(kind="file", source="watch", uri="/w/budget.md",
                                                        title="budget.md modified", content="Q3: 12,400")])
        assert routed[0].target_kind == "task" and routed[0].edge is not None
        assert await engine.replay_state(sid) == []

    make_engine.run(body)
