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

The content grows with the chain too (a standard or detailed summary is composed of every part,
the older ones coarser: 100,000 imported turns wrote 3.6 GB, most of it contents repeated). An
extension whose content begins with lines of its base's content keeps only how many lines it
keeps and the lines after them (``data["content_tail"]``): composing changes the newest lines
only. This is plain text differencing, so any content reads back exactly.

Reading a version walks its chain once, extending lists in place (a version 6,000 updates long
reads in one pass, not 6,000 copies of its growing lists). ``list_summaries(current=False)``
gives every version whole, each with every id it covers: its size grows with the square of the
chain, so the engine asks for the versions it needs by id (``get_summary``).
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
_TAIL = "content_tail"  # in an extension's data: {"keep": lines of the base's content kept, "lines": those after}


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
    out = {**data, "covers": {**data["covers"], "ids": ids[len(before_ids):]}, "parts": parts[len(before_parts):],
           _EXTENDS: base["summary_id"]}
    before_lines, lines = base["content"].split("\n"), data["content"].split("\n")
    keep = _common_prefix(before_lines, lines)
    if keep:
        del out["content"]
        out[_TAIL] = {"keep": keep, "lines": lines[keep:]}
    return out


def _common_prefix(a: list[str], b: list[str]) -> int:
    """How many leading items ``a`` and ``b`` share (a binary search over slice comparisons, which
    run in C: contents are thousands of lines that differ near the end)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _whole_data(summary: SummaryRecord) -> dict[str, Any]:
    """The record's JSON data, its covered ids and parts the record's own lists (JSON already, and
    never changed once made): dumping them would copy a long chain's every id at each version."""
    head = summary.model_copy(update={"covers": summary.covers.model_copy(update={"ids": []}), "parts": []})
    data = R.dump_model(head)
    data["covers"]["ids"], data["parts"] = summary.covers.ids, summary.parts
    return data


class SummaryStore:
    """Summaries; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # The whole data of the versions last written (the chains' ends), by id: the next version
        # of a subject is stored as its extension without reading the chain back.
        self._ends: dict[str, dict[str, Any]] = {}

    def add_summary(self, session_id: str, summary: SummaryRecord) -> SummaryRecord:
        """Store a new summary version, closing the one it is ``based_on`` at its ``created_at``."""
        dump = _whole_data(summary)
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
        data = _data(row)
        end = self._ends.get(data["summary_id"])  # a chain's end this process wrote: no walk (the row's
        if end is not None:                        # columns win: another process may have closed it since)
            return SummaryRecord.model_validate({**end, **{name: data[name] for name in _COLUMNS}})
        return SummaryRecord.model_validate(self._joined(data))

    def _whole(self, summary_id: str) -> dict[str, Any] | None:
        """The whole data of a stored version (its chain put back together), or None."""
        if summary_id in self._ends:
            return self._ends[summary_id]
        row = self.db.one("SELECT * FROM summaries WHERE summary_id = ?", (summary_id,))
        return None if row is None else self._joined(_data(row))

    def _joined(self, data: dict[str, Any]) -> dict[str, Any]:
        """A row's data with the covered ids, parts and content lines of the versions it extends
        put back before its own (one pass over the chain, oldest first)."""
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
        if not extensions:
            return data
        ids, parts = list(data["covers"]["ids"]), list(data["parts"])
        content: str = data["content"]
        lines: list[str] | None = None  # the content as lines, once an extension keeps some of them
        for extension in reversed(extensions):
            ids.extend(extension["covers"]["ids"])
            parts.extend(extension["parts"])
            if _TAIL in extension:
                if lines is None:
                    lines = content.split("\n")
                del lines[extension[_TAIL]["keep"]:]
                lines.extend(extension[_TAIL]["lines"])
            else:
                content, lines = extension["content"], None
        last = extensions[0]
        return {**{k: v for k, v in last.items() if k not in (_EXTENDS, _TAIL)},
                "content": "\n".join(lines) if lines is not None else content,
                "covers": {**last["covers"], "ids": ids}, "parts": parts}
