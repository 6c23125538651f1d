"""Recall's structured channel and fusion over an in-memory session (no index)."""

from __future__ import annotations

import asyncio

from app.core.context.retrieval import RecallRequest, recall
from app.core.session.state import NoteView, SessionState
from app.core.types import Author, AuthorKind, Message, Role


def _state() -> SessionState:
    state = SessionState("s")
    rows = [("Ana", "2024-01-01T10:00:00", "old plan"), ("Ben", "2024-01-05T09:00:00", "ben note"),
            ("Ana", "2024-01-05T10:00:00", "new plan")]
    for i, (who, at, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{i}"))
    state.add_note(NoteView("f1", "env", "report.md changed", "2024-01-05T08:00:00"))
    return state


def _run(req: RecallRequest) -> list[str]:
    async def no_index(*_a, **_k):  # pragma: no cover - no index channels requested
        return []

    result = asyncio.run(recall(_state(), req, query_vector=None, search=None, run_blocking=no_index))
    run = next(r for r in result.channels if r.channel == "structured")
    return [i for i, _ in run.hits]


def test_structured_filters_by_speaker_kind_and_date_range() -> None:
    base = dict(query="q", channel_sizes={"structured": 10}, now="2024-01-05T12:00:00")
    day = dict(since="2024-01-04T12:00:00", until="2024-01-05T12:00:01", date_mode="filter")
    assert _run(RecallRequest(**base, speakers=["ana"])) == ["m2", "m0"]
    assert _run(RecallRequest(**base, speakers=["Ana"], **day)) == ["m2"]
    assert _run(RecallRequest(**base, kinds=["file"])) == ["f1"]
    assert _run(RecallRequest(**base, speakers=["Ben"], kinds=["file"], **day)) == ["m1", "f1"]
    # "prefer" mode excludes nothing
    assert _run(RecallRequest(**base, speakers=["Ana"], **{**day, "date_mode": "prefer"})) == ["m2", "m0"]
    assert _run(RecallRequest(**{**base, "channel_sizes": {"structured": 1}}, speakers=["Ana"])) == ["m2"]
