"""SQLite: the system of record of PCM Canvas (DESIGN.md §2, §4).

``SqliteStore`` keeps one connection, opened lazily by the first call and owned by that thread
(``app.store.connection.StoreBase``): the engine calls the store only from its single-worker
``store`` executor, and any call from another thread raises ``StoreThreadError`` instead of
silently sharing the connection. Reads return core types (or small dicts for sessions, turns
and log entries); writes return what they stored.

Guarantees:
- WAL journal, ``synchronous=FULL``, foreign keys on; schema changes are the ordered, named
  ``MIGRATIONS`` recorded in ``schema_migrations``.
- Nothing is deleted: there are no delete methods; superseded evidence and memory keep their row
  with ``valid_to`` set, superseded graph edges with ``attrs["valid_to"]``. ``event_log`` is
  append-only (triggers refuse UPDATE and DELETE).
- Every mutating method writes an ``event_log`` entry in the same transaction, and runs inside
  ``transaction()``, so callers can batch several writes atomically by nesting them.
- ``record_user_input`` commits durably before it returns (a user's turn is committed before
  anything else happens).
- An answer streams into a checkpoint (``save_answer_checkpoint``), and an unfinished turn of a
  run that is gone can be found and marked interrupted, its checkpoint kept as its partial answer
  (``app.store.recovery``). Checkpoints are the one write outside the event log: scratch copies
  of an answer, replaced by it.
- Values are stored as given (ISO datetime strings are not reformatted): records read back dump
  byte-identically.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.core.types import (
    Author,
    AuthorKind,
    ContextBlock,
    EnvEvent,
    Evidence,
    GraphEdge,
    GraphNode,
    Message,
    Meta,
    ModelUsage,
    Role,
    SessionGraphData,
    Summary,
    Task,
    ToolCall,
    new_id,
    utc_now,
)
from app.store import records as R
from app.store.catalog import SessionCatalog
from app.store.connection import NotFoundError, StoreError, StoreThreadError
from app.store.lookup import IdLookup
from app.store.memory import MemoryStore
from app.store.migrations import MIGRATIONS
from app.store.recovery import UNFINISHED, TurnRecovery
from app.store.summaries import SummaryStore

__all__ = ["MIGRATIONS", "UNFINISHED", "NotFoundError", "SqliteStore", "StoreError", "StoreThreadError"]

_TURN_FIELDS = frozenset({"anchor_node_id", "status", "record", "answer_message_id"})


class SqliteStore(SessionCatalog, IdLookup, TurnRecovery, MemoryStore, SummaryStore):
    """The system of record: sessions, turns, messages, evidence, graph and the event log."""

    # ------------------------------------------------------------------ sessions

    def create_session(self, title: str = "", session_id: str | None = None, *,
                       created_at: str | None = None) -> str:
        """Create a session and return its id; an existing ``session_id`` raises ``StoreError``."""
        session_id = session_id or new_id()
        created_at = created_at or utc_now()
        with self.transaction():
            if self._one("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)):
                raise StoreError(f"session {session_id!r} already exists")
            self._db().execute(
                "INSERT INTO sessions (session_id, title, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)", (session_id, title, created_at, created_at))
            self._log(session_id, "session.created", {"title": title})
        return session_id

    def update_session(self, session_id: str, *, title: str | None = None,
                       meta: Meta | None = None, summary: Summary | None = None,
                       doc_extras: dict[str, Any] | None = None) -> None:
        """Set the given session fields (``None`` leaves a field unchanged)."""
        values: dict[str, Any] = {}
        if title is not None:
            values["title"] = title
        if meta is not None:
            values["meta"] = R.dumps(R.dump_model(meta))
        if summary is not None:
            values["summary"] = R.dumps(R.dump_model(summary))
        if doc_extras is not None:
            values["doc_extras"] = R.dumps(doc_extras)
        if not values:
            return
        with self.transaction():
            self._require_session(session_id)
            sets = ", ".join(f"{name} = ?" for name in values)
            self._db().execute(f"UPDATE sessions SET {sets} WHERE session_id = ?",
                               (*values.values(), session_id))
            self._log(session_id, "session.updated", {"fields": sorted(values)})

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Return the session as a dict (meta/summary as core types or None), or None."""
        row = self._one("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None
        return {
            "session_id": row["session_id"], "title": row["title"],
            "created_at": row["created_at"], "updated_at": row["updated_at"],
            "meta": None if row["meta"] is None else Meta.model_validate(json.loads(row["meta"])),
            "summary": None if row["summary"] is None
            else Summary.model_validate(json.loads(row["summary"])),
            "doc_extras": json.loads(row["doc_extras"]),
        }

    # ------------------------------------------------------------------ turns and messages

    def record_user_input(self, session_id: str, text: str, *, author: Author | None = None,
                          at: str | None = None) -> tuple[str, Message]:
        """Create a turn and its user message and commit durably; return (turn_id, message).

        Refuses to run inside ``transaction()``: the commit must happen before this returns.
        """
        if self._depth:
            raise StoreError(
                "record_user_input commits durably; do not call it inside transaction()")
        turn_id = new_id()
        message = Message(role=Role.USER, content=text,
                          author=author or Author(kind=AuthorKind.USER),
                          at=at or utc_now(), turn_id=turn_id)
        with self.transaction():
            self._require_session(session_id)
            self._insert(R.MESSAGES, session_id, message)
            self._insert_turn(session_id, turn_id, message.message_id, "recorded", message.at,
                              owner=self.run_id)
            self._log(session_id, "turn.recorded",
                      {"turn_id": turn_id, "message_id": message.message_id})
        return turn_id, message

    def _insert_turn(self, session_id: str, turn_id: str, input_message_id: str, status: str,
                     created_at: str, answer_message_id: str | None = None,
                     owner: str | None = None) -> None:
        self._db().execute(
            "INSERT INTO turns (turn_id, session_id, seq, input_message_id, answer_message_id, "
            "status, created_at, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (turn_id, session_id, self._next_seq("turns", session_id), input_message_id,
             answer_message_id, status, created_at, owner))

    def add_turn(self, session_id: str, turn_id: str, input_message_id: str, *,
                 answer_message_id: str | None = None, status: str = "imported",
                 created_at: str | None = None) -> None:
        """Record a turn over messages already stored (import and replay use this)."""
        with self.transaction():
            self._require_session(session_id)
            self._insert_turn(session_id, turn_id, input_message_id, status,
                              created_at or utc_now(), answer_message_id)
            self._log(session_id, "turn.added", {"turn_id": turn_id})

    def add_message(self, session_id: str, message: Message) -> Message:
        """Append a message to the session; return it as stored."""
        self._add(R.MESSAGES, session_id, message, "message.added")
        return message

    def get_message(self, message_id: str) -> Message | None:
        """Return a message by id, or None."""
        return self._get(R.MESSAGES, message_id)

    def list_messages(self, session_id: str) -> list[Message]:
        """Return the session's messages in order."""
        return self._list(R.MESSAGES, "session_id = ?", (session_id,))

    def set_turn_answer(self, turn_id: str, message: Message) -> Message:
        """Store ``message`` as the turn's answer (its ``turn_id`` is set); return it. The
        turn's answer checkpoint, a copy of the same text as it streamed, goes."""
        turn = self._require_turn(turn_id)
        message = message.model_copy(update={"turn_id": turn_id})
        with self.transaction():
            self._insert(R.MESSAGES, turn["session_id"], message)
            self._db().execute("UPDATE turns SET answer_message_id = ? WHERE turn_id = ?",
                               (message.message_id, turn_id))
            self._db().execute("DELETE FROM answer_checkpoints WHERE turn_id = ?", (turn_id,))
            self._log(turn["session_id"], "turn.answered",
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
        with self.transaction():
            sets = ", ".join(f"{name} = ?" for name in values)
            self._db().execute(f"UPDATE turns SET {sets} WHERE turn_id = ?",
                               (*values.values(), turn_id))
            small = {k: v for k, v in fields.items() if k != "record"}
            self._log(turn["session_id"], "turn.updated",
                      {"turn_id": turn_id, "fields": sorted(fields), **small})
        return self._require_turn(turn_id)

    @staticmethod
    def _turn_dict(row: sqlite3.Row) -> dict[str, Any]:
        turn = dict(row)
        turn["record"] = json.loads(turn["record"])
        return turn

    def get_turn(self, turn_id: str) -> dict[str, Any] | None:
        """Return the turn (ids, seq, status, created_at, record dict), or None."""
        row = self._one("SELECT * FROM turns WHERE turn_id = ?", (turn_id,))
        return None if row is None else self._turn_dict(row)

    def _require_turn(self, turn_id: str) -> dict[str, Any]:
        turn = self.get_turn(turn_id)
        if turn is None:
            raise NotFoundError(f"no turn {turn_id!r}")
        return turn

    def list_turns(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's turns in order."""
        rows = self._db().execute("SELECT * FROM turns WHERE session_id = ? ORDER BY seq",
                                  (session_id,))
        return [self._turn_dict(row) for row in rows]

    def _save_turn_json(self, table: str, turn_id: str, data: dict[str, Any]) -> None:
        turn = self._require_turn(turn_id)
        with self.transaction():
            self._db().execute(
                f"INSERT INTO {table} (turn_id, session_id, data, saved_at) VALUES (?, ?, ?, ?)",
                (turn_id, turn["session_id"], R.dumps(data), utc_now()))
            self._log(turn["session_id"], f"{table}.saved", {"turn_id": turn_id})

    def _latest_turn_json(self, table: str, turn_id: str) -> dict[str, Any] | None:
        row = self._one(f"SELECT data FROM {table} WHERE turn_id = ? ORDER BY id DESC LIMIT 1",
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

    # ------------------------------------------------------------------ evidence and blocks

    def add_evidence(self, session_id: str, evidence: Evidence) -> Evidence:
        """Store an evidence; return it."""
        self._add(R.EVIDENCES, session_id, evidence, "evidence.added")
        return evidence

    def get_evidence(self, evidence_id: str) -> Evidence | None:
        """Return an evidence by id (superseded ones too), or None."""
        return self._get(R.EVIDENCES, evidence_id)

    def list_evidences(self, session_id: str, include_superseded: bool = False) -> list[Evidence]:
        """Return the session's evidences in insertion order (valid ones unless asked)."""
        where = "session_id = ?" + ("" if include_superseded else " AND valid_to IS NULL")
        return self._list(R.EVIDENCES, where, (session_id,))

    def _supersede(self, spec: R.RecordSpec[Any], key: str, at: str | None, event: str) -> Any:
        row = self._one(f"SELECT session_id, valid_to FROM {spec.table} WHERE {spec.key} = ?",
                        (key,))
        if row is None:
            raise NotFoundError(f"no {spec.table} record {key!r}")
        if row["valid_to"] is None:  # superseding twice keeps the first valid_to
            at = at or utc_now()
            with self.transaction():
                self._db().execute(f"UPDATE {spec.table} SET valid_to = ? WHERE {spec.key} = ?",
                                   (at, key))
                self._log(row["session_id"], event, {spec.key: key, "valid_to": at})
        return self._get(spec, key)

    def supersede_evidence(self, evidence_id: str, at: str | None = None) -> Evidence:
        """Mark an evidence as no longer valid from ``at`` (the row is kept); return it."""
        return self._supersede(R.EVIDENCES, evidence_id, at, "evidence.superseded")

    def add_context_blocks(self, session_id: str, turn_id: str | None,
                           blocks: Sequence[ContextBlock]) -> list[ContextBlock]:
        """Append compiled blocks in order; a given ``turn_id`` is set on each block."""
        stored = [b.model_copy(update={"turn_id": turn_id}) if turn_id is not None else b
                  for b in blocks]
        with self.transaction():
            self._require_session(session_id)
            for block in stored:
                row = self._one("SELECT COALESCE(MAX(ord), -1) + 1 FROM context_blocks "
                                "WHERE session_id = ? AND turn_id IS ?",
                                (session_id, block.turn_id))
                self._insert(R.CONTEXT_BLOCKS, session_id, block, ord=row[0] if row else 0)
            self._log(session_id, "context_blocks.added",
                      {"turn_id": turn_id, "block_ids": [b.block_id for b in stored]})
        return stored

    def list_context_blocks(self, session_id: str,
                            turn_id: str | None = None) -> list[ContextBlock]:
        """Return the session's blocks in insertion order, or one turn's blocks in their order."""
        if turn_id is None:
            return self._list(R.CONTEXT_BLOCKS, "session_id = ?", (session_id,))
        return self._list(R.CONTEXT_BLOCKS, "session_id = ? AND turn_id = ?",
                          (session_id, turn_id), order="ord")

    # ------------------------------------------------------------------ tasks, calls, usage, env

    def add_task(self, session_id: str, task: Task) -> Task:
        """Store a task; return it."""
        self._add(R.TASKS, session_id, task, "task.added")
        return task

    def get_task(self, task_id: str) -> Task | None:
        """Return a task by id, or None."""
        return self._get(R.TASKS, task_id)

    def update_task(self, task_id: str, /, **fields: Any) -> Task:
        """Change task fields (validated as a ``Task``); ``updated_at`` defaults to now."""
        row = self._one("SELECT session_id FROM tasks WHERE task_id = ?", (task_id,))
        current = self.get_task(task_id)
        if row is None or current is None:
            raise NotFoundError(f"no task {task_id!r}")
        if "task_id" in fields and fields["task_id"] != task_id:
            raise StoreError("update_task cannot change task_id")
        fields.setdefault("updated_at", utc_now())
        task = Task.model_validate({**R.dump_model(current), **fields})
        values = R.TASKS.to_row(task)
        with self.transaction():
            sets = ", ".join(f"{name} = ?" for name in values)
            self._db().execute(f"UPDATE tasks SET {sets} WHERE task_id = ?",
                               (*values.values(), task_id))
            self._log(row["session_id"], "task.updated",
                      {"task_id": task_id, "fields": sorted(fields), "status": task.status.value})
        return task

    def list_tasks(self, session_id: str) -> list[Task]:
        """Return the session's tasks in insertion order."""
        return self._list(R.TASKS, "session_id = ?", (session_id,))

    def add_tool_call(self, session_id: str, call: ToolCall) -> ToolCall:
        """Store a tool call; return it."""
        self._add(R.TOOL_CALLS, session_id, call, "tool_call.added")
        return call

    def list_tool_calls(self, session_id: str, turn_id: str | None = None) -> list[ToolCall]:
        """Return the session's (or one turn's) tool calls in order."""
        if turn_id is None:
            return self._list(R.TOOL_CALLS, "session_id = ?", (session_id,))
        return self._list(R.TOOL_CALLS, "session_id = ? AND turn_id = ?", (session_id, turn_id))

    def add_model_usage(self, session_id: str, usage: ModelUsage) -> ModelUsage:
        """Store one model call's usage record; return it."""
        self._add(R.MODEL_USAGE, session_id, usage, "model_usage.added")
        return usage

    def list_model_usage(self, session_id: str, turn_id: str | None = None) -> list[ModelUsage]:
        """Return the session's (or one turn's) usage records in order."""
        if turn_id is None:
            return self._list(R.MODEL_USAGE, "session_id = ?", (session_id,))
        return self._list(R.MODEL_USAGE, "session_id = ? AND turn_id = ?", (session_id, turn_id))

    def spending_since(self, since: str) -> dict[str, float]:
        """Cost of the priced model calls made at or after ``since`` (ISO time), by provider id,
        over every session: what the provider registry's spending limits start from."""
        rows = self._db().execute(
            "SELECT provider, SUM(cost) FROM model_usage WHERE cost > 0 AND at >= ? GROUP BY provider",
            (since,),
        ).fetchall()
        return {str(row[0]): float(row[1] or 0.0) for row in rows}

    def add_env_event(self, session_id: str, event: EnvEvent) -> EnvEvent:
        """Store an environment event; return it."""
        self._add(R.ENV_EVENTS, session_id, event, "env_event.added")
        return event

    def list_env_events(self, session_id: str) -> list[EnvEvent]:
        """Return the session's environment events in order."""
        return self._list(R.ENV_EVENTS, "session_id = ?", (session_id,))

    # ------------------------------------------------------------------ graph

    def save_node(self, session_id: str, node: GraphNode) -> GraphNode:
        """Insert the node, or update it in place (keeping its insertion order); return it."""
        self._upsert(R.GRAPH_NODES, session_id, node, "graph.node_saved")
        return node

    def save_edge(self, session_id: str, edge: GraphEdge) -> GraphEdge:
        """Insert the edge, or update it in place (keeping its insertion order); return it."""
        self._upsert(R.GRAPH_EDGES, session_id, edge, "graph.edge_saved")
        return edge

    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None:
        """Move a node on the canvas (a committed drag pins it by default)."""
        row = self._one("SELECT session_id FROM graph_nodes WHERE node_id = ?", (node_id,))
        if row is None:
            raise NotFoundError(f"no node {node_id!r}")
        with self.transaction():
            self._db().execute("UPDATE graph_nodes SET x = ?, y = ?, pinned = ? WHERE node_id = ?",
                               (x, y, int(pinned), node_id))
            self._log(row["session_id"], "graph.node_moved",
                      {"node_id": node_id, "x": x, "y": y, "pinned": pinned})

    def load_graph(self, session_id: str, *, include_superseded: bool = False) -> SessionGraphData:
        """Return the session's nodes and live edges in insertion order, as saved.

        An edge superseded by a re-anchor keeps its row with ``attrs["valid_to"]`` set; those
        are returned too (in their insertion order) only when asked.
        """
        edges: list[GraphEdge] = self._list(R.GRAPH_EDGES, "session_id = ?", (session_id,))
        if not include_superseded:
            edges = [e for e in edges if e.attrs.get("valid_to") is None]
        return SessionGraphData(nodes=self._list(R.GRAPH_NODES, "session_id = ?", (session_id,)),
                                edges=edges)

    # ------------------------------------------------------------------ event log and search

    def append_event(self, session_id: str | None, type: str, payload: dict[str, Any]) -> int:
        """Append an entry to the event log; return its seq."""
        with self.transaction():
            return self._log(session_id, type, payload)

    def list_events(self, session_id: str | None, after_seq: int = 0) -> list[dict[str, Any]]:
        """Return the session's (or, with None, all) event log entries after ``after_seq``."""
        if session_id is None:
            rows = self._db().execute("SELECT * FROM event_log WHERE seq > ? ORDER BY seq",
                                      (after_seq,))
        else:
            rows = self._db().execute(
                "SELECT * FROM event_log WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after_seq))
        return [{**dict(row), "payload": json.loads(row["payload"])} for row in rows]

    def last_event(self, session_id: str, type: str) -> dict[str, Any] | None:
        """Return the session's latest event log entry of ``type`` (payload decoded), or None."""
        row = self._one("SELECT * FROM event_log WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
                        (session_id, type))
        return None if row is None else {**dict(row), "payload": json.loads(row["payload"])}

    def count_rows(self, table: str) -> int:
        """Return the number of rows of a store table (diagnostics and tests)."""
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        row = self._one(f"SELECT COUNT(*) FROM {table}")
        return int(row[0]) if row else 0


def read_spending(db_path: Path, since: str) -> dict[str, float]:
    """``SqliteStore.spending_since`` over a read-only connection of its own (no run lease, no
    migrations): what a settings view shows while the app may be writing. {} without a store."""
    if not Path(db_path).is_file():
        return {}
    conn = sqlite3.connect(f"file:{Path(db_path).as_posix()}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT provider, SUM(cost) FROM model_usage WHERE cost > 0 AND at >= ? "
                            "GROUP BY provider", (since,)).fetchall()
    except sqlite3.OperationalError:  # a store from before migration 0004 has no cost column
        return {}
    finally:
        conn.close()
    return {str(row[0]): float(row[1] or 0.0) for row in rows}
