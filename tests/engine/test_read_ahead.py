"""Opening a session reads ahead what its first build would wait for (``Engine._warm``)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from app.core.engine import sessions as sessions_module
from app.core.engine.facade import Engine
from app.core.intent.profile import UserProfile
from app.core.session.state import SessionState
from app.core.types import Message, Role
from tests.conftest import EngineFactory
from tests.texts import step_history


def test_the_read_ahead_lists_each_speaker_s_messages_and_settles_the_heap(
        make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    async def first(engine: Engine) -> str:
        state = await engine.open_session(None, title="Ana and Bo")
        await engine.ingest(state.session_id, step_history(12))
        await engine.ingest(state.session_id, [Message(role=Role.USER, content="I prefer tabs, never spaces.")])
        return state.session_id

    sid = make_engine.run(first)

    async def again(engine: Engine) -> None:
        state = await engine.open_session(sid)
        frozen = gc.get_freeze_count()  # opening settled the heap (the loaded session)
        await asyncio.gather(*engine._warming)  # the read-ahead, which a user's typing gives time for
        assert gc.get_freeze_count() > frozen, "what the read-ahead read was settled too"
        listed: list[str] = []
        real = SessionState.by_speaker
        monkeypatch.setattr(SessionState, "by_speaker", lambda self, name: listed.append(name) or real(self, name))
        read: list[str] = []
        for name in ("extract_facts", "parse_profile_statements"):
            real_read = getattr(sessions_module, name)
            monkeypatch.setattr(sessions_module, name, lambda text, *a, _r=real_read, **k: read.append(text) or _r(text, *a, **k))
        built, _ = await engine.build(sid, "What did Bo say about the parser?")
        assert not listed, "Bo's messages by time were listed ahead, not by the first build naming him"
        assert not read, "the user's facts and profile were read ahead"
        assert engine._sessions.facts(state) or engine._sessions.profile(state) != UserProfile()
        structured = next(run for run in built.recall.channels if run.channel == "structured")
        assert structured.hits and all(state.messages[i].speaker == "Bo" for i, _ in structured.hits)

    make_engine.run(again)
