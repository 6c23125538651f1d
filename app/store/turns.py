"""Turns and what each one stores: its messages, intents, context plans and compiled blocks.

A turn is one input and its answer (``turns``: ids, ``seq``, ``status``, the ``record`` JSON, the
run that recorded it). ``record_user_input`` commits the input durably before anything else
happens; intents and plans are versioned (a new row per save, the latest wins); context blocks
keep their order within a turn (``ord``). Messages are read by id across sessions too, with their
neighbours in conversation (workspace recall).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from app.core.types import Author, AuthorKind, ContextBlock, Message, Role, new_id, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError, StoreError

_TURN_FIELDS = frozenset({"anchor_node_id", "status", "record", "answer_message_id"})


def _turn_dict(row: sqlite3.Row) -> dict[str, Any]:
    turn = dict(row)
    turn["record"] = json.loads(turn["record"])
    return turn


class TurnRecords:
    """Turns, messages, intents, plans and context blocks (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ turns and messages

    def record_user_input(self, session_id: str, text: str, *, author: Author | None = None,
                          at: str | None = None) -> tuple[str, Message]:
        """Create a turn and its user message and commit durably; return (turn_id, message).

        Refuses to run inside ``transaction()``: the commit must happen before this returns.
        """
        if self.db.in_transaction:
            raise StoreError(
                "record_user_input commits durably; do not call it inside transaction()")
        turn_id = new_id()
        message = Message(role=Role.USER, content=text,
                          author=author or Author(kind=AuthorKind.USER),
                          at=at or utc_now(), turn_id=turn_id)
        with self.db.transaction():
            self.db.require_session(session_id)
            self.db.insert(R.MESSAGES, session_id, message)
            self._insert_turn(session_id, turn_id, message.message_id, "recorded", message.at,
                              owner=self.db.run_id)
            self.db.log(session_id, "turn.recorded",
                        {"turn_id": turn_id, "message_id": message.message_id})
        return turn_id, message

    def _insert_turn(self, session_id: str, turn_id: str, input_message_id: str, status: str,
                     created_at: str, answer_message_id: str | None = None,
                     owner: str | None = None) -> None:
        self.db.connection().execute(
            "INSERT INTO turns (turn_id, session_id, seq, input_message_id, answer_message_id, "
            "status, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (turn_id, session_id, self.db.next_seq("turns", session_id), input_message_id,
             answer_message_id, status, created_at, owner))

    def add_turn(self, session_id: str, turn_id: str, input_message_id: str, *,
                 answer_message_id: str | None = None, status: str = "imported",
                 created_at: str | None = None, anchor_node_id: str | None = None,
                 record: dict[str, Any] | None = None) -> None:
        """Record a turn over messages already stored (import and history ingest use this), with
        the node it was anchored to and its record when it has them (an imported turn)."""
        with self.db.transaction():
            self.db.require_session(session_id)
            self._insert_turn(session_id, turn_id, input_message_id, status,
                              created_at or utc_now(), answer_message_id)
            if anchor_node_id is not None or record:
                self.db.connection().execute("UPDATE turns SET anchor_node_id = ?, record = ? WHERE turn_id = ?",
                                             (anchor_node_id, R.dumps(record or {}), turn_id))
            self.db.log(session_id, "turn.added", {"turn_id": turn_id})

    def add_message(self, session_id: str, message: Message) -> Message:
        """Append a message to the session; return it as stored."""
        self.db.add(R.MESSAGES, session_id, message, "message.added")
        return message

    def get_message(self, message_id: str) -> Message | None:
        """Return a message by id, or None."""
        return self.db.get(R.MESSAGES, message_id)

    def list_messages(self, session_id: str) -> list[Message]:
        """Return the session's messages in order."""
        return self.db.select(R.MESSAGES, "session_id = ?", (session_id,))

    def messages_by_ids(self, ids: Sequence[str], around: int = 0) -> list[tuple[str, int, Any]]:
        """(session id, seq, message) of each stored message among ``ids`` (any session) and of the
        ``around`` messages before and after each in its session: workspace recall resolves other
        sessions' hits, and their neighbours in conversation, with it. Ordered by session and seq."""
        out: dict[str, tuple[str, int, Any]] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start:start + 500])
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.connection().execute(
                "SELECT m2.* FROM messages m1 JOIN messages m2 ON m2.session_id = m1.session_id "
                f"AND m2.seq BETWEEN m1.seq - ? AND m1.seq + ? WHERE m1.message_id IN ({marks})",
                (around, around, *chunk))
            for row in rows:
                out[row["message_id"]] = (row["session_id"], int(row["seq"]), R.MESSAGES.from_row(row))
        return sorted(out.values(), key=lambda r: (r[0], r[1]))

    def set_turn_answer(self, turn_id: str, message: Message) -> Message:
        """Store ``message`` as the turn's answer (its ``turn_id`` is set); return it. The
        turn's answer checkpoint, a copy of the same text as it streamed, goes."""
        turn = self._require_turn(turn_id)
        message = message.model_copy(update={"turn_id": turn_id})
        with self.db.transaction():
            self.db.insert(R.MESSAGES, turn["session_id"], message)
            self.db.connection().execute("UPDATE turns SET answer_message_id = ? WHERE turn_id = ?",
                                         (message.message_id, turn_id))
            self.db.connection().execute("DELETE FROM answer_checkpoints WHERE turn_id = ?", (turn_id,))
            self.db.log(turn["session_id"], "turn.answered",
                        {"turn_id": turn_id, "message_id": message.message_id})
        return message

    def update_turn(self, turn_id: str, /, **fields: Any) -> dict[str, Any]:
        """Set anchor_node_id, status, record (dict) or answer_message_id; return the turn."""
        unknown = set(fields) - _TURN_FIELDS
        if unknown:
            raise StoreError(f"update_turn: unknown fields {sorted(unknown)}")
        turn = self._require_turn(turn_id)
        if not fields:
            return turn
        values = {k: R.dumps(v) if k == "record" else v for k, v in fields.items()}
        with self.db.transaction():
            sets = ", ".join(f"{name} = ?" for name in values)
            self.db.connection().execute(f"UPDATE turns SET {sets} WHERE turn_id = ?",
                                         (*values.values(), turn_id))
            small = {k: v for k, v in fields.items() if k != "record"}
            self.db.log(turn["session_id"], "turn.updated",
                        {"turn_id": turn_id, "fields": sorted(fields), **small})
        return self._require_turn(turn_id)

    def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        """Return the turn (ids, seq, status, created_at, record dict), or None."""
        row = self.db.one("SELECT * FROM turns WHERE turn_id = ?", (turn_id,))
        return None if row is None else _turn_dict(row)

    def _require_turn(self, turn_id: str) -> dict[str, Any]:
        turn = self.get_turn(turn_id)
        if turn is None:
            raise NotFoundError(f"no turn {turn_id!r}")
        return turn

    def list_turns(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's turns in order."""
        rows = self.db.connection().execute("SELECT * FROM turns WHERE session_id = ? ORDER BY seq",
                                            (session_id,))
        return [_turn_dict(row) for row in rows]

    def turn_statuses(self, session_id: str) -> dict[str, str]:
        """turn id → status of every turn of the session (without reading their records)."""
        rows = self.db.connection().execute("SELECT turn_id, status FROM turns WHERE session_id = ?",
                                            (session_id,))
        return {row["turn_id"]: row["status"] for row in rows}

    # ------------------------------------------------------------------ intents and plans

    def _save_turn_json(self, table: str, turn_id: str, data: dict[str, Any]) -> None:
        turn = self._require_turn(turn_id)
        with self.db.transaction():
            self.db.connection().execute(
                f"INSERT INTO {table} (turn_id, session_id, data, saved_at) VALUES (?, ?, ?, ?)",
                (turn_id, turn["session_id"], R.dumps(data), utc_now()))
            self.db.log(turn["session_id"], f"{table}.saved", {"turn_id": turn_id})

    def _latest_turn_json(self, table: str, turn_id: str) -> dict[str, Any] | None:
        row = self.db.one(f"SELECT data FROM {table} WHERE turn_id = ? ORDER BY id DESC LIMIT 1",
                          (turn_id,))
        return None if row is None else json.loads(row[0])

    def save_intent(self, turn_id: str, intent: dict[str, Any]) -> None:
        """Store the turn's intent (a new version; earlier versions are kept)."""
        self._save_turn_json("intents", turn_id, intent)

    def get_intent(self, turn_id: str) -> dict[str, Any] | None:
        """Return the latest intent saved for the turn, or None."""
        return self._latest_turn_json("intents", turn_id)

    def save_plan(self, turn_id: str, plan: dict[str, Any]) -> None:
        """Store the turn's context plan (a new version; earlier versions are kept)."""
        self._save_turn_json("context_plans", turn_id, plan)

    def get_plan(self, turn_id: str) -> dict[str, Any] | None:
        """Return the latest context plan saved for the turn, or None."""
        return self._latest_turn_json("context_plans", turn_id)

    # ------------------------------------------------------------------ context blocks

    def add_context_blocks(self, session_id: str, turn_id: str | None,
                           blocks: Sequence[ContextBlock]) -> list[ContextBlock]:
        """Append compiled blocks in order; a given ``turn_id`` is set on each block."""
        stored = [b.model_copy(update={"turn_id": turn_id}) if turn_id is not None else b
                  for b in blocks]
        with self.db.transaction():
            self.db.require_session(session_id)
            for block in stored:
                row = self.db.one("SELECT COALESCE(MAX(ord), -1) + 1 FROM context_blocks "
                                  "WHERE session_id = ? AND turn_id IS ?",
                                  (session_id, block.turn_id))
                self.db.insert(R.CONTEXT_BLOCKS, session_id, block, ord=row[0] if row else 0)
            self.db.log(session_id, "context_blocks.added",
                        {"turn_id": turn_id, "block_ids": [b.block_id for b in stored]})
        return stored

    def list_context_blocks(self, session_id: str,
                            turn_id: str | None = None) -> list[ContextBlock]:
        """Return the session's blocks in insertion order, or one turn's blocks in their order."""
        if turn_id is None:
            return self.db.select(R.CONTEXT_BLOCKS, "session_id = ?", (session_id,))
        return self.db.select(R.CONTEXT_BLOCKS, "session_id = ? AND turn_id = ?",
                              (session_id, turn_id), order="ord")
