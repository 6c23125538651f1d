"""The resident agent end to end on the scripted model (``agent_model.AgentModel``): a task planned
into steps that run in dependency order, steered by words and by the facade's buttons (pause,
resume, amend, cancel, edit the steps), a failed step retried once, and everything replayed
exactly from the event log (``Engine.replay_state``, ``Engine.replay`` of every turn).

Real SQLite + LanceDB in tmp dirs; the scripted model writes, for each step, its name and the
constraints and changes its context shows, so a result carries an amendment only if the step's
context did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from app.core.engine.env_answers import Noticed
from app.core.engine.facade import Engine
from app.core.runtime.scheduler import StreamHandle
from app.core.tasks.steering import RESTART
from app.core.types import EdgeKind, EnvEvent, NodeKind, Task, TaskStatus
from tests.conftest import EngineFactory, stored
from tests.engine.agent_model import PLAN, AgentModel

TASK = "Plan and draft the team offsite with numbered steps"


def _run(make_engine: EngineFactory, body: Callable[[Engine], Awaitable[Any]], model: AgentModel | None = None,
         **options: Any) -> Any:
    options.setdefault("max_streams", 2)
    return make_engine.run(body, chat=model or AgentModel(), **options)


async def _tokens(handle: StreamHandle, n: int) -> None:
    while handle.tokens < n and not handle.done.done():
        await asyncio.sleep(0.002)


async def _live_step(engine: Engine, sid: str, root_id: str, n: int = 1) -> StreamHandle:
    """The handle of the first step of ``root_id`` that streams, once it produced ``n`` tokens."""
    for _ in range(5000):
        steps = {t.task_id for t in await engine.list_tasks(sid) if t.parent_task_id == root_id}
        live = [h for h in engine.scheduler(sid).running() if h.run_task_id in steps and h.tokens >= n]
        if live:
            return live[0]
        await asyncio.sleep(0.002)
    raise AssertionError("no step streamed")


async def _task(engine: Engine, sid: str, task_id: str) -> Task:
    return next(t for t in await engine.list_tasks(sid) if t.task_id == task_id)


async def _replays(engine: Engine, sid: str) -> None:
    """The task state folds back from the log, and every turn's build replays exactly."""
    assert await engine.replay_state(sid) == []
    for turn_id in (await engine.turn_statuses(sid)):
        assert await engine.replay(turn_id) == [], turn_id


async def _started(engine: Engine, text: str = TASK, **kw: Any) -> tuple[str, StreamHandle, str]:
    state = await engine.open_session(None)
    handle = engine.scheduler(state.session_id).submit(text, **kw)
    await handle.built
    assert handle.task_id is not None
    return state.session_id, handle, handle.task_id


