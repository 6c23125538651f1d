"""An answer that asked a yes/no question and news that ignores it (issue 31's follow-up dev set,
the product's own build on the real embedder, all-MiniLM-L6-v2): the news starts a new branch, an
answer to the question continues the conversation that asked it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, Message, Role
from tests.conftest import EngineFactory

MODELS = Path(__file__).resolve().parents[2] / "models"
POTTERY = ("I started a pottery class at the community centre last month.",
           "That sounds lovely! Pottery is so relaxing and creative. Have you made a bowl yet?")


def _turn(text: str, answer: str) -> list[Message]:
    return [Message(message_id="u1", turn_id="t1", role=Role.USER, content=text, at="2024-01-02T09:00:00",
                    author=Author(kind=AuthorKind.USER)),
            Message(message_id="a1", turn_id="t1", role=Role.ASSISTANT, content=answer, at="2024-01-02T09:00:01",
                    author=Author(kind=AuthorKind.AGENT, id="assistant"))]


@pytest.mark.model
def test_news_that_ignores_a_yes_no_question_starts_a_new_branch(make_engine: EngineFactory) -> None:
    from app.llm.embedder import SentenceEmbedder

    if not (MODELS / "all-MiniLM-L6-v2").is_dir():
        pytest.skip("the bundled embedder is not fetched")

    async def body(engine: Engine) -> None:
        sid = (await engine.open_session(None, title="pottery")).session_id
        await engine.ingest(sid, _turn(*POTTERY))
        pottery = (await engine.session_state(sid)).node_of("t1")
        news = "My sister just opened a bakery downtown and the first week was packed!"
        record, _ = await engine.build(sid, news, at="2024-01-02T09:01:00")
        closeness = max(c["components"].get("sem", 0.0) for c in record.routing["candidates"])
        assert closeness > 0.3  # as close as chat on one subject often is: meaning alone would keep it
        assert record.anchor_node is None, record.routing["candidates"]
        record, _ = await engine.build(sid, "Not yet, my first bowl cracked in the kiln.", at="2024-01-02T09:01:00")
        assert record.anchor_node == pottery, record.routing["reason"]

    make_engine.run(body, embedder=SentenceEmbedder(MODELS / "all-MiniLM-L6-v2", n_threads=2),
                    config=EngineConfig(llm_intent="off"))
