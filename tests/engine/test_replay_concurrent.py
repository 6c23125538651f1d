"""Replay stays exact when concurrent streams finish out of turn order: a task's long answer
lands after the turns of an interruption and a question, and turns built after all of them
replay exactly, in the live session and after reopening it (real SQLite and LanceDB)."""

from __future__ import annotations

import asyncio

from app.core.engine.facade import Engine
from tests.conftest import EngineFactory
from tests.engine.test_scheduler import StreamModel


def test_turns_after_an_out_of_order_answer_replay_exactly(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> list[str]:
        state = await engine.open_session(None)
        sid = state.session_id
        sched = engine.scheduler(sid)
        task = sched.submit("Write a plan for the garden party with numbered steps")
        while task.tokens < 3:
            await asyncio.sleep(0.005)
        quick = [sched.submit("How is the task going?"), sched.submit("What is the capital of Peru?")]
        await asyncio.gather(*(h.done for h in quick))
        assert not task.done.done()  # the task's answer is still streaming: it will land last
        await task.done
        later = [await (await engine.submit(sid, text)).done for text in
                 ("When is the garden party?", "Who brings the drinks for the party?")]
        order = [state.turns[t].message_ids for t in state.turn_order]
        assert len(order) == 5 and all(len(ids) == 2 for ids in order)
        for turn_id in state.turn_order:
            assert await engine.replay(turn_id) == [], turn_id
        return [r.turn_id for r in later]

    # the task answers in one stream (its plan of steps would add turns: tests/engine/test_agent.py)
    later = make_engine.run(body, chat=StreamModel(token_delay_s=0.01), max_streams=4, task_steps="off")

    async def reopened(engine: Engine) -> None:
        for turn_id in later:
            assert await engine.replay(turn_id) == []

    make_engine.run(reopened)
