"""A precise context on the real embedder and stores: three topics in one session (a Kyoto trip,
a Python error, a sales report from a watched file) stay out of each other's contexts, the report
task reads the lines of the named file, an unrelated question gets a short prompt saying the
evidence is insufficient, and every turn replays exactly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.config import Settings
from app.core.context.sections.gate_notes import INSUFFICIENT
from app.core.pipeline.record import TurnRecord
from tests.conftest import EngineFactory

KYOTO = [
    "I'm planning a trip to Kyoto in April: which temples should I visit first?",
    "Book a ryokan near Gion in Kyoto for three nights, close to the temples.",
    "What's the best way from Kyoto station to the Arashiyama bamboo grove?",
]
PYTHON = [
    "My Python script fails with TypeError: 'NoneType' object is not subscriptable when parsing the config.",
    "The failing line is value = config.get('db')['host'] - why would config.get return None in Python?",
]
REPORT = "Write a short sales report on the Lisbon office from sales_q3.csv"
UNRELATED = "What's a good name for a cat?"
LISBON = "Lisbon,Q3,98765,record quarter for the Lisbon office"


def _sales_file(folder: Path) -> Path:
    rows = ["office,quarter,revenue,note"] + [f"Branch{i % 40},Q3,{1000 + i},steady" for i in range(1999)]
    rows[399] = LISBON  # line 400 of a 2,000-line file
    path = folder / "sales_q3.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _ids(record: TurnRecord) -> set[str]:
    return set(record.build.context.source_ids())


@pytest.mark.model
def test_three_topics_stay_apart_and_the_named_file_is_read(make_engine: EngineFactory, tmp_path: Path) -> None:
    from app import main as wiring

    embedder = wiring.load_embedder(Settings.load(tmp_path / "settings"))
    engine = make_engine(["Noted."], embedder=embedder, budget=1024)
    folder = tmp_path / "watched"
    folder.mkdir()
    _sales_file(folder)
    engine.set_watched_folders([folder])

    async def turn(session_id: str, text: str) -> TurnRecord:
        run = await engine.submit(session_id, text)
        return await run.done

    async def main() -> None:
        await engine.start()
        state = await engine.open_session(None, title="three topics")
        sid = state.session_id
        kyoto = [await turn(sid, text) for text in KYOTO]
        python = [await turn(sid, text) for text in PYTHON]
        report = await turn(sid, REPORT)
        unrelated = await turn(sid, UNRELATED)
        kyoto_ids = {m for r in kyoto for m in state.turns[r.turn_id].message_ids}
        python_ids = {m for r in python for m in state.turns[r.turn_id].message_ids}

        # the Python question continues the Python branch; its context holds no Kyoto turn
        assert python[1].build.anchor_node == python[0].node_id
        assert not _ids(python[1]) & kyoto_ids
        assert "Kyoto" not in python[1].build.context.text()
        assert _ids(python[1]) & python_ids  # ... but its own branch
        dropped = [c for c in python[1].build.recall.candidates if c.id in kyoto_ids]
        assert dropped and all(not c.kept and c.reason.startswith("below relevance threshold") for c in dropped)

        # the report task reads the named file by rule: the line of the fact, with its selector
        calls = report.build.tools.calls if report.build.tools else []
        assert [c.call.tool for c in calls] == ["read_file"] and calls[0].chosen_by == "rule"
        evidence_id = calls[0].call.result_evidence_ids[0]
        refs = [ref for block in report.build.context.blocks for ref in block.refs if ref.evidence_id == evidence_id]
        assert refs and LISBON in report.build.context.text()
        spans = [tuple(int(x) for x in s.removeprefix("lines:").split("-")) for s in refs[0].selector.split(",")]
        assert any(a <= 402 <= b for a, b in spans)  # file line 400, after the fence's two lines
        assert any(c.evidence_id == evidence_id for c in report.build.compressed)
        assert not _ids(report) & kyoto_ids

        # an unrelated one-line question: no other topic's turn, a short prompt, evidence insufficient
        assert unrelated.build.anchor_node is None
        assert not _ids(unrelated) & (kyoto_ids | python_ids)
        assert INSUFFICIENT in unrelated.build.context.text()
        assert unrelated.build.context.tokens <= 75, unrelated.build.context.text()  # the instruction (with its quoting rule) and the note

        for record in [*kyoto, *python, report, unrelated]:
            assert await engine.replay(record.turn_id) == [], record.build.text
        await engine.close()

    asyncio.run(main())
