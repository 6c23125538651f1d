"""Answer length follows the model and the plan: the answer's token limit is the plan's answer
reserve (a quarter of the model's context by default, bounded by it), not a fixed 256; a session's
own answer length is what the plan reserves, bounded by half the context; an answer cut there says
so (finish "length"; the desktop's Continue answers on it). Real SQLite + LanceDB, scripted model."""

from __future__ import annotations

import asyncio

from app.core.engine.context import EngineConfig, default_answer_reserve
from app.core.ports import SessionGeneration
from tests.conftest import EngineFactory

LONG = " ".join(f"w{i}" for i in range(700))


def test_the_default_reserve_is_a_quarter_of_the_context_within_bounds() -> None:
    assert [default_answer_reserve(n) for n in (512, 2048, 4096, 32768)] == [256, 512, 1024, 2048]
    assert EngineConfig(context_size=4096).answer_reserve == 1024
    assert EngineConfig(context_size=4096, answer_reserve=300).answer_reserve == 300


def test_the_answer_limit_is_the_plans_reserve(make_engine: EngineFactory) -> None:
    async def main() -> None:
        engine = make_engine([LONG] * 4, config=EngineConfig(context_size=4096))
        await engine.start()
        sid = (await engine.open_session(None, title="t")).session_id
        first = await (await engine.submit(sid, "Plan a ten-day trip through Portugal, day by day")).done
        reserve = first.build.plan["budget"]["answer_reserve"]
        assert reserve == 1024 and first.params["max_tokens"] == 1024
        assert len(first.output.split()) == 700 > 256 and first.finish_reason == "stop"
        await engine.set_generation(sid, SessionGeneration(max_tokens=8192))  # more than the context holds
        capped = await (await engine.submit(sid, "And ten more days in Spain?")).done
        assert capped.params["max_tokens"] == capped.build.plan["budget"]["answer_reserve"] == 2048
        await engine.set_generation(sid, SessionGeneration(max_tokens=100))
        cut = await (await engine.submit(sid, "Once more, briefly")).done
        assert cut.params["max_tokens"] == 100 and cut.finish_reason == "length"
        assert await engine.replay(first.turn_id) == [] and await engine.replay(cut.turn_id) == []
        await engine.close()

    asyncio.run(main())
