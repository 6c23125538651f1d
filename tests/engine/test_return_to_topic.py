"""Returning to a topic continues its latest turn, not its first: on the real embedder and
stores, two Lisbon turns, two quicksort turns, then "Back to Lisbon: ..." lands on the second
Lisbon turn (the tip of that branch), and the two topics stay on separate branches."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.config import Settings
from app.core.pipeline.record import TurnRecord
from tests.conftest import EngineFactory

LISBON = ["I am planning a trip to Lisbon in May. What should I pack?",
          "For the Lisbon trip, which neighbourhood should I stay in?"]
QUICKSORT = ["Explain how quicksort partitions an array.",
             "What is the worst case of quicksort?"]
BACK = "Back to Lisbon: is a day trip to Sintra worth it?"


def test_returning_to_a_topic_continues_its_latest_turn(make_engine: EngineFactory, tmp_path: Path) -> None:
    from app import main as wiring

    embedder = wiring.load_embedder(Settings.load(tmp_path / "settings"))
    engine = make_engine(["Noted."], embedder=embedder)

    async def main() -> None:
        await engine.start()
        try:
            state = await engine.open_session(None)

            async def turn(text: str) -> TurnRecord:
                return await (await engine.submit(state.session_id, text)).done

            lisbon = [await turn(text) for text in LISBON]
            sort = [await turn(text) for text in QUICKSORT]
            back = await turn(BACK)
            assert lisbon[1].build.anchor_node == lisbon[0].node_id
            assert sort[0].build.anchor_node is None and sort[1].build.anchor_node == sort[0].node_id
            assert back.build.anchor_node == lisbon[1].node_id  # the branch's latest turn, not its first
        finally:
            await engine.close()

    asyncio.run(main())
