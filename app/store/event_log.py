"""The event log: every decision, in order (append-only; triggers refuse UPDATE and DELETE).

Every mutating method of the store writes its entry through ``Database.log`` inside its own
transaction; ``append_event`` is for the engine's decisions that change no other row.
"""

from __future__ import annotations

import json
from typing import Any

from app.store.connection import Database


class EventLog:
    """Appending to and reading the event log (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def append_event(self, session_id: str | None, type: str, payload: dict[str, Any]) -> int:
        """Append an entry to the event log; return its seq."""
        with self.db.transaction():
            return self.db.log(session_id, type, payload)

    def list_events(self, session_id: str | None, after_seq: int = 0) -> list[dict[str, Any]]:
        """Return the session's (or, with None, all) event log entries after ``after_seq``."""
        if session_id is None:
            rows = self.db.connection().execute("SELECT * FROM event_log WHERE seq > ? ORDER BY seq",
                                                (after_seq,))
        else:
            rows = self.db.connection().execute(
                "SELECT * FROM event_log WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after_seq))
        return [{**dict(row), "payload": json.loads(row["payload"])} for row in rows]

    def last_event(self, session_id: str, type: str) -> dict[str, Any] | None:
        """Return the session's latest event log entry of ``type`` (payload decoded), or None."""
        row = self.db.one("SELECT * FROM event_log WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
                          (session_id, type))
        return None if row is None else {**dict(row), "payload": json.loads(row["payload"])}
