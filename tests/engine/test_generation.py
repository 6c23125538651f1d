"""A session's own generation settings: temperature and answer length reach the model call,
the standing instruction is in every context of the session as an instruction block, each build
records the instruction it used (replay stays exact after it changes), and the settings outlive
the engine (real SQLite + LanceDB, scripted model)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from app.core.ports import SessionGeneration
from app.core.types import BlockType
from tests.conftest import EngineFactory

LONG = " ".join(f"w{i}" for i in range(300))
RULE = "Always answer in French and keep answers under five sentences."


def _instructions(record) -> str:
    """The text of the context's instruction blocks."""
    return "\n".join(b.content for b in record.build.context.blocks if b.block_type == BlockType.INSTRUCTION)


def test_session_settings_act_are_recorded_replay_exactly_and_persist(make_engine: EngineFactory) -> None:
    async def main() -> None:
        engine = make_engine([LONG, LONG, LONG, LONG])
        await engine.start()
        state = await engine.open_session(None, title="t")
        sid = state.session_id
        plain = await (await engine.submit(sid, "Describe the harbour of Lisbon")).done
        assert RULE not in _instructions(plain) and plain.build.system_prompt == ""
        default_tokens = len(plain.output.split())

        await engine.set_generation(sid, SessionGeneration(temperature=0.7, max_tokens=64, system_prompt=RULE))
        ruled = await (await engine.submit(sid, "And the castle above it?")).done
        assert RULE in _instructions(ruled) and ruled.build.system_prompt == RULE
        assert RULE in ruled.build.prompt[0]["content"]  # it reaches the model
        assert ruled.params["temperature"] == 0.7 and ruled.params["max_tokens"] == 64
        assert len(ruled.output.split()) == 64 < default_tokens and ruled.finish_reason == "length"
        assert ruled.build.plan["budget"]["answer_reserve"] == 64 != plain.build.plan["budget"]["answer_reserve"]

        await engine.set_generation(sid, SessionGeneration(system_prompt="Answer in German."))
        assert await engine.replay(plain.turn_id) == [] and await engine.replay(ruled.turn_id) == []
        await engine.close()

        again = make_engine([LONG])  # a new run on the same folder
        await again.start()
        assert (await again.generation(sid)) == SessionGeneration(system_prompt="Answer in German.")
        later = await (await again.submit(sid, "What about the trams?")).done
        assert "Answer in German." in _instructions(later) and later.params["temperature"] != 0.7
        assert await again.replay(ruled.turn_id) == [] and await again.replay(later.turn_id) == []
        await again.close()

    asyncio.run(main())


def test_out_of_range_settings_are_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="temperature"):
        SessionGeneration(temperature=3.5)
    with pytest.raises(ValidationError, match="max_tokens"):
        SessionGeneration(max_tokens=1)
    with pytest.raises(ValidationError, match="system_prompt"):
        SessionGeneration(system_prompt="x" * 5000)
