"""The input's full-text query starts with the build (issue 40 item 2, the recall stage's tail):
it needs only the text, so it runs on the index's threads while the query is embedded, read,
planned and routed, and the full-text channel takes its hits instead of querying after them."""

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


def _watch_text_queries(engine: Engine) -> list[tuple[str, int, float]]:
    """Every full-text query of the engine's index: (text, k, when it started)."""
    index = engine._ctx.index
    assert index is not None
    asked: list[tuple[str, int, float]] = []
    search = index.search_text

    def watched(query: str, k: int = 10, **kw: Any) -> list[tuple[str, float]]:
        asked.append((query, k, time.perf_counter()))
        return search(query, k, **kw)

    index.search_text = watched  # type: ignore[method-assign]
    return asked


def test_the_inputs_full_text_query_runs_while_the_query_is_embedded(make_engine: EngineFactory) -> None:
    embedder = SlowEmbedder(0.3)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="early")
        await engine.ingest(state.session_id, step_history(40))
        asked = _watch_text_queries(engine)
        record, _ = await engine.build(state.session_id, QUESTION)
        mine = [(k, at) for text, k, at in asked if text == QUESTION]
        assert len(mine) == 1, asked  # one query for the input: the early one, the channel asks no other
        k, started = mine[0]
        assert k == EARLY_TEXT_K and started < embedder.ended[QUESTION]  # under way before the embedding ended
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
        asked = _watch_text_queries(engine)
        assert await engine.replay(record.turn_id) == []
        assert not [q for q in asked if q[0] == QUESTION]  # nothing asked of the index again

    make_engine.run(body)
