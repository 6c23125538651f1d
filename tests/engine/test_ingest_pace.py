"""Ingest at the embedder's pace (issue 40): the memory writer catches up behind a history import
instead of running beside it; real SQLite + LanceDB, the hash embedder held mid-import."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from typing import Any

import numpy as np
import pytest

from app.core.engine import memory as memory_module
from app.core.engine import sessions as sessions_module
from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, MemoryFragment, Message, Role
from app.llm.fakes import HashEmbedder
from tests.conftest import EngineFactory


class GatedEmbedder(HashEmbedder):
    """Embeds like ``HashEmbedder``; while ``gate`` is clear, a batch naming "hold" waits for it."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        if any("hold" in t for t in texts) and not self.gate.is_set():
            self.waiting.set()
            self.gate.wait(30)
        return super().embed(texts, batch_size=batch_size)


def _history(prefix: str, n: int, word: str) -> list[Message]:
    return [Message(message_id=f"{prefix}{i}", role=Role.USER, author=Author(kind=AuthorKind.USER, id="Ana"),
                    content=f"I decided to move the {word} meeting to Friday number {i}.",
                    at=f"2026-01-01T00:{i:02d}:00Z") for i in range(n)]


def test_the_memory_writer_waits_while_history_is_ingested(make_engine: EngineFactory,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = GatedEmbedder()
    extracted: list[str] = []
    real = memory_module.extract_memories

    def extract(text: str, **kw: Any) -> list[MemoryFragment]:
        extracted.append(text)
        return real(text, **kw)

    monkeypatch.setattr(memory_module, "extract_memories", extract)

    async def body(engine: Engine) -> None:
        a = await engine.open_session(None, title="a")
        b = await engine.open_session(None, title="b")
        await engine.ingest(a.session_id, _history("a", 5, "garden"))  # cues the writer
        embedder.gate.clear()
        second = asyncio.ensure_future(engine.ingest(b.session_id, _history("b", 5, "hold")))
        while not embedder.waiting.is_set():  # the second import is embedding
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        assert extracted == []  # the first import's memories wait behind the second
        embedder.gate.set()
        await second
        await engine.memory_idle()
        assert engine.lab().memory_stats().runs == 2 and len(extracted) == 10
        assert await engine.memories()  # and are written once it is done

    make_engine.run(body, embedder=embedder)


def test_an_import_embeds_while_its_messages_are_stored_and_indexes_them_once_stored(
        make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding (most of an ingest) runs beside the SQLite write, not after it."""
    embedder = HashEmbedder(dim=64)
    embedding = threading.Event()
    seen: list[bool] = []
    real_embed = embedder.embed
    real_write = sessions_module.SessionService._write_ingested

    def embed(texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        if any("garden" in t for t in texts):
            embedding.set()
        return real_embed(texts, batch_size=batch_size)

    def write(self: sessions_module.SessionService, *args: Any) -> None:
        seen.append(embedding.wait(5))  # the chunk's embedding began while its write is under way
        real_write(self, *args)

    embedder.embed = embed  # type: ignore[method-assign]
    monkeypatch.setattr(sessions_module.SessionService, "_write_ingested", write)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="import")
        assert await engine.ingest(state.session_id, _history("a", 5, "garden")) == 5
        assert seen == [True]
        _, text = await engine.lab().index_rankings("garden meeting", 10, session_id=state.session_id)
        assert set(text) == {f"a{i}" for i in range(5)}

    make_engine.run(body, embedder=embedder)


def test_an_import_whose_sqlite_write_fails_leaves_the_index_untouched(make_engine: EngineFactory) -> None:
    """A chunk that repeats a stored message's id fails in SQLite: none of its rows (its new
    messages, nor the repeated one's new text) reaches the index, though it was embedded."""

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="import")
        await engine.ingest(state.session_id, _history("a", 3, "garden"))
        before = await engine.lab().index_rankings("garden meeting", 10, session_id=state.session_id)
        again = _history("b", 2, "volcano") + [_history("a", 2, "volcano")[1]] + _history("c", 2, "volcano")
        with pytest.raises(Exception):  # noqa: B017, PT011 - SQLite's own error for the repeated id
            await engine.ingest(state.session_id, again)
        assert (await engine.lab().index_rankings("volcano", 10, session_id=state.session_id))[1] == []
        assert await engine.lab().index_rankings("garden meeting", 10, session_id=state.session_id) == before

    make_engine.run(body)
