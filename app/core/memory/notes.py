"""Which memory objects a session can recall, as ``NoteView``s of its state.

A session sees its own memories (closed facts too: "what was X before?" finds them; a revoked one
is kept with ``removed_at`` so a replay of an earlier turn still sees what that turn saw) and the
workspace-scope memories of every other session, labelled with that session's title. The profile
statements of other sessions become ``profile`` notes, which the session's profile reads, and so
do the statements the user added in the Memory panel, in every session; they are never recalled
as evidence. A session's own profile statements come from its messages; their memories are
``profile`` notes of that session too, which say only whether the user revoked one
(``SessionService.profile`` then leaves the statement out).

A memory from outside (an imported document's, an MCP client's: ``MemoryFragment.origin``) speaks
for no one until the user accepts it (``pending``): its own session may recall it as a quotation,
no other session sees it, and it is never a profile statement. Its text is quoted (fenced)
wherever it is shown to the model, accepted or not.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from app.core.memory.extract import OUTSIDE, WORKSPACE_TYPES, memory_id
from app.core.session.state import NoteView
from app.core.text.quoting import fence
from app.core.types import MemoryFragment

LABELS = {"fact": "Fact", "preference": "Prefers", "prohibition": "Never", "permission": "Allowed",
          "decision": "Decision", "commitment": "Commitment", "event": "Event", "note": "Note", "summary": "Summary"}
_FROM = {"imported": "from an imported session", "agent": "recorded by an MCP client"}


def memory_line(memory: MemoryFragment) -> str:
    """How a memory reads in a context: its type, then its content; one taken from outside text
    (a file, a feed, a tool result, a model answer, an import, an MCP client) stays a quotation."""
    label = LABELS.get(memory.type, "Note")
    if memory.origin:  # nothing of the document or the client in the header: its words go inside
        pending = ", not confirmed by the user" if memory.pending else ""
        return fence(f"{label.lower()} {_FROM[memory.origin]}{pending}", memory.content)
    if OUTSIDE in memory.tags:  # the source's name (a file's, a tool's) is outside text too: the label
        return fence(f"{label.lower()} remembered from outside text", memory.content,
                     memory.context.rpartition(" in ")[2])
    return f"{label}: {memory.content}"


def is_statement_record(note: NoteView, messages: Container[str]) -> bool:
    """Whether a ``profile`` note is the memory of a statement in one of ``messages`` (its
    session's own: the message states it; the note only says whether it was revoked)."""
    return (bool(note.source_ids) and note.source_ids[0] in messages
            and note.note_id == memory_id(note.source_ids[0], note.memory_type, note.text))


def note_of(memory: MemoryFragment, *, own: bool, origin: str) -> NoteView | None:
    """The note a session keeps of ``memory`` (None when it does not see it).

    A profile statement the user added in the Memory panel (no source evidence: no message of any
    session says it) is a ``profile`` note of every session, its own included, without an origin:
    it was said in no session. A pending memory from outside is a quoted ``memory`` note of its own
    session only; the other sessions see it from the user's acceptance on (its ``added_at``), so a
    turn of theirs built before it replays without it."""
    profile = memory.type in WORKSPACE_TYPES and not memory.pending
    by_hand = profile and not memory.source_evidence_ids
    if not own and (memory.scope != "workspace" or memory.pending):
        return None
    if memory.superseded_by and memory.type != "fact" and memory.closed_at is None and memory.revoked_at is None:
        return None  # merged into a consolidated note (or accepted as the user's own), which stands for it
    return NoteView(
        memory.fragment_id, "profile" if profile else "memory",
        memory.content if profile else memory_line(memory), memory.valid_from,
        added_at=memory.recorded_at if own else max(memory.recorded_at, memory.accepted_at or ""),
        valid_to=memory.valid_to or "" if memory.closed_at else "",
        closed_at=memory.closed_at or "", removed_at=memory.revoked_at or "", origin="" if own or by_hand else origin,
        source_ids=tuple(memory.source_evidence_ids), memory_type=memory.type,
        key=memory.key.lower() if memory.type == "fact" else "")


def notes_for(session_id: str, rows: Iterable[tuple[str, MemoryFragment]], titles: Mapping[str, str]) -> list[NoteView]:
    """The notes ``session_id`` keeps of the workspace's memories (``rows``: (session id, memory))."""
    out: list[NoteView] = []
    for sid, memory in rows:
        note = note_of(memory, own=sid == session_id, origin=titles.get(sid) or "untitled session")
        if note is not None:
            out.append(note)
    return out
