"""The canvas's branch actions on the engine: re-anchor a turn and undo it, focus, inject results
into another branch, checkpoints, collapsing and pinned positions.

Real SQLite + LanceDB in tmp dirs with the scripted fakes (as tests/engine/test_engine.py). What
every test comes back to: the changes persist, reload identically in a fresh engine, and replay
of every turn still shows no difference.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.core.engine.branches import AnchorCycleError, BranchError, NothingToUndoError, UnknownNodeError
from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.core.session.state import SessionState
from app.core.types import EdgeKind
from tests.conftest import EngineFactory

GARDEN = "Garden: plant tomatoes and basil in May"
TAXES = "Taxes: collect receipts for the tax return"
WATER = "Garden: how often should I water the tomatoes and basil"


async def _turn(engine: Engine, sid: str, text: str, **kw: Any) -> TurnRecord:
    return await (await engine.submit(sid, text, **kw)).done


async def _replay_all(engine: Engine, state: SessionState) -> dict[str, list[str]]:
    """Differences per turn, only for turns that differ (so ``{}`` means all exact)."""
    out = {}
    for turn_id in state.turn_order:
        diffs = await engine.replay(turn_id)
        if diffs:
            out[turn_id] = diffs
    return out


async def _three_turns(engine: Engine) -> tuple[SessionState, TurnRecord, TurnRecord, TurnRecord]:
    state = await engine.open_session(None)
    garden = await _turn(engine, state.session_id, GARDEN)
    taxes = await _turn(engine, state.session_id, TAXES)
    water = await _turn(engine, state.session_id, WATER)
    assert taxes.build.anchor_node is None and water.build.anchor_node == garden.node_id
    return state, garden, taxes, water


def test_reanchor_moves_the_edge_rebuilds_the_record_and_persists(make_engine: EngineFactory) -> None:
    async def first(engine: Engine) -> dict[str, Any]:
        state, garden, taxes, water = await _three_turns(engine)
        sid, graph = state.session_id, state.graph
        seen: list[tuple[str, str, str]] = []
        graph.edge_removed.connect(lambda e: seen.append(("removed", e.src, e.dst)))
        graph.edge_added.connect(lambda e: seen.append(("added", e.src, e.dst)))
        old_edge = graph.out_edges(water.node_id, EdgeKind.CONTINUES)[0]

        moved = await engine.reanchor(water.turn_id, taxes.node_id)

        assert seen == [("removed", water.node_id, garden.node_id), ("added", water.node_id, taxes.node_id)]
        assert (moved.turn_id, moved.node_id, moved.previous_anchor, moved.anchor) == (
            water.turn_id, water.node_id, garden.node_id, taxes.node_id)
        assert moved.change.removed_edges == (old_edge.edge_id,) and len(moved.change.added_edges) == 1
        assert graph.parent(water.node_id) == taxes.node_id and graph.root_of(water.node_id) == taxes.node_id
        record = moved.record
        assert record.build.anchor_node == taxes.node_id and record.build.routing["override"] == taxes.node_id
        assert (record.build.text, record.build.at, record.build.budget) == (WATER, water.build.at, water.build.budget)
        assert record.output == water.output and record.answer_message_id == water.answer_message_id
        assert [r.kind for r in record.revisions] == ["reanchor"]
        assert record.revisions[0].build == water.build  # the earlier build stays retrievable
        # The new anchor's turn is now the conversation the context continues.
        conversation = [b for b in record.build.context.blocks if b.block_type == "conversation"]
        assert TAXES in "".join(b.content for b in conversation)
        assert GARDEN not in "".join(b.content for b in conversation)
        # The index channel hits are the recorded ones; graph recall ran again for the new anchor.
        channels = {run.channel: run for run in record.build.recall.channels}
        old = {run.channel: run for run in water.build.recall.channels}
        assert channels["vector"] == old["vector"] and channels["fulltext"] == old["fulltext"]
        assert channels["graph"].hits != old["graph"].hits
        assert (await engine.turn_record(water.turn_id)) == record
        assert [(o.text, o.node) for o in state.overrides] == [(WATER, taxes.node_id)]

        # Stored: the old edge superseded (never deleted), the new one live, the move logged.
        live = await engine._ctx.ex.run("store", engine._ctx.store.load_graph, sid)
        every = await engine._ctx.ex.run("store", lambda: engine._ctx.store.load_graph(sid, include_superseded=True))
        assert live.model_dump() == graph.to_data().model_dump()
        superseded = [e for e in every.edges if e.edge_id == old_edge.edge_id][0]
        assert superseded.attrs["valid_to_seq"] == 3 and superseded.attrs["valid_to"]
        assert [e for e in live.edges if e.edge_id == moved.change.added_edges[0]][0].attrs["valid_from_seq"] == 3
        events = [e for e in await engine._ctx.ex.run("store", engine._ctx.store.list_events, sid) if e["type"] == "turn.reanchored"]
        assert [(e["payload"]["from"], e["payload"]["to"]) for e in events] == [(garden.node_id, taxes.node_id)]
        row = await engine._ctx.ex.run("store", engine._ctx.store.get_turn, water.turn_id)
        assert row["anchor_node_id"] == taxes.node_id
        assert await _replay_all(engine, state) == {}
        # The session still exports as a valid document (superseded edges included).
        from app.store.exchange import export_session, validate_document

        doc = await engine._ctx.ex.run("store", export_session, engine._ctx.store, sid)
        validate_document(doc)
        assert old_edge.edge_id in {e["edge_id"] for e in doc["pcm"]["graph"]["edges"]}
        return {"sid": sid, "water": water.turn_id, "water_node": water.node_id, "taxes_node": taxes.node_id,
                "graph": graph.to_data().model_dump(), "frontiers": graph.frontiers()}

    seen = make_engine.run(first)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        assert state.graph.to_data().model_dump() == seen["graph"]
        assert state.graph.frontiers() == seen["frontiers"]
        assert state.graph.parent(seen["water_node"]) == seen["taxes_node"]
        assert [(o.text, o.node) for o in state.overrides] == [(WATER, seen["taxes_node"])]
        assert await _replay_all(engine, state) == {}

    make_engine.run(reopened)


def test_undo_restores_the_anchor_the_build_and_the_routing(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        state, garden, taxes, water = await _three_turns(engine)
        graph = state.graph
        before = [tuple(o) for o in state.overrides]
        moved = await engine.reanchor(water.turn_id, taxes.node_id)
        seen: list[str] = []
        graph.edge_removed.connect(lambda e: seen.append(f"-{e.dst}"))
        graph.edge_added.connect(lambda e: seen.append(f"+{e.dst}"))

        undone = await engine.undo_reanchor(water.turn_id)

        assert undone.undo and (undone.previous_anchor, undone.anchor) == (taxes.node_id, garden.node_id)
        assert seen == [f"-{taxes.node_id}", f"+{garden.node_id}"]
        assert undone.change.removed_edges == moved.change.added_edges
        assert graph.parent(water.node_id) == garden.node_id and graph.root_of(water.node_id) == garden.node_id
        assert undone.record.build == water.build  # the original build, as it was
        assert [r.kind for r in undone.record.revisions] == ["reanchor", "undo"]
        assert undone.record.revisions[1].undoes == 0
        assert [tuple(o) for o in state.overrides] == before == []  # the override is withdrawn
        with pytest.raises(NothingToUndoError):
            await engine.undo_reanchor(water.turn_id)
        events = [e["type"] for e in await engine._ctx.ex.run("store", engine._ctx.store.list_events, state.session_id)]
        assert events.count("turn.reanchored") == 1 and events.count("turn.reanchor_undone") == 1
        # Redo is a re-anchor again; undoing twice then walks back to the submit-time anchor.
        await engine.reanchor(water.turn_id, taxes.node_id)
        await engine.reanchor(water.turn_id, None)  # a new root
        assert graph.parent(water.node_id) is None and water.node_id in graph.frontiers()
        assert [tuple(o) for o in state.overrides] == []  # a new root is no node to lean towards
        assert (await engine.undo_reanchor(water.turn_id)).anchor == taxes.node_id
        assert [o.node for o in state.overrides] == [taxes.node_id]
        assert (await engine.undo_reanchor(water.turn_id)).anchor == garden.node_id
        assert state.overrides == [] and graph.parent(water.node_id) == garden.node_id
        assert await _replay_all(engine, state) == {}
        return {"sid": state.session_id, "graph": graph.to_data().model_dump()}

    seen = make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        assert state.graph.to_data().model_dump() == seen["graph"]
        assert state.overrides == []
        assert await _replay_all(engine, state) == {}

    make_engine.run(reopened)


def test_reanchor_rejects_unknown_nodes_itself_and_its_descendants(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state, garden, taxes, water = await _three_turns(engine)
        graph = state.graph
        edges = [e.edge_id for e in graph.edges()]
        with pytest.raises(UnknownNodeError, match="unknown turn"):
            await engine.reanchor("no-such-turn", taxes.node_id)
        with pytest.raises(UnknownNodeError, match="unknown node"):
            await engine.reanchor(water.turn_id, "no-such-node")
        with pytest.raises(AnchorCycleError, match="itself"):
            await engine.reanchor(water.turn_id, water.node_id)
        with pytest.raises(AnchorCycleError, match="cycle"):  # water continues garden
            await engine.reanchor(garden.turn_id, water.node_id)
        with pytest.raises(NothingToUndoError):
            await engine.undo_reanchor(garden.turn_id)
        assert issubclass(AnchorCycleError, BranchError) and issubclass(BranchError, ValueError)
        assert [e.edge_id for e in graph.edges()] == edges  # nothing changed
        same = await engine.reanchor(water.turn_id, garden.node_id)  # where it is already
        assert same.change.removed_edges == same.change.added_edges == () and not same.record.revisions

    make_engine.run(body)


def test_a_reanchor_steers_later_similar_inputs_and_reloads(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        state = await engine.open_session(None)
        sid = state.session_id
        garden = await _turn(engine, sid, GARDEN)
        await _turn(engine, sid, TAXES)
        seeds = await _turn(engine, sid, "where are the receipts for seeds")
        assert seeds.build.anchor_node != garden.node_id
        await engine.reanchor(seeds.turn_id, garden.node_id)
        later = await _turn(engine, sid, "where are the receipts for compost")
        top = later.build.routing["candidates"][0]
        assert top["components"]["override"] > 0
        assert later.build.anchor_node == seeds.node_id  # on the garden branch now
        assert garden.node_id in list(state.graph.chain_back(later.build.anchor_node))
        assert await _replay_all(engine, state) == {}
        return {"sid": sid, "garden": garden.node_id}

    seen = make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        assert [(o.text, o.node) for o in state.overrides] == [("where are the receipts for seeds", seen["garden"])]

    make_engine.run(reopened)


def test_replay_is_exact_for_every_turn_after_reanchors_undos_injects_and_more_turns(
    make_engine: EngineFactory,
) -> None:
    """The guarantee the canvas relies on: whatever the user rearranged after the fact, every
    recorded turn replays to the same plan and context, live and after reopening."""
    texts = [GARDEN, TAXES, WATER, "Taxes: which receipts count for the home office",
             "Garden: the basil leaves turn yellow", "Garden: how often should I water the basil"]

    async def body(engine: Engine) -> str:
        state = await engine.open_session(None)
        sid = state.session_id

        async def exact() -> None:  # after every step, not only at the end: a later re-anchor
            assert await _replay_all(engine, state) == {}  # rebuilds a record and would hide a fault

        r = [await _turn(engine, sid, t) for t in texts[:3]]
        steps: list[Callable[[], Awaitable[Any]]] = [
            lambda: engine.reanchor(r[2].turn_id, r[1].node_id),  # water under taxes
            lambda: _append(r, _turn(engine, sid, texts[3])),  # built with water under taxes
            lambda: engine.reanchor(r[1].turn_id, r[0].node_id),  # taxes (water below it) under garden
            lambda: _append(r, _turn(engine, sid, texts[4])),
            lambda: engine.undo_reanchor(r[2].turn_id),  # water back under garden
            lambda: engine.inject(sid, [r[3].node_id], r[0].node_id),
            lambda: engine.set_focus(sid, r[1].node_id),
            lambda: _append(r, _turn(engine, sid, texts[5])),  # like water: not its withdrawn override
            lambda: engine.reanchor(r[5].turn_id, None),
            lambda: engine.reanchor(r[4].turn_id, r[5].node_id),  # onto a newer turn (not in its past)
            lambda: engine.undo_reanchor(r[1].turn_id),  # taxes a root again, the subtree with it
        ]
        for step in steps:
            await step()
            await exact()
        assert r[5].build.routing["focus"] == r[1].node_id
        assert all(c["components"].get("override", 0) == 0 for c in r[5].build.routing["candidates"])
        assert state.graph.root_of(r[3].node_id) == r[1].node_id
        return sid

    sid = make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(sid)
        assert len(state.turn_order) == len(texts)
        assert await _replay_all(engine, state) == {}

    make_engine.run(reopened)


async def _append(records: list[TurnRecord], turn: Awaitable[TurnRecord]) -> None:
    records.append(await turn)


def test_focus_is_recorded_replayed_and_kept(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        state, garden, taxes, water = await _three_turns(engine)
        sid = state.session_id
        assert water.build.routing["focus"] == taxes.node_id  # the latest turn's node, implicitly
        assert water.build.routing["focus_chosen"] is False
        updated: list[tuple[str, Any]] = []
        state.graph.node_updated.connect(lambda n: updated.append((n.node_id, n.attrs.get("focused"))))
        changed = await engine.set_focus(sid, taxes.node_id)
        assert (changed.previous, changed.focus) == (None, taxes.node_id) and updated == [(taxes.node_id, True)]
        record = await _turn(engine, sid, "Garden: which fertiliser for tomatoes")
        routing = record.build.routing
        assert routing["focus"] == taxes.node_id and routing["focus_chosen"] is True
        chosen = [c for c in routing["candidates"] if c["node_id"] == taxes.node_id][0]
        other = [c for c in routing["candidates"] if c["node_id"] == water.node_id][0]
        assert chosen["components"]["focus"] > other["components"]["focus"]
        assert await engine.replay(record.turn_id) == []
        with pytest.raises(UnknownNodeError):
            await engine.set_focus(sid, "no-such-node")
        return {"sid": sid, "taxes": taxes.node_id}

    seen = make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        assert state.focus == seen["taxes"] and state.focus_chosen()
        changed = await engine.set_focus(seen["sid"], None)
        assert changed.change.updated_nodes == (seen["taxes"],)
        assert state.graph.node(seen["taxes"]).attrs["focused"] is False
        latest = state.turns[state.turn_order[-1]].node_id
        record = await _turn(engine, seen["sid"], "Taxes: file it")
        assert record.build.routing["focus"] == latest and record.build.routing["focus_chosen"] is False
        assert await _replay_all(engine, state) == {}

    make_engine.run(reopened)


def test_inject_merges_an_answer_into_another_branch(make_engine: EngineFactory) -> None:
    replies = ["Tomatoes want six hours of sun [1].", "Keep every receipt for five years."]

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None)
        sid = state.session_id
        garden = await _turn(engine, sid, GARDEN)
        taxes = await _turn(engine, sid, TAXES)
        answer = garden.answer_message_id
        assert answer is not None
        before, _ = await engine.build(sid, "Taxes: what else", anchor_override=taxes.node_id)
        graph_hits = lambda b: [i for run in b.recall.channels if run.channel == "graph" for i, _ in run.hits]  # noqa: E731
        assert answer not in graph_hits(before)
        added: list[tuple[str, str, str]] = []
        state.graph.edge_added.connect(lambda e: added.append((e.kind, e.src, e.dst)))

        injected = await engine.inject(sid, [garden.node_id], taxes.node_id)

        assert injected.sources == (garden.node_id,) and len(injected.change.added_edges) == 1
        assert added == [("merges", taxes.node_id, garden.node_id)]
        again = await engine.inject(sid, [garden.node_id], taxes.node_id)
        assert again.skipped == (garden.node_id,) and again.change.added_edges == ()
        # A turn continuing the target: the merged answer is recalled as a chain member and cited.
        record = await _turn(engine, sid, "Taxes: what else", anchor_override=taxes.node_id)
        assert answer in graph_hits(record.build)
        assert answer in record.build.context.source_ids()
        evidence = await engine._ctx.ex.run("store", engine._ctx.store.get_evidence, answer)
        assert evidence is not None and evidence.content == replies[0]
        stored = await engine._ctx.ex.run("store", engine._ctx.store.load_graph, sid)
        assert [e.dst for e in stored.edges if e.kind == "merges"] == [garden.node_id]
        with pytest.raises(BranchError):
            await engine.inject(sid, [taxes.node_id], taxes.node_id)
        assert await _replay_all(engine, state) == {}
        # Undo: the merge is retired, later builds no longer see it, earlier turns still replay.
        removed: list[str] = []
        state.graph.edge_removed.connect(lambda e: removed.append(e.edge_id))
        undone = await engine.undo_inject(injected)
        assert undone.removed_edges == injected.change.added_edges == tuple(removed)
        assert state.graph.out_edges(taxes.node_id, EdgeKind.MERGES) == []
        assert (await engine.undo_inject(injected)).removed_edges == ()  # nothing left to take back
        after, _ = await engine.build(sid, "Taxes: what else", anchor_override=taxes.node_id)
        assert answer not in graph_hits(after)
        stored = await engine._ctx.ex.run("store", engine._ctx.store.load_graph, sid)
        assert [e for e in stored.edges if e.kind == "merges"] == []
        history = await engine._ctx.ex.run("store", lambda: engine._ctx.store.load_graph(sid, include_superseded=True))
        (merge,) = [e for e in history.edges if e.kind == "merges"]
        assert "valid_to_seq" in merge.attrs  # kept as history, bounded
        assert await _replay_all(engine, state) == {}

    make_engine.run(body, replies)


def test_checkpoints_collapsing_and_positions_persist_and_signal(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        state, garden, taxes, water = await _three_turns(engine)
        sid, graph = state.session_id, state.graph
        updated: list[dict[str, Any]] = []
        moved: list[tuple[str, float | None, float | None, bool]] = []
        graph.node_updated.connect(lambda n: updated.append(dict(n.attrs)))
        graph.node_moved.connect(lambda n: moved.append((n.node_id, n.x, n.y, n.pinned)))
        change = await engine.checkpoint(sid, garden.node_id, "before the move")
        assert change.updated_nodes == (garden.node_id,)
        assert (await engine.checkpoint(sid, taxes.node_id)).updated_nodes == (taxes.node_id,)
        assert graph.node(taxes.node_id).attrs["checkpoint"]  # the time, when no label is given
        await engine.set_collapsed(sid, garden.node_id, True)
        assert updated[0]["checkpoint"] == "before the move" and updated[-1]["collapsed"] is True
        change = await engine.move_nodes(sid, [(garden.node_id, 10, 20), (water.node_id, -5.5, 3)])
        assert change.moved_nodes == (garden.node_id, water.node_id)
        assert moved == [(garden.node_id, 10.0, 20.0, True), (water.node_id, -5.5, 3.0, True)]
        with pytest.raises(UnknownNodeError):
            await engine.move_nodes(sid, [(garden.node_id, 0, 0), ("no-such-node", 1, 1)])
        assert graph.node(garden.node_id).x == 10.0  # nothing moved by the refused call
        assert await _replay_all(engine, state) == {}
        return {"sid": sid, "graph": graph.to_data().model_dump(), "garden": garden.node_id}

    seen = make_engine.run(body)

    async def reopened(engine: Engine) -> None:
        state = await engine.open_session(seen["sid"])
        assert state.graph.to_data().model_dump() == seen["graph"]
        node = state.graph.node(seen["garden"])
        assert node.attrs["checkpoint"] == "before the move" and node.attrs["collapsed"] is True
        assert (node.x, node.y, node.pinned) == (10.0, 20.0, True)

    make_engine.run(reopened)
