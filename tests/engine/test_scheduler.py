"""The stream scheduler end to end: k concurrent streams per session, the Q&A, task and
interruption paths, priorities, stopping, and a task graph that replays from the event log.

Fast tests: real SQLite + LanceDB in tmp dirs with a scripted model that streams a long numbered
answer to tasks and a short one to questions (as tests/engine/test_engine.py). The ``model``
tests run an interruption on the real SmolLM2 GGUF while a task streams, and check that a
generation set aside for a cut-in continues token for token as if nothing had run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.core.engine.facade import Engine
from app.core.ports import CancelToken, ChatMessage, ChatResult, GenerationParams, TokenCallback
from app.core.runtime.executors import ChatStream, Executors
from app.core.runtime.scheduler import StreamHandle, StreamStopped
from app.core.types import EdgeKind, NodeKind, TaskStatus
from app.llm.fakes import ScriptedChatModel
from tests.conftest import EngineFactory

TASK_REPLY = ("1. Pick a date for the party and tell everyone about it. 2. Buy food and drinks for twenty people. "
              + " ".join(f"step{i}" for i in range(3, 60)))
QUESTION_REPLY = "The task is about halfway through its steps."


class StreamModel(ScriptedChatModel):
    """Questions and interruptions get a short reply, anything else a long numbered one."""

    def chat(self, messages: Sequence[ChatMessage], *, params: GenerationParams | None = None, stage: str = "answer",
             json_schema: dict[str, Any] | None = None, on_token: TokenCallback | None = None,
             cancel: CancelToken | None = None) -> ChatResult:
        question = "Running task:" in messages[0]["content"] or messages[-1]["content"].rstrip().endswith("?")
        self._replies, self._next = [QUESTION_REPLY if question else TASK_REPLY], 0  # read once by chat()
        return super().chat(messages, params=params, stage=stage, json_schema=json_schema, on_token=on_token,
                            cancel=cancel)


def _run(make_engine: EngineFactory, body: Callable[[Engine], Awaitable[Any]], *, delay: float = 0.002,
         k: int = 4) -> Any:
    """One app run over the test's folder: the streaming model, ``k`` streams per session, a task
    run as one stream (its plan of steps: tests/engine/test_agent.py)."""
    return make_engine.run(body, chat=StreamModel(token_delay_s=delay), max_streams=k, task_steps="off")


async def _first_tokens(handle: StreamHandle, n: int = 3) -> None:
    while handle.tokens < n and not handle.done.done():
        await asyncio.sleep(0.005)


async def _task_streaming(engine: Engine, *, tokens: int, limit: int | None = None) -> tuple[Any, str, Any, StreamHandle]:
    """A new session whose scheduler has a task streaming (``tokens`` generated): (state, session
    id, scheduler, the task's handle)."""
    state = await engine.open_session(None)
    sched = engine.scheduler(state.session_id)
    if limit is not None:
        sched.set_limit(limit)
    task = sched.submit("Write a plan for the garden party with numbered steps")
    await _first_tokens(task, tokens)
    return state, state.session_id, sched, task


async def _check_graph(engine: Engine, sid: str) -> list[Any]:
    """Every task node has its spawned edge from its turn, statuses are final, no orphan; replay agrees."""
    state = engine._ctx.sessions[sid]
    tasks = await engine.list_tasks(sid)
    ids = {t.task_id for t in tasks}
    for task in tasks:
        assert task.status in (TaskStatus.COMPLETE, TaskStatus.FAILED), task
        assert task.parent_task_id is None or task.parent_task_id in ids
        node = state.graph.node(task.node_id)
        assert node.kind == NodeKind.TASK and node.ref_id == task.task_id
        assert node.attrs["status"] == task.status.value
        spawned = state.graph.in_edges(task.node_id, EdgeKind.SPAWNED)
        if task.turn_id is not None:  # spawned by its turn (and by its parent's node, if any)
            assert [e.src for e in spawned if not e.attrs.get("subtask")] == [state.node_of(task.turn_id)]
        if task.parent_task_id is not None:
            parent_node = next(t.node_id for t in tasks if t.task_id == task.parent_task_id)
            assert [e.src for e in spawned if e.attrs.get("subtask")] == [parent_node]
    assert await engine.replay_state(sid) == []
    events = await engine._ctx.ex.run("store", engine._ctx.store.list_events, sid)
    revs = [e["payload"]["rev"] for e in events if e["type"] == "task.changed"]
    assert revs == list(range(1, len(revs) + 1))  # applied in one strict order, no gap
    return tasks


def test_task_is_pushed_streamed_and_popped_with_its_result(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        sched = engine.scheduler(sid)
        updates: list[tuple[str, str]] = []
        sched.task_updated.connect(lambda t: updates.append((t.name, t.status.value)))
        progress: list[float] = []
        state.graph.node_updated.connect(lambda n: n.kind == NodeKind.TASK and progress.append(n.attrs["progress"]))
        handle = sched.submit("Write a plan for the garden party with numbered steps")
        run = await handle.built
        assert handle.kind == "task" and handle.task_id is not None and handle.turn_id == run.turn_id
        record = await handle.done
        assert handle.status == "done" and record.output == TASK_REPLY
        task = (await engine.list_tasks(sid))[0]
        assert task.status == TaskStatus.COMPLETE and task.turn_id == record.turn_id
        assert task.result_summary == ("1. Pick a date for the party and tell everyone about it. "
                                       "2. Buy food and drinks for twenty people.")
        assert [u[1] for u in updates] == ["pending", "active", "complete"]
        assert progress == sorted(progress) and progress[-1] == 1.0 and len(progress) > 3
        # Its result is an artifact node, derived from the task's node and bound to the result's evidence.
        [artifact] = [n for n in state.graph.nodes() if n.kind == NodeKind.ARTIFACT]
        assert artifact.ref_id == task.result_evidence_ids[0] and artifact.attrs["version"] == 1
        assert artifact.label.startswith("Result v1: Write a plan for the garden party")
        assert [e.dst for e in state.graph.out_edges(artifact.node_id)] == [task.node_id]
        # The build was stack-aware: the new frame and its step instruction, bound to its evidence.
        text = record.build.context.text()
        assert "Current task: Write a plan for the garden party" in text and "numbered steps" in text
        assert task.task_id in record.build.context.source_ids()
        assert record.build.task["path"] == "task"
        await _check_graph(engine, sid)
        assert await engine.replay(record.turn_id) == []
        # The export mirrors the stored tasks and every evidence they cite resolves.
        from app.store.exchange import export_session, validate_document

        doc = await engine._ctx.ex.run("store", export_session, engine._ctx.store, sid)
        validate_document(doc)
        exported = doc["session"]["task_state"]["todo_list"]["tasks"]
        assert [t["task_id"] for t in exported] == [task.task_id] and exported[0]["status"] == "complete"
        assert exported[0]["result_summary"] == task.result_summary
        assert set(task.result_evidence_ids) <= set(doc["evidences"])

    _run(make_engine, body)


def test_popped_subtask_contributes_only_its_result_to_the_next_frame(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        root = (await engine.create_task(sid, "Plan the team offsite", acceptance="a plan everyone agreed to")).tasks[0]
        sched = engine.scheduler(sid)
        first = sched.submit("Write the venue shortlist for the offsite", parent_task_id=root.task_id)
        await first.done
        second = sched.submit("Draft the agenda for the offsite", parent_task_id=root.task_id)
        record = await second.done
        tasks = {t.name: t for t in await engine.list_tasks(sid)}
        venue = tasks["Write the venue shortlist for the offsite"]
        assert venue.parent_task_id == root.task_id and venue.status == TaskStatus.COMPLETE
        text = record.build.context.text()
        assert "Root goal: Plan the team offsite" in text
        assert f"Done: {venue.name} → {venue.result_summary}" in text
        assert "step40" not in text  # nothing of the subtask's work beyond its result
        blocks = [b for b in record.build.context.blocks if "Done:" in b.content]
        assert set(venue.result_evidence_ids) <= {r.evidence_id for b in blocks for r in b.refs}
        assert await engine.replay(record.turn_id) == []
        # The root (no stream of its own) is still open; its node has both subtasks spawned from it.
        assert state.graph.node(root.node_id).attrs["status"] == "pending"
        subs = [e for e in state.graph.out_edges(root.node_id, EdgeKind.SPAWNED)]
        assert len(subs) == 2 and all(e.attrs.get("subtask") for e in subs)
        await engine.complete_task(sid, root.task_id, "The offsite is planned.")
        await _check_graph(engine, sid)

    _run(make_engine, body)


def test_eight_inputs_with_k4_leave_a_consistent_graph(make_engine: EngineFactory) -> None:
    texts = ["Write a plan for the garden party", "What is the capital of France?",
             "Draft the agenda for the offsite", "Summarize the report on solar panels",
             "Which tomatoes did I plant?", "Write a shopping list for the barbecue",
             "How long does bread dough rise?", "Prepare a checklist for the move"]

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        sched = engine.scheduler(sid)
        peak = [0]
        sched.stream_started.connect(lambda h: peak.__setitem__(0, max(peak[0], len(sched.running()))))
        handles = [sched.submit(t) for t in texts]
        assert [h.seq for h in handles] == list(range(1, 9))
        records = await asyncio.gather(*(h.done for h in handles))
        assert all(h.status == "done" for h in handles) and len(records) == 8
        assert peak[0] <= 4 + engine._streams.runtime.config.interrupt_reserve
        tasks = await _check_graph(engine, sid)
        assert len(tasks) >= 2 and {h.kind for h in handles} >= {"task"}
        assert sorted(t.task_id for t in tasks) == sorted(h.task_id for h in handles if h.task_id)
        for h in handles:  # the turn nodes say which path they took
            assert state.graph.node(h.node_id).attrs["stream"] == h.kind
        # A fresh engine over the same store reloads the same task state.
        return sid

    sid = _run(make_engine, body)

    async def reload(engine: Engine) -> None:
        assert await engine.replay_state(sid) == []
        assert len(await engine.list_tasks(sid)) >= 2

    _run(make_engine, reload)


def test_priorities_reorder_the_queue(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sched = engine.scheduler(state.session_id)
        sched.set_limit(1)
        order: list[str] = []
        sched.stream_started.connect(lambda h: order.append(h.text))
        first = sched.submit("Write a plan for the garden party")
        low = sched.submit("Write a note about apples", priority=0)
        high = sched.submit("Write a note about pears", priority=5)
        later = sched.submit("Write a note about plums", priority=1)
        while len(sched.queued()) < 3:  # the dispatcher admits them from the engine's queue
            await asyncio.sleep(0)
        assert sched.running() == [first] and sched.queued() == [high, later, low]
        later.set_priority(9)  # raised while it waits
        assert sched.queued() == [later, high, low]
        await asyncio.gather(*(h.done for h in (first, low, high, later)))
        assert order == [first.text, later.text, high.text, low.text]

    _run(make_engine, body)


def test_stop_a_queued_and_a_running_stream(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        sched = engine.scheduler(sid)
        sched.set_limit(1)
        running = sched.submit("Write a plan for the garden party")
        queued = sched.submit("Write a note about apples")
        await _first_tokens(running)
        queued.stop("not needed")
        with pytest.raises(StreamStopped):
            await queued.done
        assert queued.status == "stopped" and queued.turn_id is None  # never recorded, never built
        running.stop("changed my mind")
        record = await running.done
        assert running.status == "stopped" and record.finish_reason == "cancelled"
        assert running.tokens < len(TASK_REPLY.split())
        task = (await engine.list_tasks(sid))[0]
        assert task.status == TaskStatus.FAILED and task.error == "changed my mind"
        assert 0 < task.progress < 1
        turns = await engine._ctx.ex.run("store", engine._ctx.store.list_turns, sid)
        assert len(turns) == 1
        await _check_graph(engine, sid)

    _run(make_engine, body, delay=0.01)


def test_an_unrelated_question_beside_a_task_is_its_own_stream_answered_at_once(make_engine: EngineFactory) -> None:
    """Multi-stream, not interruption: the question gets a Q&A stream with no task state in its
    context, is queued ahead of other work, cuts in, and the task runs on to its end."""
    async def body(engine: Engine) -> None:
        # one slot, taken by the task: the question uses the reserve
        state, sid, sched, task = await _task_streaming(engine, tokens=5, limit=1)
        later = sched.submit("Write a note about apples")  # other work, queued for the slot
        question = sched.submit("What is the capital of Peru?")
        assert question.predicted == "qa" and later.predicted == "task"
        assert sched.is_prompt(question) and not sched.is_prompt(later)
        answer = await question.done
        assert question.kind == "qa" and answer.output == QUESTION_REPLY
        assert "Running task:" not in answer.build.context.text()  # its own context, not the task's
        assert not task.done.done() and later.status == "queued"  # answered while the task runs
        assert engine._ctx.ex.urgent.cut_ins >= 1
        assert question.node_id is not None and state.graph.out_edges(question.node_id, EdgeKind.REFERENCES) == []
        record = await task.done
        assert record.output == TASK_REPLY and task.status == "done"
        await later.done
        await _check_graph(engine, sid)
        assert await engine.replay(answer.turn_id) == []

    _run(make_engine, body, delay=0.01)


def test_interruption_is_answered_while_the_task_keeps_running(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, sid, sched, task = await _task_streaming(engine, tokens=5)
        question = sched.submit("How is the task going?")
        assert question.predicted == "interrupt"
        answer = await question.done
        assert question.kind == "interrupt" and answer.output == QUESTION_REPLY
        assert not task.done.done() and task.status == "streaming"  # answered while the task runs
        text = answer.build.context.text()
        assert "Running task: Write a plan for the garden party" in text and "Output so far:" in text
        record = await task.done
        assert record.output == TASK_REPLY and task.status == "done"  # the task ran to its end
        assert question.first_token_at < task.finished_at
        assert engine._ctx.ex.urgent.cut_ins >= 1
        done = (await engine.list_tasks(sid))[0]
        assert done.status == TaskStatus.COMPLETE
        refs = state.graph.out_edges(question.node_id, EdgeKind.REFERENCES)
        assert [e.dst for e in refs] == [done.node_id]
        await _check_graph(engine, sid)
        assert await engine.replay(answer.turn_id) == []
        # the snapshot of the partial output it cites is stored, so the export validates
        from app.store.exchange import export_session, validate_document

        validate_document(await engine._ctx.ex.run("store", export_session, engine._ctx.store, sid))

    _run(make_engine, body, delay=0.01)


def test_stop_the_task_stops_it(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, sid, sched, task = await _task_streaming(engine, tokens=3)
        control = sched.submit("Stop the task")
        await control.done
        assert control.kind == "interrupt"
        record = await task.done
        assert task.status == "stopped" and record.finish_reason == "cancelled"
        stopped = (await engine.list_tasks(sid))[0]
        assert stopped.status == TaskStatus.FAILED and "stopped by the user" in stopped.error
        assert [e.dst for e in state.graph.out_edges(control.node_id, EdgeKind.RESOLVES)] == [stopped.node_id]
        await _check_graph(engine, sid)

    _run(make_engine, body, delay=0.01)


def test_engine_submit_still_answers_and_sees_running_tasks(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        task = engine.scheduler(sid).submit("Write a plan for the garden party with numbered steps")
        await _first_tokens(task, 3)
        record = await (await engine.submit(sid, "How far along is it?")).done
        assert "Running task: Write a plan for the garden party" in record.build.context.text()
        assert "Output so far" not in record.build.context.text()  # no snapshot evidence on this path
        await task.done
        assert await engine.replay(record.turn_id) == []

    _run(make_engine, body, delay=0.01)


def test_tasks_left_running_by_a_stopped_app_are_failed_on_the_next_run(make_engine: EngineFactory) -> None:
    async def crash(engine: Engine) -> str:
        state = await engine.open_session(None)
        handle = engine.scheduler(state.session_id).submit("Write a plan for the garden party with numbered steps")
        await _first_tokens(handle, 3)

        async def vanish(*_: Any) -> None:  # the app dies before the task's bookkeeping
            return None

        engine._streams.finish_stream = vanish  # type: ignore[method-assign]
        handle.stop()
        await handle.done
        assert (await engine.list_tasks(state.session_id))[0].status == TaskStatus.ACTIVE
        return state.session_id

    sid = _run(make_engine, crash, delay=0.01)

    async def next_run(engine: Engine) -> None:
        await engine.scheduler(sid).submit("What is the capital of France?").done
        task = (await engine.list_tasks(sid))[0]
        assert task.status == TaskStatus.FAILED and task.error.startswith("interrupted")
        assert engine._ctx.sessions[sid].graph.node(task.node_id).attrs["status"] == "failed"
        assert await engine.replay_state(sid) == []

    _run(make_engine, next_run)


# --------------------------------------------------------------------------- the real model


def _model_path() -> Path:
    path = Path(__file__).resolve().parents[2] / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip("the SmolLM2 GGUF is not fetched")
    return path


@pytest.mark.model
def test_a_suspended_generation_continues_exactly() -> None:
    from app.llm.llama import LlamaChatModel

    model = LlamaChatModel(_model_path(), prompt_cache=False)
    params = GenerationParams(max_tokens=60, temperature=0.0)
    long = [{"role": "user", "content": "Write a plan with numbered steps to organise a team offsite in Lisbon."}]
    short = [{"role": "user", "content": "What is the capital of France?"}]
    alone_long = model.chat(long, params=params).text
    alone_short = model.chat(short, params=params).text

    async def main() -> tuple[str, str, int]:
        ex = Executors()
        try:
            outer = ChatStream(ex, model, long, params=params)
            seen, inner = 0, None
            async for _ in outer:
                seen += 1
                if seen == 5:
                    inner = ChatStream(ex, model, short, params=params, urgent=True)
            assert inner is not None and outer.result is not None
            return outer.result.text, (await inner.wait()).text, ex.urgent.cut_ins
        finally:
            ex.shutdown()

    cut_long, cut_short, cut_ins = asyncio.run(main())
    model.close()
    assert cut_ins == 1
    assert cut_long == alone_long and cut_short == alone_short


@pytest.mark.model
def test_real_model_interruption_while_a_task_streams(tmp_path: Path) -> None:
    from app.config import Settings
    from app.main import build_engine

    _model_path()
    settings = Settings(data_dir=tmp_path / "data", max_concurrent_streams=4)
    engine = build_engine(settings)
    engine._ctx.config.generation = GenerationParams(max_tokens=200, temperature=0.0)
    engine.lab().set_task_steps("off")  # the task's own answer streams (its steps: tests/engine/test_agent.py)

    async def main() -> None:
        await engine.start()
        try:
            state = await engine.open_session(None)
            sched = engine.scheduler(state.session_id)
            task = sched.submit("Write a detailed plan with numbered steps to organise a team offsite in Lisbon")
            await _first_tokens(task, 10)
            question = sched.submit("How is the task going?")
            answer = await question.done
            assert question.kind == "interrupt" and answer.output.strip()
            assert not task.done.done()  # answered while the task streams
            record = await task.done
            assert task.status == "done" and record.finish_reason in ("stop", "length")
            print(f"\ninterruption first token {question.first_token_ms:.0f} ms after submission "
                  f"(task at {task.tokens} tokens, {engine._ctx.ex.urgent.cut_ins} cut-in); "
                  f"task first token {task.first_token_ms:.0f} ms, total {task.total_ms:.0f} ms")
            assert question.first_token_at < task.finished_at
            assert (await engine.list_tasks(state.session_id))[0].status == TaskStatus.COMPLETE
            assert await engine.replay_state(state.session_id) == []
        finally:
            await engine.close()

    asyncio.run(main())


def test_inputs_waiting_in_the_queue_survive_a_crash_and_are_queued_again(make_engine: EngineFactory) -> None:
    """Nothing is lost: an input is in the event log from submission until its turn is recorded."""
    from app.core.runtime.scheduler import pending_inputs

    first = make_engine([" ".join(f"w{i}" for i in range(400))], delay=0.01)

    async def crash() -> str:
        await first.start()
        state = await first.open_session(None)
        scheduler = first.scheduler(state.session_id)
        scheduler.set_limit(1)
        handles = [scheduler.submit(t) for t in ("Tell me about ships", "Now about trains", "And planes")]
        await asyncio.wait_for(handles[0].built, 30)
        handles[2].stop()  # withdrawn by the user: not to be resumed
        await asyncio.sleep(0.2)  # the store thread writes the log entries in order
        return state.session_id  # ... and the process dies here, the second input still queued

    session_id = asyncio.run(crash())
    second = make_engine(["OK."])

    async def restart() -> None:
        await second.start()
        await second.open_session(session_id)
        log = await second._ctx.ex.run("store", second._ctx.store.list_events, session_id)
        assert [p["text"] for p in pending_inputs(log)] == ["Now about trains"]
        (handle,) = await second.resume_inputs(session_id)
        record = await asyncio.wait_for(handle.done, 30)
        assert record.build.text == "Now about trains"
        log = await second._ctx.ex.run("store", second._ctx.store.list_events, session_id)
        assert pending_inputs(log) == []
        await second.close()

    asyncio.run(restart())


def test_an_input_is_read_by_the_intent_rules_once(make_engine: EngineFactory) -> None:
    """The text a stream was queued with is read once (its guessed path orders the queue; its build
    reuses the reading), and so is a submitted one whose fast intent is unsure (the model is asked,
    and the build's intent reads the same reading)."""
    async def body(engine: Engine) -> None:
        engine._ctx.config.llm_intent_below = 1.01  # the fast intent is always unsure: the model is always asked
        intents = engine._ctx.builder.intents
        reads: list[str] = []
        read = intents.read

        def counted(text: str) -> Any:
            reads.append(text)
            return read(text)

        intents.read = counted  # type: ignore[method-assign]
        state = await engine.open_session(None)
        handle = engine.scheduler(state.session_id).submit("Write a short checklist for the launch")
        streamed = await handle.done
        run = await engine.submit(state.session_id, "hmm")
        record = await run.done
        assert streamed.build.llm_intent["status"] != "skipped" != record.build.llm_intent["status"]
        assert reads == ["Write a short checklist for the launch", "hmm"]

    make_engine.run(body, chat=StreamModel(), llm_intent="auto", task_steps="off")