def test_a_task_is_planned_by_the_model_and_its_steps_run_in_dependency_order(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        record = await handle.done
        assert record.output.startswith("Plan for") and "proposed by the model" in record.output
        done = await engine.wait_task(sid, root_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE
        tasks = await engine.list_tasks(sid)
        steps = sorted((t for t in tasks if t.parent_task_id == root_id), key=lambda t: t.step)
        assert [s.name for s in steps] == [s["name"] for s in PLAN["steps"]]
        assert [s.depends_on for s in steps] == [[], [steps[0].task_id], [steps[0].task_id]]
        assert all(s.status == TaskStatus.COMPLETE and s.acceptance for s in steps)
        # each step ran after what it depends on, in a turn of its own, its context the step's stack view
        state = engine._ctx.sessions[sid]
        first_turns = [s.runs[0] for s in steps]
        seqs = [state.turns[t].seq for t in first_turns]
        assert seqs[0] < seqs[1] and seqs[0] < seqs[2]
        step_record = await engine.turn_record(steps[1].runs[0])
        text = step_record.build.context.text()
        assert f"Root goal: {done.name}" in text and f"Current task: {steps[1].name}" in text
        assert f"Done: {steps[0].name} → Done: {steps[0].name}." in text  # the finished step's result
        assert step_record.build.task["run"] is True
        # the result: the steps' outputs under their names, an artifact bound to it
        result = await stored(engine, lambda store: store.get_evidence(done.result_evidence_ids[0]))
        for n, step in enumerate(steps, start=1):
            assert f"{n}. {step.name}\nDone: {step.name}." in result.content
        artifacts = [n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("task_id") == root_id]
        assert [a.ref_id for a in artifacts] == done.result_evidence_ids
        # the export lists the steps with depends_on
        from app.store.exchange import export_session, validate_document

        doc = await stored(engine, export_session, sid)
        validate_document(doc)
        exported = {t["task_id"]: t for t in doc["session"]["task_state"]["todo_list"]["tasks"]}
        assert exported[steps[2].task_id]["depends_on"] == [steps[0].task_id]
        await _replays(engine, sid)

    _run(make_engine, body)


def test_a_proposal_that_fails_the_check_is_replaced_by_the_rules_plan(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine, "Book the venue, send the invitations and order the food")
        record = await handle.done
        assert "made by rules" in record.output
        done = await engine.wait_task(sid, root_id, timeout=60)
        steps = sorted((t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id), key=lambda t: t.step)
        assert [s.name for s in steps] == ["Book the venue", "Send the invitations", "Order the food"]
        assert done.status == TaskStatus.COMPLETE
        events = await stored(engine, lambda store: store.list_events(sid))
        [planned] = [e["payload"] for e in events if e["type"] == "task.planned"]
        assert planned["source"] == "rules" and planned["problems"] and planned["proposal"]
        await _replays(engine, sid)

    bad = {"steps": [{"name": "x", "acceptance": "} ]", "depends_on": [2]}]}
    _run(make_engine, body, AgentModel(plan=bad))


def test_a_statement_to_remember_is_never_planned_into_steps(make_engine: EngineFactory) -> None:
    """"Remember that …" reads as a task to the intent rules (an imperative verb), yet asks for no
    work: no plan is asked for, no step is made, and ``pcm ask`` answers it as a turn."""
    model = AgentModel()

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        for text in ("Remember that the launch is on Friday.", "Never deploy on Fridays."):
            assert engine.input_kind(sid, text) == "qa"
            record = await engine.scheduler(sid).submit(text).done
            assert record is not None and not record.output.startswith("Plan for")
        assert engine.input_kind(sid, TASK) == "task"
        assert not [t for t in await engine.list_tasks(sid) if t.step]
        assert "plan" not in model.kinds
        await _replays(engine, sid)

    _run(make_engine, body, model)


def test_pause_by_words_keeps_the_work_and_resume_continues_it(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        step = await _live_step(engine, sid, root_id, 4)
        sched = engine.scheduler(sid)
        control = sched.submit("Wait, pause the task")
        await control.done
        assert control.kind == "interrupt" and (await step.done).finish_reason == "cancelled"
        paused = await engine.wait_task(sid, root_id, timeout=30)
        assert paused.paused and paused.status == TaskStatus.BLOCKED
        step_task = await _task(engine, sid, step.task_id or "")
        assert step_task.paused and step_task.checkpoint_id
        events = await stored(engine, lambda store: store.list_events(sid))
        [pause] = [e["payload"] for e in events if e["type"] == "task.paused"]
        assert pause["tokens_after_stop"] is not None and pause["tokens_after_stop"] <= 1
        kept = await stored(engine, lambda store: store.get_evidence(step_task.checkpoint_id))
        assert kept.content.startswith(f"Done: {step_task.name}.") and kept.metadata["partial"]
        node = engine._ctx.sessions[sid].graph.node(paused.node_id)
        assert node.attrs["paused"] and node.attrs["steer"].startswith("paused")
        assert not [h for h in sched.running() if h.run_task_id]  # nothing runs while it is paused
        # resume by words: the step continues from its checkpoint, the task runs to its end
        resume = sched.submit("Resume")
        await resume.done
        done = await engine.wait_task(sid, root_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE and not done.paused
        again = await _task(engine, sid, step_task.task_id)
        continuation = await engine.turn_record(again.runs[-1])
        assert continuation.build.text.startswith("Continue step")
        assert f"Work so far: {kept.content}" in continuation.build.context.text()
        result = await stored(engine, lambda store: store.get_evidence(again.result_evidence_ids[0]))
        assert result.content.startswith(kept.content)  # the kept work, then its continuation
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.004))


def test_buttons_pause_resume_and_cancel_through_the_facade(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        await _live_step(engine, sid, root_id, 2)
        steered = await engine.pause_task(sid, root_id)
        assert steered.task.paused and "Paused" in steered.line
        await engine.wait_task(sid, root_id, timeout=30)
        resumed = await engine.resume_task(sid, root_id)
        assert not resumed.task.paused
        await _live_step(engine, sid, root_id, 2)
        cancelled = await engine.cancel_task(sid, root_id)
        assert cancelled.task.status == TaskStatus.FAILED and cancelled.task.error == "cancelled by the user"
        await asyncio.sleep(0.05)
        steps = [t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id]
        assert all(s.status == TaskStatus.FAILED for s in steps if s.status != TaskStatus.COMPLETE)
        while [h for h in engine.scheduler(sid).running() if h.run_task_id]:
            await asyncio.sleep(0.01)
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.004))


def test_an_amendment_by_words_adds_a_step_and_reaches_the_result(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        await _live_step(engine, sid, root_id, 2)
        amend = engine.scheduler(sid).submit("While you're at it, also add a budget section")
        record = await amend.done
        assert "add a budget section" in record.output and "next step" in record.output
        done = await engine.wait_task(sid, root_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE and done.constraints == ["add a budget section"]
        steps = sorted((t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id), key=lambda t: t.step)
        assert steps[-1].name == "Add a budget section" and steps[-1].depends_on
        result = await stored(engine, lambda store: store.get_evidence(done.result_evidence_ids[0]))
        assert "Add a budget section" in result.content and "As asked: add a budget section." in result.content
        node = engine._ctx.sessions[sid].graph.node(done.node_id)
        assert "takes effect at the next step" in node.attrs["steer"]
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.003))


def test_an_amendment_without_a_step_left_restarts_the_running_one_from_its_checkpoint(
        make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        handle = engine.scheduler(sid).submit(TASK)  # one stream: no step is left to take the amendment
        await _tokens(handle, 4)
        assert handle.task_id is not None
        steered = await engine.amend_task(sid, handle.task_id, "use metric units")
        assert steered.effect == RESTART
        done = await engine.wait_task(sid, handle.task_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE and done.checkpoint_id
        result = await stored(engine, lambda store: store.get_evidence(done.result_evidence_ids[0]))
        kept = await stored(engine, lambda store: store.get_evidence(done.checkpoint_id))
        assert result.content.startswith(kept.content) and "As asked: use metric units." in result.content
        events = await stored(engine, lambda store: store.list_events(sid))
        assert [e["payload"]["task_id"] for e in events if e["type"] == "task.restarted"] == [done.task_id]
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.004), task_steps="off")


def test_a_failed_step_runs_once_more_then_fails_with_what_needs_it(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        done = await engine.wait_task(sid, root_id, timeout=60)
        steps = sorted((t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id), key=lambda t: t.step)
        first, agenda, bookings = steps
        assert first.status == TaskStatus.FAILED and first.attempts == 2 and "failed twice" in first.error
        assert agenda.status == bookings.status == TaskStatus.FAILED
        assert agenda.error == f"a step it needs failed: {first.name}"
        assert done.status == TaskStatus.FAILED and done.error.startswith(f"step 1 \u201c{first.name}\u201d failed")
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(fail=["Choose the venue"]))


def test_the_steps_are_edited_before_the_task_runs_and_while_it_runs(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        handle = engine.run_task(sid, "Get ready for the move", hold=True)  # (its intent alone is not a task)
        await handle.done
        assert handle.task_id is not None
        root_id = handle.task_id
        held = await engine.wait_task(sid, root_id, timeout=30)
        assert held.paused and not [h for h in engine.scheduler(sid).running() if h.run_task_id]
        edited = await engine.edit_steps(sid, root_id, rename={2: "Draft the moving-day agenda"}, remove=[3],
                                         add=[("Book the van", "a van is booked for the day")])
        assert "3 steps" in edited.line
        await engine.resume_task(sid, root_id)
        await _live_step(engine, sid, root_id, 1)
        await engine.edit_steps(sid, root_id, add=[("Tell the neighbours", "")])
        done = await engine.wait_task(sid, root_id, timeout=60)
        steps = sorted((t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id), key=lambda t: t.step)
        ran = [s.name for s in steps if s.status == TaskStatus.COMPLETE]
        assert ran == [PLAN["steps"][0]["name"], "Draft the moving-day agenda", "Book the van", "Tell the neighbours"]
        removed = [s for s in steps if s.status == TaskStatus.FAILED]
        assert [s.attempts for s in removed] == [0] and done.status == TaskStatus.COMPLETE
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.002))


