"""The engine end to end: durable input, routing (branches, ambiguity, new roots), the streamed
answer bound to its evidence, the per-turn record, and exact replay of every turn.

The fast tests use real SQLite + LanceDB with the scripted fakes; the ``model`` tests run the
same flow on the real SmolLM2 GGUF and the real embedder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.config import Settings
from app.core.ports import GenerationParams
from app.store.sqlite import SqliteStore
from tests.conftest import EngineFactory


def test_turn_is_recorded_answered_traced_and_replayed(make_engine: EngineFactory) -> None:
    engine = make_engine(["Use the blue theme [1].", "The parser fails on empty input."])

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None, title="t")
        first = await (await engine.submit(state.session_id, "I prefer the blue theme for the website")).done
        tokens: list[str] = []
        run = await engine.submit(state.session_id, "Which theme did I prefer for the website?", on_token=tokens.append)
        record = await run.done
        assert "".join(tokens) == record.output == "The parser fails on empty input."
        # Routing: the follow-up continues the first turn; the first turn was a new root.
        assert first.build.anchor_node is None
        assert record.build.anchor_node == first.node_id
        # The earlier turn is evidence of the answer, bound by id.
        source_ids = record.build.context.source_ids()
        row = await engine._ctx.ex.run("store", engine._ctx.store.get_turn, record.turn_id)
        answer = await engine._ctx.ex.run("store", engine._ctx.store.get_message, row["answer_message_id"])
        assert [r.evidence_id for r in answer.refs] == source_ids and source_ids
        assert record.build.context.tokens <= 400
        # The profile statement of turn 1 reached the context of turn 2 as state.
        assert "Prefers: the blue theme for the website" in record.build.context.text()
        assert await engine.replay(first.turn_id) == []
        assert await engine.replay(record.turn_id) == []
        # Cited messages became evidences, so the session exports and validates.
        from app.store.exchange import export_session, validate_document

        doc = await engine._ctx.ex.run("store", export_session, engine._ctx.store, state.session_id)
        validate_document(doc)
        assert set(source_ids) <= set(doc["evidences"])
        await engine.close()

    asyncio.run(main())


def test_input_is_durable_before_the_answer_and_stop_is_prompt(tmp_path: Path, make_engine: EngineFactory) -> None:
    engine = make_engine([" ".join(f"w{i}" for i in range(300))], delay=0.01)

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        run = await engine.submit(state.session_id, "Tell me a very long story")
        # Before any token is consumed, the input is already committed by a second connection.
        other = SqliteStore(tmp_path / "pcm.sqlite3")
        try:
            stored = [m.content for m in other.list_messages(state.session_id)]
        finally:
            other.close()
        assert stored == ["Tell me a very long story"]
        await asyncio.sleep(0.05)
        run.stop()
        record = await run.done
        assert record.finish_reason == "cancelled"
        assert record.usage["completion_tokens"] < 300
        await engine.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("reply", "status"),
    [('{"mode": "task", "task_type": "planning", "goal": "plan the offsite"}', "ok"), ("no json here", "invalid")],
)
def test_llm_intent_signal_is_used_when_unsure_and_replayed_as_observed(
    make_engine: EngineFactory, reply: str, status: str
) -> None:
    engine = make_engine([reply, "Sure."], llm_intent="auto")
    engine._ctx.config.llm_intent_below = 1.01  # always ask, so the test does not depend on the fast path

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        record = await (await engine.submit(state.session_id, "offsite")).done
        assert record.build.llm_intent["status"] == status
        assert record.build.intent["llm"]["status"] == status
        if status == "ok":
            assert record.build.intent["mode"] == "task"
        assert record.output == "Sure."
        assert await engine.replay(record.turn_id) == []  # the model is not asked again
        assert len(engine._ctx.chat.calls) == 2
        await engine.close()

    asyncio.run(main())


@pytest.mark.model
def test_real_session_two_branches_ambiguity_new_roots_and_exact_replay(tmp_path: Path) -> None:
    from app import main as wiring

    settings = Settings.load(tmp_path / "data")
    engine = wiring.build_engine(settings, chat=True)
    engine._ctx.config.generation = GenerationParams(max_tokens=24)
    inputs = [
        "Plan a birthday party for my daughter Ana: venue, cake and guests.",
        "For the cake, should it be chocolate or vanilla?",
        "Help me fix the failing unit test in parser.py",
        "The test fails with a KeyError on empty input.",
        "Make a checklist: order the birthday cake and fix the failing test.",
        "Write a short poem about autumn leaves.",
    ]

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None, title="e2e")
        records = []
        for text in inputs:
            run = await engine.submit(state.session_id, text)
            records.append(await run.done)
        node = [r.node_id for r in records]
        anchors = [r.build.anchor_node for r in records]
        assert anchors[0] is None and anchors[2] is None and anchors[5] is None  # new roots
        assert anchors[1] == node[0] and anchors[3] == node[2]  # two branches
        # The input naming both branches has both as its two best candidates; whether their scores
        # are close enough to ask depends on what the model answered before (answers are routed on),
        # so when it is ambiguous it asks and keeps its best guess.
        routing = records[4].build.routing
        branch = {node[0]: "party", node[1]: "party", node[2]: "test", node[3]: "test"}
        assert {branch.get(c["node_id"]) for c in routing["candidates"][:2]} == {"party", "test"}
        assert anchors[4] in node[:4]
        if routing["ambiguous"]:
            assert routing["clarification"] and anchors[4] == routing["best_guess"]  # best guess kept
        for record in records:
            assert record.output.strip(), "the real model answered"
            assert record.usage["completion_tokens"] > 0 and record.timing.first_token_ms is not None
            assert record.build.context.tokens <= record.build.budget
            assert await engine.replay(record.turn_id) == [], f"replay differs for {record.build.text!r}"
        stored = await engine._ctx.ex.run("store", engine._ctx.store.load_graph, state.session_id)
        assert stored.model_dump() == state.graph.to_data().model_dump()
        await engine.close()

    asyncio.run(main())


def test_an_override_is_stored_and_steers_later_similar_inputs(make_engine: EngineFactory) -> None:
    engine = make_engine(["ok"])

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None)
        a = await (await engine.submit(state.session_id, "Garden: plant tomatoes and basil in May")).done
        b = await (await engine.submit(state.session_id, "Taxes: collect receipts for the tax return")).done
        assert b.build.anchor_node is None  # unrelated: a second root
        # The user files a question under the garden branch although it would not go there.
        moved = await (await engine.submit(state.session_id, "where are the receipts for seeds",
                                           anchor_override=a.node_id)).done
        assert moved.build.anchor_node == a.node_id and moved.build.routing["override"] == a.node_id
        later = await (await engine.submit(state.session_id, "where are the receipts for compost")).done
        top = later.build.routing["candidates"][0]
        assert top["components"]["override"] > 0
        # The correction survives a restart: a fresh engine reloads it from the stored records.
        engine._ctx.sessions.pop(state.session_id)
        fresh = await engine.open_session(state.session_id)
        assert [(said, node) for _, said, node in fresh.overrides] == [("where are the receipts for seeds", a.node_id)]
        assert await engine.replay(later.turn_id) == []
        await engine.close()

    asyncio.run(main())
