"""Memory objects in SQLite (a part of ``SqliteStore``; the topic index is ``app.store.topics``).

Memory objects live in ``memory_fragments`` (one row per memory, the session it came from; fields
beyond the columns in ``data``). A memory is never deleted: closing, consolidating and revoking set
``valid_to`` (and ``superseded_by`` / ``revoked_at``); an edit or a link's evolution rewrites the row
with the earlier values kept in ``revisions``.

Several processes write memories (the app's or ``pcm mcp``'s memory writer, ``pcm memory``, ``pcm
ask``, ``pcm import``), and a long-running one keeps them in memory. Every write gives the rows it
touches the next write number (``rev``: the table's highest plus one, under SQLite's write lock),
so ``memories_since(rev)`` is exactly what was written since a process last read, and
``update_memory`` rewrites a memory from the row as it is inside the write transaction, never from
a copy read earlier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from app.core.types import MemoryFragment, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError

_NEXT_REV = "(SELECT COALESCE(MAX(rev), 0) + 1 FROM memory_fragments)"


class MemoryStore:
    """Memory objects; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _stamp(self, fragment_ids: Sequence[str]) -> None:
        """Give the rows of ``fragment_ids`` the next write number (inside the caller's transaction)."""
        for start in range(0, len(fragment_ids), 500):
            chunk = list(fragment_ids[start:start + 500])
            marks = ", ".join("?" for _ in chunk)
            self.db.connection().execute(
                f"UPDATE memory_fragments SET rev = {_NEXT_REV} WHERE fragment_id IN ({marks})", chunk)

    def add_memory(self, session_id: str, fragment: MemoryFragment) -> MemoryFragment:
        """Store a memory object; return it."""
        with self.db.transaction():
            self.db.add(R.MEMORY, session_id, fragment, "memory.added")
            self._stamp([fragment.fragment_id])
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
                self._stamp([f.fragment_id for f in new])
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

    def memory_revision(self) -> int:
        """The highest write number of the memory table (0 when nothing was written)."""
        row = self.db.one("SELECT COALESCE(MAX(rev), 0) FROM memory_fragments")
        return int(row[0]) if row is not None else 0

    def memories_since(self, rev: int) -> tuple[list[tuple[str, MemoryFragment]], int]:
        """The memories written (added or rewritten, by any process) after write number ``rev``,
        in the order of their writes, with their sessions; and the highest write number now."""
        with self.db.transaction():  # one snapshot: the rows and the number agree
            rows = self.db.connection().execute(
                "SELECT * FROM memory_fragments WHERE rev > ? ORDER BY rev, seq", (rev,)).fetchall()
            now = self.memory_revision()
        return [(row["session_id"], R.MEMORY.from_row(row)) for row in rows], now

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
        with self.db.transaction():
            self.db.upsert(R.MEMORY, self.memory_session(fragment.fragment_id), fragment, event)
            self._stamp([fragment.fragment_id])
        return fragment

    def update_memory(self, fragment_id: str, change: Callable[[MemoryFragment], Sequence[MemoryFragment]],
                      event: str = "memory.updated") -> list[MemoryFragment]:
        """Apply ``change`` to the memory as it is stored now, in one transaction (under the write
        lock, so no other process's write comes in between): the memories it returns are written
        (rewritten, or added to the same session when new) and returned."""
        with self.db.transaction():
            memory = self.get_memory(fragment_id)
            if memory is None:
                raise NotFoundError(f"no memory {fragment_id!r}")
            session_id = self.memory_session(fragment_id)
            changed = list(change(memory))
            for fragment in changed:
                if self.get_memory(fragment.fragment_id) is None:
                    self.db.insert(R.MEMORY, session_id, fragment)
                    self.db.log(session_id, "memory.added", {"fragment_ids": [fragment.fragment_id]})
                else:
                    self.db.upsert(R.MEMORY, session_id, fragment, event)
            self._stamp([f.fragment_id for f in changed])
        return changed

    def supersede_memory(self, fragment_id: str, at: str | None = None) -> MemoryFragment:
        """Mark a memory object as no longer valid from ``at`` (the row is kept); return it."""
        with self.db.transaction():
            memory = self.get_memory(fragment_id)
            if memory is None:
                raise NotFoundError(f"no memory {fragment_id!r}")
            if memory.valid_to is not None:  # superseding twice keeps the first valid_to
                return memory
            return self.save_memory(memory.model_copy(update={"valid_to": at or utc_now()}), "memory.superseded")

    def touch_memories(self, fragment_ids: Iterable[str], at: str | None = None) -> None:
        """Count a recall of each memory (``access_count``, ``last_accessed_at``)."""
        at = at or utc_now()
        ids = list(fragment_ids)
        with self.db.transaction():
            for fragment_id in ids:
                self.db.connection().execute(
                    "UPDATE memory_fragments SET data = json_set(data, '$.access_count', "
                    "COALESCE(json_extract(data, '$.access_count'), 0) + 1, '$.last_accessed_at', ?) "
                    "WHERE fragment_id = ?", (at, fragment_id))
            self._stamp(ids)
