"""Plan fields that act, through the engine on real SQLite + LanceDB (scripted fakes): a time
expression restricts recall to its date range (in the index query too), the required information
is checked against the compiled context, the routing conflict feature is computed, and every
such build replays exactly."""

from __future__ import annotations

from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, Message, Role
from tests.conftest import EngineFactory


def _said(i: int, text: str, at: str, who: str = "ana") -> Message:
    return Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                   author=Author(kind=AuthorKind.USER, id=who))


def test_a_time_expression_restricts_recall_to_its_date_range(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="dates")
        await engine.ingest(state.session_id, [
            _said(0, "We decided the budget review goes to the finance team.", "2026-03-02T10:00:00"),
            _said(1, "We decided the budget review waits for the audit.", "2026-03-09T10:00:00"),
            _said(2, "Lunch was good.", "2026-03-10T09:00:00"),
        ])
        record, _ = await engine.build(state.session_id, "What did we decide about the budget review yesterday?",
                                       at="2026-03-10T12:00:00", budget=400)
        dates = record.plan["retrieval"]["date_range"]
        assert dates["start"] == "2026-03-09T00:00:00" and dates["mode"] == "filter"
        assert record.recall_request["since"] == dates["start"] and record.recall_request["until"] == dates["end"]
        for run in record.recall.channels:
            if run.channel in ("vector", "fulltext"):  # the index was asked for the range only
                assert {i for i, _ in run.hits} <= {"m1"}, run
        assert "m0" not in record.context.source_ids() and "m1" in record.context.source_ids()
        assert record.plan["budget"]["timeouts_ms"] == {"recall": record.recall_request["timeout_ms"]}

    make_engine.run(body)


def test_required_information_is_checked_and_conflict_is_a_routing_feature(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="team")
        await engine.ingest(state.session_id, [
            _said(0, "bob: can you check the deploy logs?", "2026-03-10T10:00:00", "carl"),
            _said(1, "carl: the logs show a timeout in the worker", "2026-03-10T10:01:00", "bob"),
            _said(2, "the parser tests pass again", "2026-03-10T10:02:00", "dana"),
        ])
        run = await engine.submit(state.session_id, "dana: which parser tests were failing?")
        record = await run.done
        features = {c["node_id"]: c["components"] for c in record.build.routing["candidates"]}
        dana = state.node_of("m2")
        # the input addresses dana: the turns she is absent from conflict, hers does not
        assert features[dana].get("conflict", 0.0) == 0.0
        assert any(f.get("conflict", 0.0) < 0 for node, f in features.items() if node != dana)
        checks = {c.name: c for c in record.build.required}
        assert "current_goal" in checks and checks["current_goal"].met
        assert all(c.met or c.by.startswith("missing:") for c in checks.values())
        assert await engine.replay(record.turn_id) == []

    make_engine.run(body, replies=["The parser tests."])
