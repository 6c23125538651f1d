"""What a crash can leave behind: unfinished turns, and rows the search index lacks.

A turn is unfinished while its status is one of ``UNFINISHED``: "recorded" (the input is
committed), "building" (its context is built and stored; no answer yet) or "streaming" (the
answer streams; its text so far is in ``answer_checkpoints``). A run that goes on finishes every
turn it starts ("answered", "failed"); one that is killed leaves them unfinished. Its run lease
(``app.store.connection.RunLease``) is gone then, which is how ``interrupted_turns`` tells its
turns from those another live process is answering right now. ``interrupt_turn`` marks such a
turn ``INTERRUPTED``, keeping what is known: the build record and the partial answer the user
already saw. The engine decides what that answer looks like (``app.core.engine.recovery``).

The search index is written after SQLite commits, so a crash in between, or an import (which
never indexes), leaves rows the index lacks: ``searchable_ids`` lets the index catch-up compare
ids cheaply, and ``list_searchable(ids)`` reads only the rows it needs.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from app.core.types import Message, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError
from app.store.search_rows import SearchRow, env_row, memory_row, message_row, part_row

UNFINISHED = ("recorded", "building", "streaming")
INTERRUPTED = "interrupted"
_UNFINISHED_SQL = ", ".join(f"'{s}'" for s in UNFINISHED)
_SEARCHABLE: tuple[tuple[str, str, str, Any, Any], ...] = (  # table, key, condition, record spec, row maker
    ("messages", "message_id", "1", R.MESSAGES, message_row),
    ("memory_fragments", "fragment_id", "valid_to IS NULL", R.MEMORY, memory_row),
    ("env_events", "event_id", "1", R.ENV_EVENTS, env_row),
    # a document's parts: rag_doc evidences with a selector (app.core.session.documents.is_part)
    ("evidences", "evidence_id", "type = 'rag_doc' AND valid_to IS NULL AND json_extract(metadata, '$.selector') "
     "IS NOT NULL", R.EVIDENCES, part_row),
)
_CHUNK = 500  # ids per IN (...) list


class TurnRecovery:
    """Answer checkpoints, the recovery of interrupted turns, and what the search index should
    hold (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def save_answer_checkpoint(self, turn_id: str, text: str, pieces: int) -> bool:
        """Keep ``text``, the answer streamed so far (``pieces`` tokens), as the turn's checkpoint,
        durably; the first one moves the turn from "building" to "streaming" (logged). Returns
        False, writing nothing, once the turn has finished (its answer is stored)."""
        with self.db.transaction():
            row = self.db.one("SELECT session_id, status FROM turns WHERE turn_id = ?", (turn_id,))
            if row is None:
                raise NotFoundError(f"no turn {turn_id!r}")
            if row["status"] not in ("building", "streaming"):
                return False
            self.db.connection().execute(
                "INSERT INTO answer_checkpoints (turn_id, session_id, text, pieces, at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(turn_id) DO UPDATE SET text = excluded.text, pieces = excluded.pieces, at = excluded.at",
                (turn_id, row["session_id"], text, pieces, utc_now()))
            if row["status"] == "building":
                self.db.connection().execute("UPDATE turns SET status = 'streaming' WHERE turn_id = ?", (turn_id,))
                self.db.log(row["session_id"], "turn.streaming", {"turn_id": turn_id})
        return True

    def answer_checkpoint(self, turn_id: str) -> dict[str, Any] | None:
        """The turn's checkpoint (text, pieces, at), or None."""
        row = self.db.one("SELECT text, pieces, at FROM answer_checkpoints WHERE turn_id = ?", (turn_id,))
        return None if row is None else dict(row)

    def interrupted_turns(self) -> list[dict[str, Any]]:
        """The unfinished turns of runs that are gone, oldest first: each turn as ``get_turn``
        returns it (``owner`` included), plus ``input_text`` and ``checkpoint`` (text, pieces, at;
        or None). Turns of this store's run and of other live processes are left out."""
        rows = self.db.connection().execute(
            "SELECT t.*, m.content AS input_text, c.text AS cp_text, c.pieces AS cp_pieces, c.at AS cp_at "
            "FROM turns t LEFT JOIN messages m ON m.message_id = t.input_message_id "
            "LEFT JOIN answer_checkpoints c ON c.turn_id = t.turn_id "
            f"WHERE t.status IN ({_UNFINISHED_SQL}) ORDER BY t.rowid").fetchall()
        alive: dict[str | None, bool] = {}
        out = []
        for row in rows:
            owner = row["owner"]
            if owner not in alive:
                alive[owner] = self.db.lease.alive(owner)
            if alive[owner]:
                continue
            turn = {k: row[k] for k in row.keys() if not k.startswith("cp_")}
            turn["record"] = json.loads(turn["record"])
            turn["checkpoint"] = None if row["cp_text"] is None else {
                "text": row["cp_text"], "pieces": row["cp_pieces"], "at": row["cp_at"]}
            out.append(turn)
        return out

    def interrupt_turn(self, turn_id: str, *, record: dict[str, Any] | None = None,
                       answer: Message | None = None) -> bool:
        """Mark an unfinished turn "interrupted": store ``answer`` (its partial answer) and
        ``record`` when given, drop its checkpoint, log ``turn.interrupted``. Checked again inside
        the transaction, so two processes recovering at once do it once; returns False (nothing
        written) when the turn has finished meanwhile."""
        with self.db.transaction():
            row = self.db.one("SELECT session_id, status FROM turns WHERE turn_id = ?", (turn_id,))
            if row is None:
                raise NotFoundError(f"no turn {turn_id!r}")
            if row["status"] not in UNFINISHED:
                return False
            session_id = row["session_id"]
            values: dict[str, Any] = {"status": INTERRUPTED}
            if answer is not None:
                self.db.insert(R.MESSAGES, session_id, answer.model_copy(update={"turn_id": turn_id}))
                values["answer_message_id"] = answer.message_id
            if record is not None:
                values["record"] = R.dumps(record)
            sets = ", ".join(f"{name} = ?" for name in values)
            self.db.connection().execute(f"UPDATE turns SET {sets} WHERE turn_id = ?", (*values.values(), turn_id))
            self.db.connection().execute("DELETE FROM answer_checkpoints WHERE turn_id = ?", (turn_id,))
            self.db.log(session_id, "turn.interrupted", {
                "turn_id": turn_id, "was": row["status"],
                "answer_message_id": answer.message_id if answer is not None else None,
                "partial_chars": len(answer.content) if answer is not None else 0})
        return True

    def sweep_runs(self) -> int:
        """Remove the lease files of runs that are gone; return how many were removed."""
        return self.db.lease.sweep()

    # ------------------------------------------------------------------ what the index should hold

    def list_searchable(self, ids: Collection[str] | None = None) -> list[SearchRow]:
        """Every record the search index should hold — messages, valid memory, env events, each
        in insertion order — or only those among ``ids``."""
        rows: list[SearchRow] = []
        wanted = None if ids is None else sorted(set(ids))
        for table, key, condition, spec, make in _SEARCHABLE:
            if wanted is None:
                found = self.db.connection().execute(
                    f"SELECT * FROM {table} WHERE {condition} ORDER BY rowid").fetchall()
            else:
                found = []
                for start in range(0, len(wanted), _CHUNK):
                    chunk = wanted[start:start + _CHUNK]
                    found += self.db.connection().execute(
                        f"SELECT rowid AS _rowid, * FROM {table} WHERE {condition} AND {key} IN "
                        f"({', '.join('?' for _ in chunk)})", chunk).fetchall()
                found.sort(key=lambda r: r["_rowid"])
            rows += [make(r["session_id"], spec.from_row(r)) for r in found]
        return rows

    def searchable_ids(self) -> set[str]:
        """The ids of ``list_searchable()``, read without the records."""
        ids: set[str] = set()
        for table, key, condition, _spec, _make in _SEARCHABLE:
            ids.update(r[0] for r in self.db.connection().execute(f"SELECT {key} FROM {table} WHERE {condition}"))
        return ids
