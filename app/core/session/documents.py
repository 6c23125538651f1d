"""Documents as evidence: a file read into parts becomes one evidence per part, each with its selector.

A document — a PDF, a Word file, a spreadsheet, Markdown, code — reaches the session as an env
event of kind ``file`` whose ``payload["document"]`` lists its parts: spans of the event's text,
each with its selector (``page:12``, ``section:"Budget"``, ``sheet:Q3!A1:F20``, ``lines:40-80``,
see :mod:`app.core.session.selectors`), its heading path and a hash of its text. Each part is an
``Evidence`` of type ``rag_doc`` (fenced like every outside text, labelled with the file's name,
where the part is and its heading path) and a recall note of kind ``env`` carrying its selector,
so recall, the relevance gate and the query-aware compression treat it as any evidence and a
context line cites "page 12", not "the file".

A part read again unchanged (the same selector and text: the file saved with another page
changed) keeps its evidence as it is; a changed part is a new evidence, and the parts the new version no longer has are superseded
(``valid_to``), never deleted (``plan_parts``). The event itself is recalled as the document's
outline (``document_summary``), not its whole text.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.session.note_view import NoteView
from app.core.session.selectors import describe
from app.core.text.quoting import fence
from app.core.types import EnvEvent, Evidence, EvidenceSource, EvidenceType, SourceKind

HEADING_JOIN = " \u203a "  # between the levels of a heading path
SUMMARY_CHARS = 600  # of a document's outline in its event's note
BOOK_FORMATS = frozenset({"pdf", "docx", "odt", "xlsx"})  # documents read from binary files: no facts taken


@dataclass(frozen=True, slots=True)
class DocPart:
    """One part of a document as its event lists it: a span ``start:end`` of the event's text."""

    selector: str
    heading: tuple[str, ...]
    start: int
    end: int
    sha: str


def document(event: EnvEvent) -> Mapping[str, Any] | None:
    """The event's document payload, when it is a document read into parts."""
    doc = event.payload.get("document")
    return doc if isinstance(doc, Mapping) and isinstance(doc.get("parts"), list) else None


def document_parts(event: EnvEvent) -> list[DocPart]:
    """The parts the event's document lists (malformed entries left out)."""
    doc = document(event)
    out: list[DocPart] = []
    for raw in doc["parts"] if doc is not None else []:
        try:
            part = DocPart(str(raw["selector"]), tuple(str(h) for h in raw.get("heading") or ()), int(raw["start"]),
                           int(raw["end"]), str(raw["sha"]))
        except (KeyError, TypeError, ValueError):
            continue
        if 0 <= part.start <= part.end <= len(event.content) and part.selector:
            out.append(part)
    return out


def file_name(event: EnvEvent) -> str:
    return str(event.payload.get("path") or event.title or os.path.basename(event.uri) or event.uri)


def part_label(event: EnvEvent, part: DocPart) -> str:
    """"report.pdf, page 12 · Costs › Budget": the file, where the part is, its heading path."""
    label = f"{file_name(event)}, {describe(part.selector)}"
    return f"{label} \u00b7 {HEADING_JOIN.join(part.heading)}" if part.heading else label


def part_id(session_id: str, event: EnvEvent, part: DocPart) -> str:
    """The id of a part's evidence, read in ``event`` (unique: a part that comes back after it was
    superseded is a new evidence)."""
    key = "\x1f".join((session_id, event.event_id, part.selector, part.sha))
    return "part-" + hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:24]


def part_evidence(session_id: str, event: EnvEvent, part: DocPart, added_at: str) -> Evidence:
    """The evidence of one part: its text fenced under "document part" with its label, and in
    ``metadata`` the selector, heading path, hash, file and the event it was read in."""
    doc = document(event) or {}
    text = event.content[part.start:part.end]
    return Evidence(
        evidence_id=part_id(session_id, event, part),
        type=EvidenceType.RAG_DOC,
        source=EvidenceSource(kind=SourceKind.RAG, name=str(doc.get("format", "document")), uri=event.uri),
        content=fence("document part", text, part_label(event, part)),
        valid_from=added_at,
        metadata={"selector": part.selector, "heading": list(part.heading), "sha": part.sha, "uri": event.uri,
                  "path": file_name(event), "format": doc.get("format", ""), "event_id": event.event_id,
                  "label": part_label(event, part)},
    )


