"""The input's full-text query starts before recall (issue 40 item 2, the recall stage's tail): it
needs only the text, so it runs on the index's threads once the query is embedded, while the
intent, the plan and routing run, and the full-text channel takes its hits instead of querying
after them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.core.context.runner import EARLY_TEXT_K
from app.core.engine.facade import Engine
from app.llm.fakes import HashEmbedder
from tests.conftest import EngineFactory
from tests.texts import step_history

QUESTION = "What did we decide about the parser release?"


class SlowEmbedder(HashEmbedder):
    """A hash embedder that takes ``delay`` seconds for a query (a text or two), noting when it ended."""

    def __init__(self, delay: float) -> None:
        super().__init__(dim=64)
        self.delay = delay
        self.ended: dict[str, float] = {}

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        if len(texts) <= 2:
            time.sleep(self.delay)
        out = super().embed(texts, batch_size=batch_size)
        for text in texts:
            self.ended[text] = time.perf_counter()
        return out


def _watch_queries(engine: Engine) -> list[tuple[str, Any, int, float]]:
    """Every full-text and vector query of the engine's index: (kind, text or vector, k, when it started)."""
    index = engine._ctx.index
    assert index is not None
    asked: list[tuple[str, Any, int, float]] = []
    for name in ("search_text", "search_vector"):
        def watched(query: Any, k: int = 10, *, _search: Any = getattr(index, name), _name: str = name,
                    **kw: Any) -> list[tuple[str, float]]:
            asked.append((_name, query, k, time.perf_counter()))
            return _search(query, k, **kw)

        setattr(index, name, watched)
    return asked


def test_the_inputs_full_text_query_runs_while_the_query_is_embedded(make_engine: EngineFactory) -> None:
    embedder = SlowEmbedder(0.3)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="early")
        await engine.ingest(state.session_id, step_history(40))
        asked = _watch_queries(engine)
        record, _ = await engine.build(state.session_id, QUESTION)
        mine = [(k, at) for name, text, k, at in asked if name == "search_text" and text == QUESTION]
        assert len(mine) == 1, asked  # one query for the input: the early one, the channel asks no other
        k, started = mine[0]
        vector = min(at for name, _, _, at in asked if name == "search_vector")  # recall's first vector query
        assert k == EARLY_TEXT_K and embedder.ended[QUESTION] < started < vector
        run = next(r for r in record.recall.channels if r.channel == "fulltext" and not r.query)
        assert run.hits and not run.error
        index = engine._ctx.index
        assert index is not None  # the channel's hits are the first ones of a query of its own size
        assert run.hits == index.search_text(QUESTION, run.size, session_id=state.session_id,
                                             kinds=["message", "env"])

    make_engine.run(body, embedder=embedder)


def test_replay_answers_the_full_text_channel_from_the_record_without_an_early_query(
        make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="early replay")
        await engine.ingest(state.session_id, step_history(40))
        record = await (await engine.submit(state.session_id, QUESTION)).done
        asked = _watch_queries(engine)
        assert await engine.replay(record.turn_id) == []
        assert not [q for q in asked if q[0] == "search_text" and q[1] == QUESTION]  # nothing asked again

    make_engine.run(body)
