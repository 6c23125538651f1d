"""Selectors (app/core/session/selectors.py) and document parts as evidence
(app/core/session/documents.py): building, parsing and describing selectors; a document event's
parts planned against the session's current parts (kept, added, superseded)."""

from __future__ import annotations

import hashlib

from app.core.session import selectors as sel
from app.core.session.documents import (
    document_summary,
    part_index_text,
    part_note,
    plan_parts,
    plans_for,
    unfenced,
)
from app.core.types import EnvEvent, EvidenceType


def test_selectors_are_built_parsed_and_described() -> None:
    assert sel.page(12) == "page:12" and sel.page(12, 13) == "page:12-13"
    assert sel.section('Budget "Q3"') == 'section:"Budget \\"Q3\\""'
    assert sel.sheet("Q3", "A1:F20") == "sheet:Q3!A1:F20"
    assert sel.sheet("Q3 2024", "A1:B2") == "sheet:'Q3 2024'!A1:B2"
    assert sel.within("page:12", "lines:3-9,lines:12-14") == "page:12/lines:3-9,page:12/lines:12-14"
    parsed = sel.parse('section:"a, b/c"/lines:2-4,page:3')
    assert [[(p.kind, p.value) for p in r] for r in parsed] == [[("section", "a, b/c"), ("lines", "2-4")],
                                                                [("page", "3")]]
    assert sel.sheet_parts(sel.parse("sheet:'Q3 2024'!A1:B2")[0][0].value) == ("Q3 2024", "A1:B2")
    assert sel.describe("page:12/lines:3-9,page:12/lines:20-22") == "page 12"
    assert sel.describe("page:12-13") == "pages 12\u201313"
    assert sel.describe('section:"Budget"') == "section \u201cBudget\u201d"
    assert sel.describe("sheet:Q3!A1:F20") == "sheet Q3, A1:F20"
    assert sel.describe("lines:3-9") == "lines 3\u20139"
    assert sel.first_page("sheet:Q3!A1:B2") is None and sel.first_page("page:7-9/lines:1-3") == 7
    assert sel.body_lines("lines:1-2,lines:5-8,lines:20-20", 20) == "lines:3-6"


def _event(parts: list[tuple[str, str]], uri: str = "/d/report.pdf", change: str = "attached") -> EnvEvent:
    texts = [t for _, t in parts]
    content = "\n\n".join(texts)
    spans, at = [], 0
    for selector, text in parts:
        spans.append({"selector": selector, "heading": ["Budget"] if "2" in selector else [], "start": at,
                      "end": at + len(text), "sha": hashlib.sha256(text.encode()).hexdigest()[:32]})
        at += len(text) + 2
    return EnvEvent(kind="file", source="/d", uri=uri, title="report.pdf", content=content,
                    payload={"change": change, "path": "report.pdf",
                             "document": {"format": "pdf", "label": "PDF", "pages": len(parts), "parts": spans}})


def test_parts_become_evidences_with_selectors_and_notes() -> None:
    event = _event([("page:1", "Intro text."), ("page:2", "Budget: 40 euros.")])
    plan = plan_parts("s1", event, [], "2026-01-01T00:00:00Z")
    assert plan is not None and plan.keep == [] and plan.retire == []
    first, second = plan.add
    assert first.type == EvidenceType.RAG_DOC and second.metadata["selector"] == "page:2"
    assert unfenced(second.content) == ("report.pdf, page 2 \u00b7 Budget", "Budget: 40 euros.")
    assert part_index_text(second) == "report.pdf, page 2 \u00b7 Budget\nBudget: 40 euros."
    note = part_note(second)
    assert note.kind == "env" and note.selector == "page:2" and note.uri == "/d/report.pdf"
    assert document_summary(event) == "report.pdf: PDF, 2 pages, 2 parts. Contents: Budget (page 2)"


def test_a_new_version_keeps_unchanged_parts_adds_changed_and_retires_the_rest() -> None:
    v1 = _event([("page:1", "Intro text."), ("page:2", "Budget: 40 euros."), ("page:3", "End.")])
    current = plan_parts("s1", v1, [], "t1").add  # type: ignore[union-attr]
    v2 = _event([("page:1", "Intro text."), ("page:2", "Budget: 55 euros.")])
    plan = plan_parts("s1", v2, current, "t2")
    assert plan is not None and plan.keep == [current[0].evidence_id]
    assert [e.metadata["selector"] for e in plan.add] == ["page:2"] and "55" in plan.add[0].content
    assert plan.retire == [current[1].evidence_id, current[2].evidence_id]
    gone = EnvEvent(kind="file", source="/d", uri="/d/report.pdf", title="report.pdf", payload={"change": "deleted"})
    plans = plans_for("s1", [v2, gone], current, "t3")
    assert plans[gone.event_id].retire and set(plans[gone.event_id].retire) == {
        current[0].evidence_id, plans[v2.event_id].add[0].evidence_id}
    other = EnvEvent(kind="file", source="/d", uri="/d/other.txt", title="other.txt", content="x")
    assert plan_parts("s1", other, current, "t4") is None