def part_note(evidence: Evidence) -> NoteView:
    """The recall note of a part's evidence (removed from the moment it was superseded)."""
    return NoteView(evidence.evidence_id, "env", evidence.content, evidence.valid_from, evidence.valid_from,
                    removed_at=evidence.valid_to or "", selector=str(evidence.metadata.get("selector", "")),
                    uri=str(evidence.metadata.get("uri", "")))


def unfenced(text: str) -> tuple[str, str]:
    """(label, body) of a part's fenced text (its ``<<<`` line's label and the lines inside)."""
    lines = text.split("\n")
    if len(lines) >= 4 and lines[1].startswith("<<<") and lines[-1].strip() == ">>>":
        return lines[1].removeprefix("<<<").strip(), "\n".join(lines[2:-1])
    return "", text


def part_index_text(evidence: Evidence) -> str:
    """What the search index holds for a part: its label, then its text (without the fence)."""
    return f"{evidence.metadata.get('label', '')}\n{unfenced(evidence.content)[1]}".strip()


def is_part(evidence: Evidence) -> bool:
    return evidence.type == EvidenceType.RAG_DOC and "selector" in evidence.metadata


def document_summary(event: EnvEvent, max_chars: int = SUMMARY_CHARS) -> str:
    """A document's outline for its event's note: kind, size and headings with where they are."""
    doc = document(event) or {}
    facts = [str(doc.get("label") or doc.get("format") or "document")]
    if doc.get("pages"):
        facts.append(f"{doc['pages']} pages")
    if doc.get("sheets"):
        facts.append("sheets: " + ", ".join(str(s) for s in doc["sheets"][:20]))
    parts = document_parts(event)
    facts.append(f"{len(parts)} parts")
    seen: dict[str, str] = {}
    for part in parts:
        if part.heading and part.heading[-1] not in seen:
            seen[part.heading[-1]] = describe(part.selector.split("/")[0])
    outline = "; ".join(f"{title} ({where})" for title, where in seen.items())
    text = f"{file_name(event)}: {', '.join(facts)}." + (f" Contents: {outline}" if outline else "")
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + " …"


@dataclass
class PartPlan:
    """What reading one document event changes: the parts' evidences to add (new or changed),
    the ids of those kept as they are, and the ids to supersede (gone from this version)."""

    event_id: str
    add: list[Evidence] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    retire: list[str] = field(default_factory=list)


def plan_parts(session_id: str, event: EnvEvent, current: Iterable[Evidence], added_at: str) -> PartPlan | None:
    """The parts plan of ``event`` against the session's ``current`` part evidences: None for
    an event that neither is a document nor removes one (a deleted file retires its parts)."""
    mine = [e for e in current if is_part(e) and e.metadata.get("uri") == event.uri and e.valid_to is None]
    deleted = event.kind == "file" and event.payload.get("change") == "deleted"
    if document(event) is None and not (deleted and mine):
        return None
    plan = PartPlan(event.event_id)
    have = {(str(e.metadata.get("selector")), str(e.metadata.get("sha"))): e.evidence_id for e in mine}
    kept: set[str] = set()
    new: set[tuple[str, str]] = set()
    for part in [] if deleted else document_parts(event):
        key = (part.selector, part.sha)
        same = have.get(key)
        if same is not None and same not in kept:
            kept.add(same)
            plan.keep.append(same)
        elif same is None and key not in new:
            new.add(key)
            plan.add.append(part_evidence(session_id, event, part, added_at))
    plan.retire = [e.evidence_id for e in mine if e.evidence_id not in kept]
    return plan


def plans_for(session_id: str, events: Sequence[EnvEvent], current: Sequence[Evidence],
              added_at: str) -> dict[str, PartPlan]:
    """Part plans by event id for a batch (a later event of the same file sees the earlier's parts)."""
    known = list(current)
    plans: dict[str, PartPlan] = {}
    for event in events:
        plan = plan_parts(session_id, event, known, added_at)
        if plan is None:
            continue
        plans[event.event_id] = plan
        gone = set(plan.retire)
        known = [e for e in known if e.evidence_id not in gone] + plan.add
    return plans
