"""Documents as evidence, end to end on the real embedder, SQLite and LanceDB: attaching and a
watched folder each bring a real PDF, a Word file and an Excel workbook (tests/data/documents,
public domain / CC0: see SOURCES.md there) into a session; a question about a figure on page N of
the PDF gets a context holding that page's part with its ``page:N`` selector; the Word file's parts
are cited by section, the workbook's by sheet range; a changed file re-indexes only its changed
parts; the turns replay exactly after a reopen."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from app.config import Settings
from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.core.ports import CancelToken
from app.core.runtime.intake import EnvIntake
from app.core.types import EnvEvent, EvidenceType
from app.sensors.files import make_preparer
from app.sensors.sensorset import SensorSet
from tests.conftest import EngineFactory

DOCS = Path(__file__).resolve().parents[1] / "data" / "documents"
FAA_PDF = DOCS / "federal-register-2020-17221.pdf"
STORY_PDF = DOCS / "stories-10-pages.pdf"
STORY_DOCX = DOCS / "stories-10-pages.docx"
CUSTOMERS = DOCS / "customers-100.xlsx"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory):
    from app import main as wiring

    return wiring.load_embedder(Settings.load(tmp_path_factory.mktemp("settings")))


def _refs(record: TurnRecord) -> list[tuple[str, str]]:
    return [(r.evidence_id, r.selector) for b in record.build.context.blocks for r in b.refs]


async def _parts(engine: Engine, session_id: str) -> list:
    return [e for e in await engine.records().evidences(session_id, superseded=True)
            if e.type == EvidenceType.RAG_DOC]


def _cited_pages(record: TurnRecord, parts: dict[str, str]) -> list[str]:
    return [sel for eid, sel in _refs(record) if eid in parts]


@pytest.mark.model
def test_attached_pdf_docx_and_xlsx_are_cited_by_page_section_and_sheet(make_engine: EngineFactory,
                                                                         embedder) -> None:
    engine = make_engine(["Noted."], embedder=embedder, budget=1024)
    heard: list[dict] = []

    async def main() -> tuple[str, TurnRecord, TurnRecord, dict[str, str], list]:
        await engine.start()
        sid = (await engine.open_session(None, title="documents")).session_id
        await (await engine.submit(sid, "I am reviewing the 737 MAX proposal and some stories.")).done
        pdf = await engine.attach_file(sid, FAA_PDF, on_progress=heard.append)
        docx = await engine.attach_file(sid, STORY_DOCX)
        xlsx = await engine.attach_file(sid, CUSTOMERS)
        assert pdf.pages == 15 and pdf.parts > 15 and docx.parts > 5 and xlsx.parts >= 5
        parts = await _parts(engine, sid)
        selectors = {e.evidence_id: e.metadata["selector"] for e in parts}
        assert any(s.startswith('section:"Chapter 3: The Heart of the Hidden Forest"') for s in selectors.values())
        assert any(s.startswith("sheet:Users!A") for s in selectors.values())
        cost = await (await engine.submit(sid, "How many airplanes of U.S. registry would the proposed AD affect?")).done
        row = await (await engine.submit(sid, "What is the occupation of Nico Grimes?")).done
        await engine.close()
        return sid, cost, row, selectors, parts

    sid, cost, row, selectors, parts = asyncio.run(main())
    stages = {h["stage"] for h in heard}
    assert stages == {"reading", "indexing"} and heard[-1]["done"] == heard[-1]["total"]
    assert any(h["stage"] == "reading" and h["unit"] == "pages" and h["total"] == 15 for h in heard)
    cited = _cited_pages(cost, selectors)
    assert any(s.split("/")[0] == "page:5" for s in cited), cited  # "affects 73 airplanes of U.S. registry"
    assert "73 airplanes of U.S. registry" in cost.build.context.text()
    assert "page 5" in cost.build.context.text()  # the part's label names the page
    sheet = [s for s in _cited_pages(row, selectors) if s.startswith("sheet:Users!")]
    assert sheet and "Future Functionality Specialist" in row.build.context.text(), _refs(row)
    first, last = (int(x[1:]) for x in sheet[0].split("!")[1].split("/")[0].split(":"))
    assert first <= 89 <= last  # row 89 of the sheet holds Nico Grimes

    async def reopened(engine2: Engine) -> None:
        state = await engine2.open_session(sid)
        assert all(p.evidence_id in state.notes and state.notes[p.evidence_id].selector for p in parts)
        for turn_id in state.turn_order:
            assert await engine2.replay(turn_id) == [], turn_id

    make_engine.run(reopened, embedder=embedder, budget=1024)


@pytest.mark.model
def test_a_watched_folder_brings_a_pdf_a_docx_and_an_xlsx_in_cited_by_page(
        make_engine: EngineFactory, tmp_path: Path, embedder) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    engine = make_engine(["Noted."], embedder=embedder, budget=1024, data_dir=tmp_path / "data")

    async def main() -> tuple[TurnRecord, dict[str, str], list[EnvEvent]]:
        await engine.start()
        sid = (await engine.open_session(None, title="watched")).session_id
        engine.set_watched_folders([folder])

        async def handler(events: list[EnvEvent]) -> None:
            await engine.ingest_env(sid, events)

        intake = EnvIntake(handler, coalesce_ms=200, prepare=make_preparer(1_000_000))
        intake.start()
        sensors = SensorSet.build(intake.put, folders=[folder])
        await asyncio.get_running_loop().run_in_executor(None, sensors.start)
        for source in (STORY_PDF, STORY_DOCX, CUSTOMERS):
            shutil.copy(source, folder / source.name)
        started = time.monotonic()
        while time.monotonic() - started < 120:
            await asyncio.sleep(0.5)
            events = await engine.env_events(sid)
            if {e.payload.get("path") for e in events if e.payload.get("document")} >= {
                    STORY_PDF.name, STORY_DOCX.name, CUSTOMERS.name}:
                break
        sensors.stop()
        await intake.stop()
        parts = await _parts(engine, sid)
        selectors = {e.evidence_id: e.metadata["selector"] for e in parts}
        record = await (await engine.submit(
            sid, "In the last trial, the test of heart, what question did Sir Lumis ask them?")).done
        events = await engine.env_events(sid)
        await engine.close()
        return record, selectors, events

    record, selectors, events = asyncio.run(main())
    kinds = {e.payload["document"]["format"] for e in events if e.payload.get("document")}
    assert kinds == {"pdf", "docx", "xlsx"}, [e.payload for e in events]
    cited = _cited_pages(record, selectors)
    assert any(s.split("/")[0] == "page:7" for s in cited), cited
    assert "Why have you come to the Hidden" in record.build.context.text()


@pytest.mark.model
def test_a_new_version_stores_and_embeds_only_the_changed_parts_and_cancel_records_nothing(
        make_engine: EngineFactory, tmp_path: Path, embedder) -> None:
    from tests.sensors.pdfs import text_pdf

    pages = [f"Page {n} of the ledger. Shelf {n} holds {n * 7} crates of apples and {n * 3} of pears." * 3
             for n in range(1, 41)]
    path = tmp_path / "ledger.pdf"
    path.write_bytes(text_pdf(pages))
    engine = make_engine(["Noted."], embedder=embedder, budget=1024)

    async def main() -> tuple[list, list[dict]]:
        await engine.start()
        sid = (await engine.open_session(None, title="ledger")).session_id
        stop = CancelToken()
        heard: list[dict] = []

        def cancel_while_indexing(p: dict) -> None:
            if p["stage"] == "indexing":
                stop.cancel()

        with pytest.raises(Exception) as caught:
            await engine.attach_file(sid, path, on_progress=cancel_while_indexing, cancel=stop)
        assert "cancelled" in str(caught.value) and await _parts(engine, sid) == []
        assert await engine.env_events(sid) == []
        await engine.attach_file(sid, path)
        pages[16] = "Page 17 of the ledger was rewritten: shelf 17 now holds 999 crates of plums. " * 3
        path.write_bytes(text_pdf(pages))
        await engine.attach_file(sid, path, on_progress=heard.append)
        parts = await _parts(engine, sid)
        await engine.close()
        return parts, heard

    parts, heard = asyncio.run(main())
    indexing = [h for h in heard if h["stage"] == "indexing"]
    assert indexing and indexing[-1]["total"] == 1  # one part embedded again: page 17's
    retired = [p for p in parts if p.valid_to is not None]
    assert [p.metadata["selector"] for p in retired] == ["page:17"]
    fresh = [p for p in parts if p.valid_to is None and p.metadata["selector"] == "page:17"]
    assert len(fresh) == 1 and "999 crates of plums" in fresh[0].content
    assert len([p for p in parts if p.valid_to is None]) == 40
