"""How each core type maps onto its SQLite table (used by ``app.store.sqlite``).

A ``RecordSpec`` names the plain columns and the JSON columns of a model; every other field of
the model dump (and every unknown key kept by ``extra="allow"``) goes into the ``data`` JSON
column. ``side`` columns hold what the store keeps beside a record and never dumps: a message's or
memory's provenance (``origin``; a memory's ``accepted_at``), private attributes of the model. Values are stored as they come (ISO strings stay strings), so a record read back dumps
byte-identically to the one written.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from app.core.types import (
    ContextBlock,
    EnvEvent,
    Evidence,
    GraphEdge,
    GraphNode,
    MemoryFragment,
    Message,
    ModelUsage,
    Task,
    ToolCall,
)

M = TypeVar("M", bound=BaseModel)


def dumps(value: Any) -> str:
    """Compact, order-preserving JSON text for a stored value."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dump_model(obj: BaseModel) -> dict[str, Any]:
    """The JSON-ready dump of a core model, by alias, keeping ``None`` fields."""
    return obj.model_dump(mode="json", by_alias=True)


@dataclass(frozen=True)
class RecordSpec(Generic[M]):
    """The table of a core model: its key, plain columns and JSON columns."""

    table: str
    model: type[M]
    key: str
    columns: tuple[str, ...]
    json_columns: tuple[str, ...] = ()
    side: tuple[str, ...] = ()  # columns read from and into the private attribute ``_<name>``

    def to_row(self, obj: M) -> dict[str, Any]:
        """Return the column values of ``obj`` (without ``session_id``/``seq``)."""
        dumped = dump_model(obj)
        row: dict[str, Any] = {name: dumped.pop(name) for name in self.columns}
        for name in self.json_columns:
            row[name] = dumps(dumped.pop(name))
        row["data"] = dumps(dumped)
        for name in self.side:
            row[name] = getattr(obj, f"_{name}") or None  # "" (made here) is stored as NULL
        return row

    def from_row(self, row: sqlite3.Row) -> M:
        """Rebuild the model from a table row."""
        values: dict[str, Any] = {name: row[name] for name in self.columns}
        for name in self.json_columns:
            values[name] = json.loads(row[name])
        values.update(json.loads(row["data"]))
        obj = self.model.model_validate(values)
        for name in self.side:
            if row[name] is not None:
                setattr(obj, f"_{name}", row[name])
        return obj


MESSAGES = RecordSpec(
    "messages", Message, "message_id", ("message_id", "role", "content", "at", "turn_id"),
    ("author", "refs"), side=("origin",),
)
TASKS = RecordSpec(
    "tasks", Task, "task_id",
    ("task_id", "name", "status", "parent_task_id", "created_at", "updated_at"),
    ("depends_on", "result_evidence_ids"),
)
EVIDENCES = RecordSpec(
    "evidences", Evidence, "evidence_id",
    ("evidence_id", "type", "content", "confidence", "valid_from", "valid_to"),
    ("source", "metadata", "links"),
)
CONTEXT_BLOCKS = RecordSpec(
    "context_blocks", ContextBlock, "block_id",
    ("block_id", "turn_id", "block_type", "priority", "token_estimate", "content"),
    ("refs",),
)
TOOL_CALLS = RecordSpec(
    "tool_calls", ToolCall, "tool_call_id",
    ("tool_call_id", "turn_id", "task_id", "tool", "status", "called_at"),
)
MODEL_USAGE = RecordSpec(
    "model_usage", ModelUsage, "model_usage_id",
    ("model_usage_id", "turn_id", "task_id", "stage", "provider", "model", "prompt_tokens",
     "completion_tokens", "first_token_latency_ms", "latency_ms", "status", "cost", "off_machine", "at"),
)
ENV_EVENTS = RecordSpec(
    "env_events", EnvEvent, "event_id",
    ("event_id", "kind", "source", "uri", "title", "content", "at"),
    ("payload",),
)
MEMORY = RecordSpec(
    "memory_fragments", MemoryFragment, "fragment_id",
    ("fragment_id", "content", "importance", "valid_from", "valid_to"),
    ("keywords", "source_evidence_ids"), side=("origin", "accepted_at"),
)
GRAPH_NODES = RecordSpec(
    "graph_nodes", GraphNode, "node_id",
    ("node_id", "kind", "label", "ref_id", "x", "y", "pinned", "created_at"),
    ("attrs",),
)
GRAPH_EDGES = RecordSpec(
    "graph_edges", GraphEdge, "edge_id", ("edge_id", "src", "dst", "kind", "created_at"),
    ("attrs",),
)
