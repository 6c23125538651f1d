"""A turn replays exactly after memories change later (real SQLite and LanceDB): a memory enters
a session's recall no earlier than the session had it, so the replay of a turn built before does
not see it.

- the memory writer's later write in the turn's session links (so rewrites) a memory of another
  session, which stays that session's — it must not become a note of this one, stamped with its
  first recording (``pcm eval streams``' file scenario: 88 candidates built, 89 replayed);
- the user accepts a memory from outside (an import's): other sessions see it from then on.
"""

from __future__ import annotations

import asyncio

from app.core.engine.facade import Engine
from app.core.types import EnvEvent
from tests.conftest import EngineFactory


def _changed(folder: str, name: str, total: int) -> EnvEvent:
    return EnvEvent(kind="file", source=folder, uri=f"{folder}/{name}", title=name,
                    content=f"Figures updated: the total is now {total}.",
                    payload={"change": "modified", "path": name, "folder": folder})


def test_a_turn_replays_exactly_after_its_session_links_another_sessions_memory(
        make_engine: EngineFactory, tmp_path) -> None:
    folder = str(tmp_path / "files")

    async def body(engine: Engine) -> None:
        first = await engine.open_session(None, title="report")
        await engine.ingest_env(first.session_id, [_changed(folder, "report.md", 120)])
        await engine.memory_idle()
        theirs = {m.fragment_id for sid, m in await engine.memories() if sid == first.session_id}
        assert theirs, "the first session's file change left no memory"

        second = await engine.open_session(None, title="sales")
        record = await (await engine.submit(second.session_id, "Check the figures in sales.md and write a short note")).done
        await engine.memory_idle()
        await engine.ingest_env(second.session_id, [_changed(folder, "sales.md", 137)])
        await engine.memory_idle()
        rewritten = {m.fragment_id: m for sid, m in await engine.memories() if sid == first.session_id}
        assert any(m.links for m in rewritten.values()), "the later write linked no memory of the first session"

        assert await engine.replay(record.turn_id) == []
        assert not theirs & set(second.notes)  # the first session's memories stay its own

    make_engine.run(body, llm_intent="off")


def test_a_turn_replays_exactly_after_the_user_accepts_a_memory_from_outside(make_engine: EngineFactory,
                                                                             tmp_path) -> None:
    """A memory from outside (an import's) is its own session's until the user accepts it; other
    sessions see it from the acceptance on, not from its recording: a turn built before replays
    without it, live and after reopening."""
    elsewhere = make_engine(["Noted."], data_dir=tmp_path / "elsewhere")
    engine = make_engine(["Noted."], llm_intent="off")
    fact = {"fragment_id": "mem-imported-figures", "content": "The sales figures total 137", "type": "fact",
            "key": "sales figures", "scope": "workspace", "source_evidence_ids": [], "importance": 0.9,
            "keywords": ["sales", "figures"], "valid_from": "2026-01-01T00:00:00Z", "extractor": "user"}

    async def main() -> str:
        await elsewhere.start()
        source = await elsewhere.open_session(None, title="Source")
        await (await elsewhere.submit(source.session_id, "The offsite is in May.")).done
        doc = await elsewhere.export_session(source.session_id)
        await elsewhere.close()
        await engine.start()
        try:
            doc["pcm"]["memory"].append(fact)
            await engine.import_session(doc)
            fresh = await engine.open_session(None, title="Fresh")
            record = await (await engine.submit(fresh.session_id, "Check the sales figures and write a short note")).done
            await engine.memory_idle()
            assert fact["fragment_id"] not in fresh.notes  # no one's until accepted
            await engine.accept_memory(fact["fragment_id"])
            assert fact["fragment_id"] in fresh.notes  # every session's from now on
            assert await engine.replay(record.turn_id) == []
            return record.turn_id
        finally:
            await engine.close()

    turn_id = asyncio.run(main())

    async def reopened(again: Engine) -> None:
        assert await again.replay(turn_id) == []

    make_engine.run(reopened, llm_intent="off")
