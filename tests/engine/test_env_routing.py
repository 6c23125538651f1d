"""ENV nodes as routing candidates (issue 34, Deliver 4) with the real MiniLM embedder, real SQLite +
LanceDB and the scripted chat model: after a watched file changed, "what changed in the report?"
routes to the change's ENV node and continues the branch the event belongs to, with the new
content pinned in its context; an event in the lane starts a new branch from its ENV node; an
input that has nothing to do with the events routes as before; every turn replays exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.facade import Engine
from app.core.types import BlockType, EnvEvent, NodeKind
from tests.conftest import EngineFactory

MODELS = Path(__file__).resolve().parents[2] / "models"


async def _ask(engine: Engine, sid: str, text: str) -> tuple[str, dict, str | None, str]:
    """Submit ``text``: its node, its routing record, the node it continues, its context's text."""
    run = await engine.submit(sid, text)
    record = await run.done
    return run.node_id, record.build.routing, record.build.anchor_node, record.build.context.text()


@pytest.mark.model
def test_a_question_about_a_change_routes_to_its_env_node(make_engine: EngineFactory, tmp_path: Path) -> None:
    if not (MODELS / "all-MiniLM-L6-v2").is_dir():
        pytest.skip("the MiniLM embedder is not fetched")
    from app.llm.embedder import SentenceEmbedder

    report = tmp_path / "report.md"

    async def body(engine: Engine) -> None:
        sid = (await engine.open_session(None)).session_id
        asked, _, _, _ = await _ask(engine, sid, "What does report.md say about the quarterly revenue?")
        haiku, _, _, _ = await _ask(engine, sid, "Write a haiku about autumn leaves falling in the park.")
        report.write_text("Quarterly revenue: 175 thousand euros, up from 100 thousand.\n", encoding="utf-8")
        change = EnvEvent(kind="file", source=str(tmp_path), uri=str(report), title="report.md",
                          content=report.read_text(encoding="utf-8"),
                          payload={"change": "modified", "path": "report.md", "folder": str(tmp_path)})
        [routed] = await engine.ingest_env(sid, [change])
        assert routed.target_node == asked  # the file's turn names it

        node, routing, anchor, context = await _ask(engine, sid, "What changed in the report?")
        assert routing["anchor_id"] == routed.node_id, routing  # the decision names the ENV node
        assert anchor == asked  # the branch the event belongs to goes on
        assert "175 thousand euros" in context  # the new content, pinned

        volcano = EnvEvent(kind="feed", source="https://news.example.org/feed.xml", uri="https://news.example.org/7",
                           title="Volcano erupts in Iceland near Grindavik",
                           content="A volcano erupted near Grindavik in Iceland; the town was evacuated overnight.",
                           payload={"feed": "https://news.example.org/feed.xml", "feed_title": "World news"})
        [lane] = await engine.ingest_env(sid, [volcano])
        assert lane.target_kind == "lane"
        erupt, routing, anchor, context = await _ask(engine, sid, "Where did the volcano erupt in Iceland?")
        assert routing["anchor_id"] == lane.node_id and anchor == lane.node_id  # a branch from the event
        state = await engine.session_state(sid)
        assert state.graph.parent(erupt) == lane.node_id and state.graph.node(lane.node_id).kind == NodeKind.ENV
        assert "Grindavik" in context

        _, routing, anchor, _ = await _ask(engine, sid, "Make the haiku about autumn leaves rhyme.")
        assert anchor == haiku and routing["anchor_id"] == haiku  # unrelated to the events: as before

        for turn_id in await engine.turn_statuses(sid):
            assert await engine.replay(turn_id) == [], turn_id
        record = await engine.turn_record(state.graph.node(node).ref_id or "")
        pinned = [b for b in record.build.context.blocks if b.block_type == BlockType.EVIDENCE
                  and any(r.evidence_id == change.event_id for r in b.refs)]
        assert pinned

    make_engine.run(body, embedder=SentenceEmbedder(MODELS / "all-MiniLM-L6-v2", n_threads=1))
