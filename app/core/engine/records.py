"""Stored records as programs outside the app read them (``Engine.records()``; the MCP server).

Read-only: a search over every session (the vector and the full-text index fused by reciprocal
rank), a message of any session, a session's messages and evidences, a turn as stored, the rows
the search index holds and how many. Nothing here opens a session or changes what the user sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.context.ranking import rrf
from app.core.engine.context import EngineContext
from app.core.types import Evidence, Message


class StoredRecords:
    """See the module docstring."""

    def __init__(self, ctx: EngineContext) -> None:
        self._ctx = ctx

    async def search(self, query: str, k: int = 10, *, kinds: Sequence[str] = ("message",),
                     since: str | None = None, until: str | None = None) -> list[tuple[str, float]]:
        """Stored records of every session most relevant to ``query``: the vector and the full-text
        index fused by reciprocal rank (best first, with the fused score)."""
        index = self._ctx.index
        if index is None or not query.strip():
            return []
        pool = max(k * 3, 20)
        found = {}
        for name, search in (("vector", index.search_vector), ("fulltext", index.search_text)):
            hits = await self._ctx.on_index(lambda s=search: s(query, pool, kinds=list(kinds), since=since, until=until))
            found[name] = [item for item, _ in hits]
        fused = rrf(found)
        return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    async def message(self, message_id: str) -> Message | None:
        """A stored message of any session (None: no such message)."""
        return await self._ctx.on_store(self._ctx.store.get_message, message_id)

    async def messages(self, session_id: str) -> list[Message]:
        """The session's stored messages in order."""
        return await self._ctx.on_store(self._ctx.store.list_messages, session_id)

    async def evidences(self, session_id: str, *, superseded: bool = False) -> list[Evidence]:
        """The session's stored evidences (``superseded``: the versions a newer one replaced too)."""
        return await self._ctx.on_store(lambda: self._ctx.store.list_evidences(session_id, include_superseded=superseded))

    async def events(self, session_id: str, prefix: str = "") -> list[dict[str, Any]]:
        """The session's event log entries (``type``, ``payload``, ``at``) whose type starts with
        ``prefix``, oldest first (e.g. "task." for the agent's decisions)."""
        entries = await self._ctx.on_store(self._ctx.store.list_events, session_id)
        return [e for e in entries if str(e.get("type", "")).startswith(prefix)]

    async def turn(self, turn_id: str) -> dict[str, Any] | None:
        """A turn as stored (session, status, input and answer message ids, record), or None."""
        return await self._ctx.on_store(self._ctx.store.get_turn, turn_id)

    async def searchable(self, ids: Sequence[str]) -> list[Any]:
        """The stored records among ``ids`` as the search index holds them (``id``, ``kind``,
        ``session_id``, ``at``, ``text``)."""
        return list(await self._ctx.on_store(self._ctx.store.list_searchable, list(ids)))

    async def index_size(self) -> int:
        """How many records the search index holds (0 without one)."""
        index = self._ctx.index
        return 0 if index is None else len(await self._ctx.on_index(index.ids))
