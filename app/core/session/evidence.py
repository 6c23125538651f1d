"""Messages and memories as evidence: a stored message or memory cited by a context becomes an evidence with its id."""

from __future__ import annotations

from app.core.session.state import MessageView, NoteView
from app.core.types import Evidence, EvidenceSource, EvidenceType, Role, SourceKind


def message_evidence(view: MessageView) -> Evidence:
    """The evidence record of a stored message (same id), so blocks and answers can cite it."""
    user = view.role == Role.USER
    return Evidence(
        evidence_id=view.message_id,
        type=EvidenceType.USER_INPUT if user else EvidenceType.LLM_OUTPUT,
        source=EvidenceSource(kind=SourceKind.USER if user else SourceKind.LLM, name=view.speaker),
        content=view.text,
        valid_from=view.at,
        metadata={"turn_id": view.turn_id},
    )


def note_evidence(note: NoteView) -> Evidence:
    """The evidence record of a memory a context cites (same id): what it said then, where from."""
    return Evidence(
        evidence_id=note.note_id,
        type=EvidenceType.MEMORY,
        source=EvidenceSource(kind=SourceKind.SYSTEM, name="memory"),
        content=note.render(),
        valid_from=note.at,
        metadata={"memory_type": note.memory_type, "source_evidence_ids": list(note.source_ids),
                  "session": note.origin},
    )
