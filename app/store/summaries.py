"""Summaries in SQLite (a part of ``SqliteStore``; migration 0008).

One row per summary version (``SummaryRecord``): a new version of a subject's summary at a
level is written with the previous one closed (``valid_to``) in the same transaction, so
nothing is deleted and the versions form a ``based_on`` chain. ``cache_key`` finds a summary of
an unchanged subject again (the engine's cache falls back to it after a restart).
"""

from __future__ import annotations

import json
import sqlite3

from app.core.types import SummaryRecord
from app.store import records as R
from app.store.connection import Database

_COLUMNS = ("summary_id", "subject", "subject_id", "level", "cache_key", "based_on", "created_at", "valid_to")


def _record(row: sqlite3.Row) -> SummaryRecord:
    data = json.loads(row["data"])
    data.update({name: row[name] for name in _COLUMNS})
    return SummaryRecord.model_validate(data)


class SummaryStore:
    """Summaries; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_summary(self, session_id: str, summary: SummaryRecord) -> SummaryRecord:
        """Store a new summary version, closing the one it is ``based_on`` at its ``created_at``."""
        dump = R.dump_model(summary)
        data = {k: v for k, v in dump.items() if k not in _COLUMNS}
        with self.db.transaction():
            self.db.require_session(session_id)
            if self.db.one("SELECT 1 FROM summaries WHERE summary_id = ?", (summary.summary_id,)):
                return summary
            if summary.based_on:
                self.db.connection().execute(
                    "UPDATE summaries SET valid_to = ? WHERE summary_id = ? AND valid_to IS NULL",
                    (summary.created_at, summary.based_on))
            self.db.connection().execute(
                f"INSERT INTO summaries ({', '.join(_COLUMNS)}, session_id, seq, data) "
                f"VALUES ({', '.join('?' for _ in _COLUMNS)}, ?, ?, ?)",
                (*(dump[name] for name in _COLUMNS), session_id, self.db.next_seq("summaries", session_id),
                 R.dumps(data)))
            self.db.log(session_id, "summary.added", {"summary_id": summary.summary_id, "subject": summary.subject,
                                                       "level": summary.level})
        return summary

    def list_summaries(self, session_id: str, *, current: bool = True) -> list[SummaryRecord]:
        """The session's summaries in the order written (only the current versions unless asked)."""
        where = "session_id = ?" + (" AND valid_to IS NULL" if current else "")
        rows = self.db.connection().execute(f"SELECT * FROM summaries WHERE {where} ORDER BY seq", (session_id,))
        return [_record(row) for row in rows]

    def get_summary(self, summary_id: str) -> SummaryRecord | None:
        """A summary version by id (closed ones too), or None."""
        row = self.db.one("SELECT * FROM summaries WHERE summary_id = ?", (summary_id,))
        return None if row is None else _record(row)

    def summary_by_key(self, cache_key: str) -> SummaryRecord | None:
        """The latest summary written under ``cache_key``, or None."""
        row = self.db.one("SELECT * FROM summaries WHERE cache_key = ? ORDER BY created_at DESC LIMIT 1", (cache_key,))
        return None if row is None else _record(row)
