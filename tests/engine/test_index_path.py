"""The build record says which vector path served recall (issue 40): flat below the ANN threshold,
"held" once the engine's index upkeep trained the index (the session's vectors searched in-process;
a session past ``AnnPolicy.held_rows`` takes the "ann" path: tests/store/test_index_ann.py); real
SQLite + LanceDB, the hash embedder."""

from __future__ import annotations

import asyncio

from app.core.engine.facade import Engine
from app.core.pipeline.record import BuildRecord
from app.core.types import Author, AuthorKind, Message, Role
from app.store.ann import AnnPolicy
from tests.conftest import EngineFactory


def _vector_path(record: BuildRecord) -> str:
    return next(run.path for run in record.recall.channels if run.channel == "vector")


def test_the_build_record_names_the_vector_path(make_engine: EngineFactory) -> None:
    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="big")
        await engine.ingest(state.session_id, [
            Message(message_id=f"m{i}", role=Role.USER, author=Author(kind=AuthorKind.USER, id="Ana"),
                    content=f"note {i}: the {('garden', 'trip', 'code', 'oven')[i % 4]} plan step {i % 37}",
                    at=f"2026-01-01T{i // 60 % 24:02d}:{i % 60:02d}:00Z") for i in range(700)])
        record, _ = await engine.build(state.session_id, "What about the garden plan?")
        assert _vector_path(record) == "flat" and engine.lab().vector_path() == "flat"
        index = engine._ctx.index  # a test looks behind the facade
        assert index is not None
        index.ann_policy = AnnPolicy(min_rows=600, rows_per_partition=200, nprobes=3)
        # the engine's own upkeep loop may be training already (it looks every second): ask until trained
        done = ""
        for _ in range(60):
            done = await engine.lab().index_upkeep()
            if engine.lab().vector_path() == "ann":
                break
            await asyncio.sleep(0.5)
        assert engine.lab().vector_path() == "ann", done
        record, _ = await engine.build(state.session_id, "What about the garden plan?")
        assert _vector_path(record) == "held" and engine.lab().vector_path() == "ann"

    make_engine.run(body)
