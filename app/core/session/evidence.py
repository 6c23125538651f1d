"""Messages as evidence: a stored message cited by a context becomes an evidence with its id."""

from __future__ import annotations

from app.core.session.state import MessageView
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
