"""Answer versions on the engine: regenerate makes a second version of the same turn, not a turn
beside it; flipping shows one and puts the others away; a put-away version is neither continued
by routing nor recalled; every version keeps its own trace and replays exactly; all of it
survives a reopen.

Real SQLite + LanceDB in tmp dirs with the scripted chat fake (as tests/engine/test_branching.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.core.session import versions
from app.core.session.versions import NotATurnError
from tests.conftest import EngineFactory

GARDEN = "Garden: plant tomatoes and basil in May"
WATER = "Garden: how often should I water the tomatoes and basil"
LATER = "Garden: and what about the basil in the shade"


async def _turn(engine: Engine, sid: str, text: str, **kw: Any) -> TurnRecord:
    return await (await engine.submit(sid, text, **kw)).done


def _cited(record: TurnRecord) -> set[str]:
    return {r.evidence_id for b in record.build.context.blocks for r in b.refs}


def test_regenerate_makes_a_version_flips_and_replays(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        state = await engine.open_session(None)
        sid, graph = state.session_id, state.graph
        garden = await _turn(engine, sid, GARDEN)
        first = await _turn(engine, sid, WATER)

        second = await (await engine.answer_again(sid, first.node_id)).done

        # The same input, continuing the same node, with its own record and answer.
        assert second.turn_id != first.turn_id and second.build.text == WATER
        assert graph.parent(second.node_id) == graph.parent(first.node_id) == garden.node_id
        assert versions.versions(graph, first.node_id) == [first.node_id, second.node_id]
        assert versions.versions(graph, second.node_id) == [first.node_id, second.node_id]
        assert graph.node(first.node_id).attrs[versions.HIDDEN] is True
        assert not graph.node(second.node_id).attrs.get(versions.HIDDEN)
        # It answers afresh: nothing of the version it replaces is recalled, nor routed to.
        old = set(state.turns[first.turn_id].message_ids)
        assert not old & _cited(second) and set(second.build.excluded) == old
        assert second.build.routing["override"] == garden.node_id

        # A later input continues the shown version, and does not recall the put-away one.
        later = await _turn(engine, sid, LATER)
        assert later.build.anchor_node == second.node_id
        assert not old & _cited(later)

        # Flip back: the first version is shown, the second (with what continues it) put away.
        await engine.show_version(sid, first.node_id)
        assert graph.node(first.node_id).attrs[versions.HIDDEN] is False
        assert set(state.turns[later.turn_id].message_ids) <= set(versions.put_away_messages(state))
        again = await _turn(engine, sid, LATER)
        assert again.build.anchor_node == first.node_id

        # Regenerating any version joins the same group.
        third = await (await engine.answer_again(sid, first.node_id)).done
        assert versions.versions(graph, second.node_id) == [first.node_id, second.node_id, third.node_id]
        diffs = {t: d for t in state.turn_order if (d := await engine.replay(t))}
        assert diffs == {}
        return {"sid": sid, "group": [first.node_id, second.node_id, third.node_id], "shown": third.node_id}

    seen = make_engine.run(body, replies=("Water twice a week.", "Every other day.", "Shade is fine.",
                                          "Basil likes sun.", "Once a week."))

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        graph = state.graph
        assert versions.versions(graph, seen["group"][0]) == seen["group"]
        hidden = {n for n in seen["group"] if graph.node(n).attrs.get(versions.HIDDEN)}
        assert hidden == set(seen["group"]) - {seen["shown"]}

    make_engine.run(reopened)


def test_only_a_turn_can_be_answered_again(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        with pytest.raises(NotATurnError):
            await engine.answer_again(state.session_id, "no-such-node")

    make_engine.run(body)


def test_regenerate_through_the_stream_scheduler(make_engine: EngineFactory) -> None:
    """The desktop path: the window queues a regenerate on the session's scheduler."""
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        first = await _turn(engine, state.session_id, WATER)
        handle = engine.scheduler(state.session_id).submit(WATER, version_of=first.node_id)
        record = await handle.done
        assert isinstance(record, TurnRecord) and record.build.text == WATER
        assert versions.versions(state.graph, first.node_id) == [first.node_id, record.node_id]
        assert state.graph.node(first.node_id).attrs[versions.HIDDEN] is True
        assert await engine.replay(record.turn_id) == []

    make_engine.run(body, replies=("Twice a week.", "Every other day."))
