"""Every memory of the workspace as this process knows it, kept current with what other processes
write (the memory writer's view; store thread only).

Several processes write the same memories: the app or ``pcm mcp`` (a long-running memory writer)
beside ``pcm memory revoke|edit|pin|accept``, ``pcm ask`` and ``pcm import``. A copy read once and
written back later would undo what another process did meanwhile (a revoked prohibition saved
again as valid). So the copy is never trusted for a write: the store numbers every memory write
(``rev``, under SQLite's write lock), and ``refresh`` reads exactly the rows written since this
process last read — inside the write transaction when a write is decided on it
(``MemoryService._write``), so nothing can come in between; and before a build (``MemoryService.sync``),
so that what another process revoked or edited holds in this one's open sessions too.
"""

from __future__ import annotations

from app.core.ports import SessionStore
from app.core.types import MemoryFragment


class KeptMemories:
    """The workspace's memories by id, latest version (see the module docstring)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._by_id: dict[str, MemoryFragment] | None = None
        self._rev = 0  # the store's write number this copy is current to

    def moved(self) -> bool:
        """Whether the store holds memory writes this copy has not read (or it was never read)."""
        return self._by_id is None or self._store.memory_revision() > self._rev

    def refresh(self) -> list[tuple[str, MemoryFragment]]:
        """Read what was written since this copy was current (every memory, the first time); return
        those rows (session id, memory), in the order they were written."""
        if self._by_id is None:
            self._rev = self._store.memory_revision()  # first: a row written meanwhile is read again next time
            rows = self._store.list_memories()
            self._by_id = {}
        else:
            rows, self._rev = self._store.memories_since(self._rev)
        self._by_id.update({m.fragment_id: m for _, m in rows})
        return rows

    def current(self) -> dict[str, MemoryFragment]:
        """Every memory as stored now (``refresh`` first): what a write may be decided against."""
        self.refresh()
        return self.known()

    def known(self) -> dict[str, MemoryFragment]:
        """Every memory as of the last ``refresh`` (read once, the first time)."""
        if self._by_id is None:
            self.refresh()
        assert self._by_id is not None
        return self._by_id

    def put(self, memories: list[MemoryFragment]) -> None:
        """Take in memories this process has just written."""
        if self._by_id is not None:
            self._by_id.update({m.fragment_id: m for m in memories})
