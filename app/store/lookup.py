"""Finding records by what a person types: the first characters of an id, or "the latest"
(the last used session is ``catalog.SessionCatalog.last_used_session_id``)."""

from __future__ import annotations

from app.store.connection import Database


class IdLookup:
    """Id prefixes and the latest turn (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def match_ids(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]:
        """Ids of ``kind`` ("turn", "session" or "memory") that start with ``prefix`` (as typed, any
        case), at most ``limit``: what a short id the window shows resolves to."""
        table, column = {"turn": ("turns", "turn_id"), "session": ("sessions", "session_id"),
                         "memory": ("memory_fragments", "fragment_id")}[kind]
        if not prefix.replace("-", "").isalnum():  # ids are hex: nothing else can match (no LIKE wildcards)
            return []
        rows = self.db.connection().execute(
            f"SELECT {column} FROM {table} WHERE {column} LIKE ? ORDER BY rowid LIMIT ?", (prefix + "%", limit))
        return [row[0] for row in rows]

    def latest_turn_id(self, session_id: str | None = None) -> str | None:
        """The most recently recorded turn (of ``session_id``, or of any session), or None."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        row = self.db.one(f"SELECT turn_id FROM turns {where} ORDER BY rowid DESC LIMIT 1", params)
        return None if row is None else row[0]
