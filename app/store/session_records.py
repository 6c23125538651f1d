"""The records a session gathers besides its turns: evidence, environment events, tasks, tool
calls and model usage.

Each is a core type stored through its ``records.RecordSpec`` (plain columns plus a ``data``
JSON column), added with an ``event_log`` entry in the same transaction. Superseded evidence
keeps its row with ``valid_to`` set. The cost of priced model calls since a date is read here
too, also over a read-only connection of its own (``read_spending``) for a view that must not
open the store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from app.core.types import EnvEvent, Evidence, ModelUsage, Task, ToolCall, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError, StoreError

_SPENDING = "SELECT provider, SUM(cost) FROM model_usage WHERE cost > 0 AND at >= ? GROUP BY provider"


class SessionRecords:
    """Evidence, env events, tasks, tool calls and model usage (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ evidence and env events

    def add_evidence(self, session_id: str, evidence: Evidence) -> Evidence:
        """Store an evidence; return it."""
        self.db.add(R.EVIDENCES, session_id, evidence, "evidence.added")
        return evidence

    def get_evidence(self, evidence_id: str) -> Evidence | None:
        """Return an evidence by id (superseded ones too), or None."""
        return self.db.get(R.EVIDENCES, evidence_id)

    def list_evidences(self, session_id: str, include_superseded: bool = False) -> list[Evidence]:
        """Return the session's evidences in insertion order (valid ones unless asked)."""
        where = "session_id = ?" + ("" if include_superseded else " AND valid_to IS NULL")
        return self.db.select(R.EVIDENCES, where, (session_id,))

    def _supersede(self, spec: R.RecordSpec[Any], key: str, at: str | None, event: str) -> Any:
        row = self.db.one(f"SELECT session_id, valid_to FROM {spec.table} WHERE {spec.key} = ?",
                          (key,))
        if row is None:
            raise NotFoundError(f"no {spec.table} record {key!r}")
        if row["valid_to"] is None:  # superseding twice keeps the first valid_to
            at = at or utc_now()
            with self.db.transaction():
                self.db.connection().execute(f"UPDATE {spec.table} SET valid_to = ? WHERE {spec.key} = ?",
                                             (at, key))
                self.db.log(row["session_id"], event, {spec.key: key, "valid_to": at})
        return self.db.get(spec, key)

    def supersede_evidence(self, evidence_id: str, at: str | None = None) -> Evidence:
        """Mark an evidence as no longer valid from ``at`` (the row is kept); return it."""
        return self._supersede(R.EVIDENCES, evidence_id, at, "evidence.superseded")

    def add_env_event(self, session_id: str, event: EnvEvent) -> EnvEvent:
        """Store an environment event; return it."""
        self.db.add(R.ENV_EVENTS, session_id, event, "env_event.added")
        return event

    def list_env_events(self, session_id: str) -> list[EnvEvent]:
        """Return the session's environment events in order."""
        return self.db.select(R.ENV_EVENTS, "session_id = ?", (session_id,))

    # ------------------------------------------------------------------ tasks and tool calls

    def add_task(self, session_id: str, task: Task) -> Task:
        """Store a task; return it."""
        self.db.add(R.TASKS, session_id, task, "task.added")
        return task

    def get_task(self, task_id: str) -> Task | None:
        """Return a task by id, or None."""
        return self.db.get(R.TASKS, task_id)

    def update_task(self, task_id: str, /, **fields: Any) -> Task:
        """Change task fields (validated as a ``Task``); ``updated_at`` defaults to now."""
        row = self.db.one("SELECT session_id FROM tasks WHERE task_id = ?", (task_id,))
        current = self.get_task(task_id)
        if row is None or current is None:
            raise NotFoundError(f"no task {task_id!r}")
        if "task_id" in fields and fields["task_id"] != task_id:
            raise StoreError("update_task cannot change task_id")
        fields.setdefault("updated_at", utc_now())
        task = Task.model_validate({**R.dump_model(current), **fields})
        values = R.TASKS.to_row(task)
        with self.db.transaction():
            sets = ", ".join(f"{name} = ?" for name in values)
            self.db.connection().execute(f"UPDATE tasks SET {sets} WHERE task_id = ?",
                                         (*values.values(), task_id))
            self.db.log(row["session_id"], "task.updated",
                        {"task_id": task_id, "fields": sorted(fields), "status": task.status.value})
        return task

    def list_tasks(self, session_id: str) -> list[Task]:
        """Return the session's tasks in insertion order."""
        return self.db.select(R.TASKS, "session_id = ?", (session_id,))

    def add_tool_call(self, session_id: str, call: ToolCall) -> ToolCall:
        """Store a tool call; return it."""
        self.db.add(R.TOOL_CALLS, session_id, call, "tool_call.added")
        return call

    def list_tool_calls(self, session_id: str, turn_id: str | None = None) -> list[ToolCall]:
        """Return the session's (or one turn's) tool calls in order."""
        if turn_id is None:
            return self.db.select(R.TOOL_CALLS, "session_id = ?", (session_id,))
        return self.db.select(R.TOOL_CALLS, "session_id = ? AND turn_id = ?", (session_id, turn_id))

    # ------------------------------------------------------------------ model usage

    def add_model_usage(self, session_id: str, usage: ModelUsage) -> ModelUsage:
        """Store one model call's usage record; return it."""
        self.db.add(R.MODEL_USAGE, session_id, usage, "model_usage.added")
        return usage

    def list_model_usage(self, session_id: str, turn_id: str | None = None) -> list[ModelUsage]:
        """Return the session's (or one turn's) usage records in order."""
        if turn_id is None:
            return self.db.select(R.MODEL_USAGE, "session_id = ?", (session_id,))
        return self.db.select(R.MODEL_USAGE, "session_id = ? AND turn_id = ?", (session_id, turn_id))

    def spending_since(self, since: str) -> dict[str, float]:
        """Cost of the priced model calls made at or after ``since`` (ISO time), by provider id,
        over every session: what the provider registry's spending limits start from."""
        rows = self.db.connection().execute(_SPENDING, (since,)).fetchall()
        return {str(row[0]): float(row[1] or 0.0) for row in rows}

    def off_machine_turns(self, session_id: str) -> list[str]:
        """Ids of the session's turns whose answer came from a provider off this machine."""
        rows = self.db.connection().execute(
            "SELECT DISTINCT turn_id FROM model_usage WHERE session_id = ? AND stage = 'answer' "
            "AND off_machine = 1 AND turn_id IS NOT NULL", (session_id,))
        return [row[0] for row in rows]


def read_spending(db_path: Path, since: str) -> dict[str, float]:
    """``SqliteStore.spending_since`` over a read-only connection of its own (no run lease, no
    migrations): what a settings view shows while the app may be writing. {} without a store."""
    if not Path(db_path).is_file():
        return {}
    conn = sqlite3.connect(f"file:{Path(db_path).as_posix()}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(_SPENDING, (since,)).fetchall()
    except sqlite3.OperationalError:  # a store from before migration 0004 has no cost column
        return {}
    finally:
        conn.close()
    return {str(row[0]): float(row[1] or 0.0) for row in rows}
