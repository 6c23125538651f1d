"""Summaries in SQLite (a part of ``SqliteStore``; migration 0008).

One row per summary version (``SummaryRecord``): a new version of a subject's summary at a
level is written with the previous one closed (``valid_to``) in the same transaction, so
nothing is deleted and the versions form a ``based_on`` chain. ``cache_key`` finds a summary of
an unchanged subject again (the engine's cache falls back to it after a restart).

A version covers every turn its chain covered and keeps every earlier part (``covers.ids``,
``parts``): stored whole, each row would repeat its chain, and a session's summaries would grow
with the square of its length (4,000 imported turns: 144 MB in 777 versions). So a version whose
ids and parts extend those of the version it is ``based_on`` is stored as the extension only
(``data["extends"]``: that version's id), and reading puts the chain back together; the records
read are the same either way.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from app.core.types import SummaryRecord
from app.store import records as R
from app.store.connection import Database, StoreError

_COLUMNS = ("summary_id", "subject", "subject_id", "level", "cache_key", "based_on", "created_at", "valid_to")
_EXTENDS = "extends"  # in a row's data: the version whose covered ids and parts come before this row's


def _data(row: sqlite3.Row) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(row["data"])
    data.update({name: row[name] for name in _COLUMNS})
    return data


def _extension(base: dict[str, Any], data: dict[str, Any]) -> dict[str, Any] | None:
    """``data`` as what it adds to ``base`` (both whole), or None when it does not extend it."""
    before_ids, ids = base["covers"]["ids"], data["covers"]["ids"]
    before_parts, parts = base["parts"], data["parts"]
    if ids[:len(before_ids)] != before_ids or parts[:len(before_parts)] != before_parts:
        return None
    return {**data, "covers": {**data["covers"], "ids": ids[len(before_ids):]}, "parts": parts[len(before_parts):],
            _EXTENDS: base["summary_id"]}


class SummaryStore:
    """Summaries; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # The whole data of the versions last written (the chains' ends), by id: the next version
        # of a subject is stored as its extension without reading the chain back.
        self._ends: dict[str, dict[str, Any]] = {}

    def add_summary(self, session_id: str, summary: SummaryRecord) -> SummaryRecord:
        """Store a new summary version, closing the one it is ``based_on`` at its ``created_at``."""
        dump = R.dump_model(summary)
        with self.db.transaction():
            self.db.require_session(session_id)
            if self.db.one("SELECT 1 FROM summaries WHERE summary_id = ?", (summary.summary_id,)):
                return summary
            stored = dump
            if summary.based_on:
                self.db.connection().execute(
                    "UPDATE summaries SET valid_to = ? WHERE summary_id = ? AND valid_to IS NULL",
                    (summary.created_at, summary.based_on))
                base = self._whole(summary.based_on)
                stored = (_extension(base, dump) if base is not None else None) or dump
            self.db.connection().execute(
                f"INSERT INTO summaries ({', '.join(_COLUMNS)}, session_id, seq, data) "
                f"VALUES ({', '.join('?' for _ in _COLUMNS)}, ?, ?, ?)",
                (*(dump[name] for name in _COLUMNS), session_id, self.db.next_seq("summaries", session_id),
                 R.dumps({k: v for k, v in stored.items() if k not in _COLUMNS})))
            self.db.log(session_id, "summary.added", {"summary_id": summary.summary_id, "subject": summary.subject,
                                                       "level": summary.level})
        self._ends.pop(summary.based_on or "", None)
        self._ends[summary.summary_id] = dump
        return summary

    def list_summaries(self, session_id: str, *, current: bool = True) -> list[SummaryRecord]:
        """The session's summaries in the order written (only the current versions unless asked)."""
        where = "session_id = ?" + (" AND valid_to IS NULL" if current else "")
        rows = self.db.connection().execute(f"SELECT * FROM summaries WHERE {where} ORDER BY seq", (session_id,))
        return [self._record(row) for row in rows]

    def get_summary(self, summary_id: str) -> SummaryRecord | None:
        """A summary version by id (closed ones too), or None."""
        row = self.db.one("SELECT * FROM summaries WHERE summary_id = ?", (summary_id,))
        return None if row is None else self._record(row)

    def summary_by_key(self, cache_key: str) -> SummaryRecord | None:
        """The latest summary written under ``cache_key``, or None."""
        row = self.db.one("SELECT * FROM summaries WHERE cache_key = ? ORDER BY created_at DESC LIMIT 1", (cache_key,))
        return None if row is None else self._record(row)

    def _record(self, row: sqlite3.Row) -> SummaryRecord:
        return SummaryRecord.model_validate(self._joined(_data(row)))

    def _whole(self, summary_id: str) -> dict[str, Any] | None:
        """The whole data of a stored version (its chain put back together), or None."""
        if summary_id in self._ends:
            return self._ends[summary_id]
        row = self.db.one("SELECT * FROM summaries WHERE summary_id = ?", (summary_id,))
        return None if row is None else self._joined(_data(row))

    def _joined(self, data: dict[str, Any]) -> dict[str, Any]:
        """A row's data with the covered ids and parts of the versions it extends put back before its own."""
        extensions: list[dict[str, Any]] = []
        while _EXTENDS in data:
            extensions.append(data)
            base_id = data[_EXTENDS]
            if base_id in self._ends:
                data = self._ends[base_id]
                break
            row = self.db.one("SELECT * FROM summaries WHERE summary_id = ?", (base_id,))
            if row is None:
                raise StoreError(f"summary {extensions[-1]['summary_id']!r} extends {base_id!r}, which is not stored")
            data = _data(row)
        for extension in reversed(extensions):
            data = {**{k: v for k, v in extension.items() if k != _EXTENDS},
                    "covers": {**extension["covers"], "ids": [*data["covers"]["ids"], *extension["covers"]["ids"]]},
                    "parts": [*data["parts"], *extension["parts"]]}
        return data
