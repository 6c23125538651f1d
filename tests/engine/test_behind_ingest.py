"""Background work behind a history import (issue 40 item 3): the memory writer and the summaries
wait until an import made of chunks ingested back to back has settled, instead of working in the
moment between two chunks and taking the cores from the next chunk's embedding."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

import pytest

from app.core.engine import index_upkeep, sessions
from app.core.engine.facade import Engine
from app.core.engine.index_upkeep import IndexUpkeep
from app.core.ports import WordTokenCounter
from app.core.runtime.executors import Executors
from tests.conftest import EngineFactory
from tests.texts import step_history


def test_the_memory_writer_and_the_summaries_start_only_once_an_import_has_settled(
        make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "INGEST_SETTLE_S", 2.0, raising=False)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="import")
        for start in (0, 20, 40):  # an import in three chunks
            await engine.ingest(state.session_id, step_history(20, start=start))
        await asyncio.sleep(0.5)  # the loop is free, but the import ended a moment ago
        assert engine.lab().memory_stats().runs == 0
        assert engine._summaries.stats.misses == 0
        await engine.memory_idle()
        await engine._summaries.idle()
        assert engine.lab().memory_stats().pieces == 60  # every chunk's turns, once the import settled
        assert engine._summaries.stats.misses > 0

    make_engine.run(body)


class SeenCounter(WordTokenCounter):
    """Counts words, and keeps every text it was asked about."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return super().count(text)


def test_the_tokens_of_ingested_messages_are_counted_and_the_heap_settled_once_the_import_has_settled(
        make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "INGEST_SETTLE_S", 1.0, raising=False)
    monkeypatch.setattr(sessions, "WARM_BATCH", 15, raising=False)
    counter = SeenCounter()

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="import")
        await asyncio.gather(*engine._warming)  # its read-ahead settles the heap too: not during the sleep below
        for start in (0, 20):  # an import in two chunks
            await engine.ingest(state.session_id, step_history(20, start=start))
        frozen = gc.get_freeze_count()
        await asyncio.sleep(0.3)
        rendered = {m.render() for m in engine._ctx.sessions[state.session_id].messages.values()}
        assert len(rendered) == 40 and not rendered & set(counter.seen)  # not while the import may go on
        assert gc.get_freeze_count() == frozen  # nor the heap settled (a full collection)
        await engine._sessions.counted()
        assert rendered <= set(counter.seen)  # every message's, once it settled
        assert gc.get_freeze_count() > frozen

    make_engine.run(body, counter=counter)


class BackloggedIndex:
    """The upkeep's view of an index that always has work: rows to fold (or to train a first
    index on), and rows only training the index again would take in; records each upkeep's
    ``retrain``."""

    upkeep_driven = False

    def __init__(self) -> None:
        self.backlog = 0  # rows to fold, or to train a first ANN index on
        self.untrained = 0  # rows only training the index again takes in
        self.runs: list[bool] = []

    def upkeep_due(self) -> bool:
        return True

    def upkeep_backlog(self, *, retrain: bool = True) -> int:
        return max(self.backlog, self.untrained if retrain else 0)

    def upkeep(self, *, force: bool = False, retrain: bool = True) -> str:
        self.runs.append(retrain)
        return "folded"


def test_the_index_upkeep_waits_behind_an_import_until_its_backlog_reaches_the_bound() -> None:
    index = BackloggedIndex()
    importing = [True]

    async def body() -> None:
        ex = Executors()
        upkeep = IndexUpkeep(SimpleNamespace(index=index, ex=ex), every_s=0.01,  # type: ignore[arg-type]
                             importing=lambda: importing[0])
        upkeep.start()
        try:
            index.untrained = 10 * index_upkeep.IMPORT_BACKLOG
            await asyncio.sleep(0.3)
            assert index.runs == []  # an import under way: training and folding wait, training again most of all
            index.backlog = index_upkeep.IMPORT_BACKLOG  # unless too many rows wait to be folded in
            await asyncio.sleep(0.3)
            assert index.runs and not any(index.runs)  # and then the index is not trained again
            index.backlog, importing[0] = 0, False
            runs = len(index.runs)
            await asyncio.sleep(0.3)
            assert all(index.runs[runs:]) and len(index.runs) > runs  # once the import settled, it is
        finally:
            await upkeep.close()
            ex.shutdown(wait=True)

    asyncio.run(body())
