"""What the search index holds for each searchable record, built in one place, and the filters
of a search over it.

The live path (the engine adding a new message to the index) and the rebuild path (re-embedding
everything from SQLite) both build rows with these functions, so the indexed text of a record
never depends on how it got into the index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.core.routing.environment import event_text
from app.core.session.documents import part_index_text
from app.core.types import EnvEvent, Evidence, MemoryFragment, Message

SearchKind = Literal["message", "memory", "env"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("message", "memory", "env")


@dataclass(frozen=True, slots=True)
class SearchRow:
    """One searchable record: its SQLite id, session, kind, the text to index, and its time."""

    id: str
    session_id: str
    kind: SearchKind
    text: str
    at: str


def speaker(message: Message) -> str:
    """The name a message is rendered with: its author's id, else its role."""
    if message.author is not None and message.author.id:
        return message.author.id
    return message.role.value


def message_row(session_id: str, message: Message) -> SearchRow:
    """Return the index row of a message, "Speaker: content".

    The speaker is part of the indexed text because questions name people ("what did Ana
    say about ...") and both the embedding and the full-text match use it.
    """
    text = f"{speaker(message)}: {message.content}"
    return SearchRow(message.message_id, session_id, "message", text, message.at)


def memory_row(session_id: str, fragment: MemoryFragment) -> SearchRow:
    """Return the index row of a memory fragment (content, then its keywords)."""
    return SearchRow(fragment.fragment_id, session_id, "memory", fragment.index_text(), fragment.valid_from)


def env_row(session_id: str, event: EnvEvent) -> SearchRow:
    """Return the index row of an environment event (title, uri, content; a document's outline)."""
    text = "\n".join(part for part in (event.title, event.uri, event_text(event)) if part)
    return SearchRow(event.event_id, session_id, "env", text, event.at)


def part_row(session_id: str, evidence: Evidence) -> SearchRow:
    """Return the index row of a document's part (its label and text), searched as an env row."""
    return SearchRow(evidence.evidence_id, session_id, "env", part_index_text(evidence), evidence.valid_from)


def quote(value: str) -> str:
    """Return ``value`` as a SQL string literal for a LanceDB filter (quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def where_clause(session_id: str | None, kinds: Sequence[str] | None,
                 since: str | None = None, until: str | None = None) -> str | None:
    """The SQL filter of a search: the session, the kinds, and ``since <= at < until`` (ISO
    strings compare in time order; pushed into LanceDB, so the top k are taken in the range)."""
    clauses = []
    if session_id is not None:
        clauses.append(f"session_id = {quote(session_id)}")
    if kinds is not None:
        bad = [k for k in kinds if k not in SEARCH_KINDS]
        if bad:
            raise ValueError(f"unknown search kinds {bad}; expected some of {SEARCH_KINDS}")
        if not kinds:
            return "FALSE"
        clauses.append(f"kind IN ({', '.join(quote(k) for k in kinds)})")
    if since:
        clauses.append(f"at >= {quote(since)}")
    if until:
        clauses.append(f"at < {quote(until)}")
    return " AND ".join(clauses) or None
