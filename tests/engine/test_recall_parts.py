"""Sub-questions on the real embedder and stores: each part retrieves on its own, a part the
evidence answers without sharing its words ("Which database did we pick?" beside "we decided to
go with Postgres") is not noted as uncovered, nor is a piece that asks nothing of its own ("… and
when?"), a part nothing answers is, and the turn replays."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.config import Settings
from app.core.context.sections.gate_notes import INSUFFICIENT
from app.core.engine.context import EngineConfig
from app.core.pipeline.record import TurnRecord
from app.core.types import Ablation, Author, AuthorKind, Message, Role
from tests.conftest import EngineFactory

HISTORY = [
    ("ana", "For the order service we decided to go with Postgres; MySQL's licence worried legal."),
    ("ben", "Fine by me. I'll write the migration scripts this week."),
    ("ana", "The staging cluster runs on three nodes in Frankfurt."),
    ("ben", "Lunch on Friday? The ramen place near the office reopened."),
    ("ana", "Nightly backups go to the cold bucket, kept for thirty days."),
    ("ben", "The dashboard shows p95 latency per endpoint now."),
]


@pytest.mark.model
def test_a_part_answered_by_meaning_is_not_called_insufficient(make_engine: EngineFactory, tmp_path: Path) -> None:
    from app import main as wiring

    embedder = wiring.load_embedder(Settings.load(tmp_path / "settings"))
    # Every channel waited for: on a loaded machine the recall time limit can skip a part's own
    # search (recorded as skipped, a behaviour of its own), which is not what this test is about.
    config = EngineConfig(default_budget=1024, llm_intent="off", ablate=(Ablation.DEADLINES.value,))
    engine = make_engine(["Noted."], embedder=embedder, config=config)

    async def ask(prefix: str, question: str) -> TurnRecord:
        state = await engine.open_session(None, title="infra")
        await engine.ingest(state.session_id, [
            Message(message_id=f"{prefix}{n}", role=Role.USER, content=text, author=Author(kind=AuthorKind.USER, id=who),
                    at=f"2024-03-0{n + 1}T10:00:00") for n, (who, text) in enumerate(HISTORY)])
        run = await engine.submit(state.session_id, question)
        return await run.done

    async def main() -> None:
        await engine.start()
        asked = await ask("m", "Which database did we pick? Where do the nightly backups go?")
        recall, text = asked.build.recall, asked.build.context.text()
        assert [p.question for p in recall.parts] == ["Which database did we pick?",
                                                      "Where do the nightly backups go?"]
        assert all(p.covered for p in recall.parts), recall.parts
        assert "m0" in recall.parts[0].lead and "m4" in recall.parts[1].lead
        assert "Postgres" in text and "cold bucket" in text
        assert recall.gate is not None and recall.gate.uncovered == []
        assert "nothing stored covers" not in text and INSUFFICIENT not in text

        # a part nothing stored answers is still said to be uncovered, and only that part
        mixed = await ask("n", "Which database did we pick? What is the museum's street address?")
        assert mixed.build.recall.gate is not None
        assert mixed.build.recall.gate.uncovered == ["What is the museum's street address?"]
        assert "n0" in mixed.build.recall.parts[0].lead and "Postgres" in mixed.build.context.text()

        # "when?" is no part of its own: no note that nothing covers it beside the Postgres evidence
        when = await ask("w", "Which database did we pick and when?")
        assert [p.question for p in when.build.recall.parts] in ([], ["Which database did we pick and when?"])
        assert when.build.recall.gate is not None
        assert when.build.recall.gate.uncovered == [] and not when.build.recall.gate.insufficient
        assert "Postgres" in when.build.context.text() and "nothing stored covers" not in when.build.context.text()

        for record in (asked, mixed, when):
            assert await engine.replay(record.turn_id) == []
        await engine.close()

    asyncio.run(main())