def test_the_graph_links_steps_to_their_task_and_runs_to_their_step(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine)
        done = await engine.wait_task(sid, root_id, timeout=60)
        state = engine._ctx.sessions[sid]
        for step in (t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id):
            spawned = state.graph.in_edges(step.node_id, EdgeKind.SPAWNED)
            assert {e.src for e in spawned} == {done.node_id, *(state.node_of(t) for t in step.runs)}
            assert state.graph.node(step.node_id).attrs["status"] == "complete"

    _run(make_engine, body)


def test_a_watched_file_that_changes_while_the_task_runs_reaches_its_result(make_engine: EngineFactory,
                                                                            tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    report.write_text("Figures: revenue 100.\n", encoding="utf-8")

    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine, "Summarise report.md for the board with numbered steps")
        await _live_step(engine, sid, root_id, 2)
        report.write_text("Figures: revenue 175.\n", encoding="utf-8")  # the file changes while step 1 runs
        event = EnvEvent(kind="file", source=str(tmp_path), uri=str(report), title="report.md",
                         content=report.read_text(encoding="utf-8"),
                         payload={"change": "modified", "path": "report.md", "folder": str(tmp_path)})
        [routed] = await engine.ingest_env(sid, [event])
        assert routed.task_id == root_id and routed.how == "mention"
        done = await engine.wait_task(sid, root_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE and event.event_id in done.events
        assert any(c.startswith("report.md changed: Figures: revenue 175") for c in done.constraints), done.constraints
        result = await engine.task_result(sid, root_id)
        assert "The new figure is 175" in result  # the later steps read the new content
        later = [t for t in await engine.list_tasks(sid) if t.parent_task_id == root_id and t.step > 1]
        context = (await engine.turn_record(later[0].runs[0])).build.context.text()
        assert "Changed meanwhile:" in context and "revenue 175" in context
        await _replays(engine, sid)

    _run(make_engine, body, AgentModel(delay=0.004))


@pytest.mark.parametrize("mode", ["notify", "answer", "off"])
def test_an_event_on_an_idle_branch_leaves_a_notice_or_an_answer(make_engine: EngineFactory, tmp_path: Path,
                                                                  mode: str) -> None:
    notes = tmp_path / "budget.md"

    async def body(engine: Engine) -> None:
        engine._ctx.config.proactive = mode
        state = await engine.open_session(None)
        sid = state.session_id
        heard: list[Noticed] = []
        queued: list[StreamHandle] = []
        engine.env_noticed.connect(heard.append)
        engine.scheduler(sid).stream_queued.connect(queued.append)
        record = await (await engine.submit(sid, "What is in budget.md about the travel costs?")).done
        event = EnvEvent(kind="file", source=str(tmp_path), uri=str(notes), title="budget.md",
                         content="Travel costs: 900 euros.", payload={"change": "modified", "path": "budget.md"})
        [routed] = await engine.ingest_env(sid, [event])
        assert routed.target_kind == "turn" and routed.target_node == record.node_id
        if mode == "off":
            assert heard == [] and queued == []
            return
        [notice] = heard
        assert notice.node_id == record.node_id and "budget.md changed" in notice.line and notice.mode == mode
        if mode == "notify":
            assert queued == []
            return
        [handle] = queued
        answer = await handle.done
        assert answer.output and handle.answer_cap == engine._ctx.config.proactive_max_tokens
        node = engine._ctx.sessions[sid].graph.node(answer.node_id)
        assert record.node_id in engine._ctx.sessions[sid].graph.chain_back(node.node_id, limit=5)
        events = await stored(engine, lambda store: store.list_events(sid))
        assert [e["payload"]["stream_id"] for e in events if e["type"] == "env.noticed"] == [handle.stream_id]

    _run(make_engine, body, AgentModel())


def test_twenty_task_inputs_are_planned_and_run_to_completion(make_engine: EngineFactory) -> None:
    from tests.core.tasks.test_steps import TASK_INPUTS

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        handles = [engine.run_task(sid, text) for text in TASK_INPUTS]
        for handle in handles:
            await handle.done
        for handle, text in zip(handles, TASK_INPUTS):
            assert handle.task_id is not None, text
            done = await engine.wait_task(sid, handle.task_id, timeout=120)
            assert done.status == TaskStatus.COMPLETE, (text, done.error)
            steps = sorted((t for t in await engine.list_tasks(sid) if t.parent_task_id == done.task_id and t.step),
                           key=lambda t: t.step)
            assert 2 <= len(steps) <= 7, text
            assert all(s.acceptance and s.status == TaskStatus.COMPLETE for s in steps), [
                (s.name, s.status, s.error, s.acceptance) for s in steps]
            assert all(s.depends_on for s in steps[1:]), text
        assert await engine.replay_state(sid) == []

    _run(make_engine, body, AgentModel(words=8), task_steps="rules", max_streams=4)


def test_a_step_the_agent_runs_acts_and_never_asks_the_user(make_engine: EngineFactory) -> None:
    """A step is work the user already asked for: its plan acts, and its context tells the model
    to do the step, not to ask first (a vague step name once read as an unclear request)."""
    async def body(engine: Engine) -> None:
        sid, handle, root_id = await _started(engine, "Write a step-by-step plan to migrate the blog to a static site")
        done = await engine.wait_task(sid, root_id, timeout=60)
        assert done.status == TaskStatus.COMPLETE
        runs = [r for t in await engine.list_tasks(sid) if t.parent_task_id == root_id for r in t.runs]
        assert runs
        for run in runs:
            build = (await engine.turn_record(run)).build
            assert not build.plan["needs_clarification"], build.plan["candidate_id"]
            assert "Unclear, ask first" not in build.context.text()

    _run(make_engine, body, AgentModel(), task_steps="rules")
