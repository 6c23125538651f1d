"""Memory objects in SQLite (a part of ``SqliteStore``; the topic index is ``app.store.topics``).

Memory objects live in ``memory_fragments`` (one row per memory, the session it came from; fields
beyond the columns in ``data``). A memory is never deleted: closing, consolidating and revoking set
``valid_to`` (and ``superseded_by`` / ``revoked_at``); an edit or a link's evolution rewrites the row
with the earlier values kept in ``revisions``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.core.types import MemoryFragment, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError


class MemoryStore:
    """Memory objects; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_memory(self, session_id: str, fragment: MemoryFragment) -> MemoryFragment:
        """Store a memory object; return it."""
        self.db.add(R.MEMORY, session_id, fragment, "memory.added")
        return fragment

    def add_memories(self, session_id: str, fragments: Sequence[MemoryFragment]) -> list[MemoryFragment]:
        """Store the memories not stored yet (by id) in one transaction; return those written."""
        with self.db.transaction():
            self.db.require_session(session_id)
            new = [f for f in fragments if self.db.one(
                "SELECT 1 FROM memory_fragments WHERE fragment_id = ?", (f.fragment_id,)) is None]
            for fragment in new:
                self.db.insert(R.MEMORY, session_id, fragment)
            if new:
                self.db.log(session_id, "memory.added", {"fragment_ids": [f.fragment_id for f in new]})
        return new

    def list_memory(self, session_id: str, include_superseded: bool = False) -> list[MemoryFragment]:
        """Return the session's memory objects in order (valid ones unless asked)."""
        where = "session_id = ?" + ("" if include_superseded else " AND valid_to IS NULL")
        return self.db.select(R.MEMORY, where, (session_id,))

    def list_memories(self) -> list[tuple[str, MemoryFragment]]:
        """Every memory object of the workspace with the session it came from (closed and revoked
        ones too), in the order they were recorded."""
        rows = self.db.connection().execute(
            "SELECT * FROM memory_fragments ORDER BY json_extract(data, '$.recorded_at'), session_id, seq")
        return [(row["session_id"], R.MEMORY.from_row(row)) for row in rows]

    def get_memory(self, fragment_id: str) -> MemoryFragment | None:
        """A memory object by id (closed and revoked ones too), or None."""
        return self.db.get(R.MEMORY, fragment_id)

    def memory_session(self, fragment_id: str) -> str:
        """The id of the session a memory came from."""
        row = self.db.one("SELECT session_id FROM memory_fragments WHERE fragment_id = ?", (fragment_id,))
        if row is None:
            raise NotFoundError(f"no memory {fragment_id!r}")
        return str(row["session_id"])

    def save_memory(self, fragment: MemoryFragment, event: str = "memory.updated") -> MemoryFragment:
        """Rewrite a stored memory object (a revision, a closing, a revocation, its access count)."""
        self.db.upsert(R.MEMORY, self.memory_session(fragment.fragment_id), fragment, event)
        return fragment

    def supersede_memory(self, fragment_id: str, at: str | None = None) -> MemoryFragment:
        """Mark a memory object as no longer valid from ``at`` (the row is kept); return it."""
        memory = self.get_memory(fragment_id)
        if memory is None:
            raise NotFoundError(f"no memory {fragment_id!r}")
        if memory.valid_to is not None:  # superseding twice keeps the first valid_to
            return memory
        return self.save_memory(memory.model_copy(update={"valid_to": at or utc_now()}), "memory.superseded")

    def touch_memories(self, fragment_ids: Iterable[str], at: str | None = None) -> None:
        """Count a recall of each memory (``access_count``, ``last_accessed_at``)."""
        at = at or utc_now()
        with self.db.transaction():
            for fragment_id in fragment_ids:
                self.db.connection().execute(
                    "UPDATE memory_fragments SET data = json_set(data, '$.access_count', "
                    "COALESCE(json_extract(data, '$.access_count'), 0) + 1, '$.last_accessed_at', ?) "
                    "WHERE fragment_id = ?", (at, fragment_id))
