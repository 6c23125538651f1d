"""The memory writer's optional model signal (issue 13 §1): a background call that gives way to
prompt inputs, recorded in the event log, read again instead of asked again, and kept only where
it is grounded in the turn. Scripted model for the rules, the real SmolLM2 for the real path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.core.engine.context import EngineConfig
from app.core.engine.facade import Engine
from app.core.engine.memory_model import LOG_TYPE
from app.core.memory.model_signal import GROUNDED, read_model_memories
from app.core.ports import GenerationParams
from app.core.runtime.executors import ChatStream, Executors
from app.core.text.words import content_stems
from app.llm.fakes import ScriptedChatModel
from tests.conftest import EngineFactory, stored

TURN = "My deadline moved to Friday and we will ship the Lisbon build first."
REPLY = json.dumps({"memories": [
    {"type": "fact", "content": "deadline moved to Friday", "key": "deadline", "value": "Friday"},
    {"type": "event", "content": "the user flew to Mars"},  # not in the turn: dropped
    {"type": "prohibition", "content": "never ship"},  # not a type the model may give
]})


def test_only_grounded_model_memories_are_kept() -> None:
    kept, problems = read_model_memories(REPLY, TURN, evidence_id="m1", at="2026-11-25T00:00:00Z")
    assert [(m.type, m.content, m.key, m.value, m.extractor, m.scope) for m in kept] == [
        ("fact", "deadline moved to Friday", "deadline", "Friday", "model", "session")]
    assert len(problems) == 2 and problems[0].startswith("not in the turn")
    assert read_model_memories("{not json", TURN, evidence_id="m1", at="x") == ([], ["not JSON"])


def test_a_background_call_gives_way_to_a_prompt_input() -> None:
    model = ScriptedChatModel([" ".join(["word"] * 400), "the answer"], token_delay_s=0.005)

    async def main() -> tuple[str, str]:
        ex = Executors()
        try:
            background = ChatStream(ex, model, [{"role": "user", "content": "x"}], background=True)
            await asyncio.sleep(0.05)  # it is generating
            answer = await ChatStream(ex, model, [{"role": "user", "content": "y"}],
                                      params=GenerationParams(max_tokens=20)).wait()
            return (await background.wait()).finish_reason, answer.text
        finally:
            ex.shutdown()

    assert asyncio.run(main()) == ("cancelled", "the answer")


def test_the_model_signal_is_recorded_and_read_again(make_engine: EngineFactory) -> None:
    chat = ScriptedChatModel(["Noted.", REPLY])

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="Release")
        await (await engine.submit(state.session_id, TURN)).done
        await engine.memory_idle()
        memories = [m for _, m in await engine.memories() if m.extractor == "model"]
        assert [m.content for m in memories] == ["deadline moved to Friday"]
        [entry] = [e["payload"] for e in await stored(engine, lambda s: s.list_events(state.session_id))
                   if e["type"] == LOG_TYPE]
        assert entry["status"] == "ok" and entry["output"] == REPLY
        # Writing the same turn again reads the record: no second call, nothing new.
        calls = len(chat.calls)
        message = state.messages[state.order[0]]
        assert await engine._memory.remember(state.session_id, [(message.message_id, message.text, "user",
                                                                 message.at)]) == []
        assert len(chat.calls) == calls

    make_engine.run(body, chat=chat, config=EngineConfig(llm_intent="off", memory_model="auto"))


@pytest.mark.model
def test_the_real_model_signal_is_recorded_and_grounded(make_engine: EngineFactory) -> None:
    from app.llm.llama import LlamaChatModel

    path = Path(__file__).resolve().parents[2] / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip("the SmolLM2 GGUF is not fetched")
    model = LlamaChatModel(path, prompt_cache=False)

    async def body(engine: Engine) -> None:
        state = await engine.open_session(None, title="Release")
        await (await engine.submit(state.session_id, TURN)).done
        await engine.memory_idle()
        [entry] = [e["payload"] for e in await stored(engine, lambda s: s.list_events(state.session_id))
                   if e["type"] == LOG_TYPE]
        assert entry["status"] in ("ok", "invalid", "late")
        turn = set(content_stems(TURN))
        for _, memory in await engine.memories():
            if memory.extractor == "model":  # whatever the small model said, only the turn's words stay
                said = content_stems(memory.content)
                assert memory.scope == "session" and "model" in memory.tags
                assert sum(w in turn for w in said) >= GROUNDED * len(said)
        # What the model answered is read back through the same check: nothing it said is kept otherwise.
        kept, _ = read_model_memories(entry["output"], TURN, evidence_id=entry["evidence_id"], at="x")
        assert {m.content for m in kept} == {m.content for _, m in await engine.memories() if m.extractor == "model"}

    config = EngineConfig(llm_intent="off", memory_model="auto", generation=GenerationParams(max_tokens=16))
    try:
        make_engine.run(body, chat=model, config=config)
    finally:
        model.close()
