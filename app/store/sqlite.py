"""SQLite: the system of record of PCM Canvas (DESIGN.md §2, §4).

``SqliteStore`` is composed of parts, one per family of tables, that share one connection
(``app.store.connection.Database``, opened lazily by the first call and owned by that thread: the
engine calls the store only from its single-worker ``store`` executor, and any call from another
thread raises ``StoreThreadError`` instead of silently sharing the connection):

- ``catalog.SessionCatalog``: sessions (their fields, the list, search, archive, the last used);
- ``turns.TurnRecords``: turns, messages, intents, plans, context blocks;
- ``session_records.SessionRecords``: evidence, env events, tasks, tool calls, model usage;
- ``graph.GraphRecords``: graph nodes and edges; ``event_log.EventLog``: the event log;
- ``memory.MemoryStore``, ``topics.TopicStore``, ``summaries.SummaryStore``: what outlives a turn;
- ``recovery.TurnRecovery``: answer checkpoints, interrupted turns, what the index should hold;
- ``lookup.IdLookup``: ids by their first characters, the latest turn.

The store's own methods (what the engine's ``SessionStore`` port names, and a few more for the
CLI, the exchange and tests) are those parts' methods, forwarded: the class body below is the
table of which part answers which call. Reads return core types (or small dicts for sessions,
turns and log entries); writes return what they stored.

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

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from app.store.catalog import SessionCatalog
from app.store.connection import Database, NotFoundError, StoreError, StoreThreadError
from app.store.event_log import EventLog
from app.store.graph import GraphRecords
from app.store.lookup import IdLookup
from app.store.memory import MemoryStore
from app.store.migrations import MIGRATIONS
from app.store.recovery import UNFINISHED, TurnRecovery
from app.store.session_records import SessionRecords, read_spending
from app.store.summaries import SummaryStore
from app.store.topics import TopicStore
from app.store.turns import TurnRecords

__all__ = ["MIGRATIONS", "UNFINISHED", "NotFoundError", "SqliteStore", "StoreError", "StoreThreadError",
           "read_spending"]

P = ParamSpec("P")
Result = TypeVar("Result")


def forward(part: str, method: Callable[Concatenate[Any, P], Result]) -> Callable[Concatenate[Any, P], Result]:
    """A method of ``SqliteStore`` that calls ``method`` on the store's attribute ``part``, with
    ``method``'s signature and docstring (type checkers see the part's signature)."""

    @functools.wraps(method)
    def call(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Result:
        return method(getattr(self, part), *args, **kwargs)

    return call


class SqliteStore:
    """The system of record: sessions, turns, messages, evidence, graph and the event log."""

    def __init__(self, db_path: Path) -> None:
        self.db = Database(db_path)
        self.db_path, self.lease = self.db.db_path, self.db.lease
        self.catalog = SessionCatalog(self.db)
        self.turns = TurnRecords(self.db)
        self.records = SessionRecords(self.db)
        self.graph = GraphRecords(self.db)
        self.events = EventLog(self.db)
        self.memory = MemoryStore(self.db)
        self.topics = TopicStore(self.db)
        self.summaries = SummaryStore(self.db)
        self.recovery = TurnRecovery(self.db)
        self.lookup = IdLookup(self.db)

    @property
    def run_id(self) -> str:
        """The id of this store's run (``turns.owner`` of the turns it records)."""
        return self.db.run_id

    def _db(self) -> sqlite3.Connection:
        """The connection itself (tests and the crash drill read it directly)."""
        return self.db.connection()

    # ------------------------------------------------------------------ the connection
    transaction = forward("db", Database.transaction)
    close = forward("db", Database.close)
    pragma = forward("db", Database.pragma)
    migrations = forward("db", Database.migrations)
    count_rows = forward("db", Database.count_rows)

    # ------------------------------------------------------------------ sessions
    create_session = forward("catalog", SessionCatalog.create_session)
    update_session = forward("catalog", SessionCatalog.update_session)
    get_session = forward("catalog", SessionCatalog.get_session)
    list_sessions = forward("catalog", SessionCatalog.list_sessions)
    search_sessions = forward("catalog", SessionCatalog.search_sessions)
    set_session_archived = forward("catalog", SessionCatalog.set_session_archived)
    title_untitled_session = forward("catalog", SessionCatalog.title_untitled_session)
    set_session_generation = forward("catalog", SessionCatalog.set_session_generation)
    session_generation = forward("catalog", SessionCatalog.session_generation)
    mark_session_opened = forward("catalog", SessionCatalog.mark_session_opened)
    last_used_session_id = forward("catalog", SessionCatalog.last_used_session_id)

    # ------------------------------------------------------------------ turns and what they store
    record_user_input = forward("turns", TurnRecords.record_user_input)
    add_turn = forward("turns", TurnRecords.add_turn)
    add_message = forward("turns", TurnRecords.add_message)
    get_message = forward("turns", TurnRecords.get_message)
    list_messages = forward("turns", TurnRecords.list_messages)
    messages_by_ids = forward("turns", TurnRecords.messages_by_ids)
    set_turn_answer = forward("turns", TurnRecords.set_turn_answer)
    update_turn = forward("turns", TurnRecords.update_turn)
    get_turn = forward("turns", TurnRecords.get_turn)
    list_turns = forward("turns", TurnRecords.list_turns)
    turn_statuses = forward("turns", TurnRecords.turn_statuses)
    save_intent = forward("turns", TurnRecords.save_intent)
    get_intent = forward("turns", TurnRecords.get_intent)
    save_plan = forward("turns", TurnRecords.save_plan)
    get_plan = forward("turns", TurnRecords.get_plan)
    add_context_blocks = forward("turns", TurnRecords.add_context_blocks)
    list_context_blocks = forward("turns", TurnRecords.list_context_blocks)

    # ------------------------------------------------------------------ evidence, env, tasks, calls, usage
    add_evidence = forward("records", SessionRecords.add_evidence)
    get_evidence = forward("records", SessionRecords.get_evidence)
    list_evidences = forward("records", SessionRecords.list_evidences)
    supersede_evidence = forward("records", SessionRecords.supersede_evidence)
    add_env_event = forward("records", SessionRecords.add_env_event)
    list_env_events = forward("records", SessionRecords.list_env_events)
    add_task = forward("records", SessionRecords.add_task)
    get_task = forward("records", SessionRecords.get_task)
    update_task = forward("records", SessionRecords.update_task)
    list_tasks = forward("records", SessionRecords.list_tasks)
    add_tool_call = forward("records", SessionRecords.add_tool_call)
    list_tool_calls = forward("records", SessionRecords.list_tool_calls)
    add_model_usage = forward("records", SessionRecords.add_model_usage)
    list_model_usage = forward("records", SessionRecords.list_model_usage)
    spending_since = forward("records", SessionRecords.spending_since)
    off_machine_turns = forward("records", SessionRecords.off_machine_turns)

    # ------------------------------------------------------------------ graph and event log
    save_node = forward("graph", GraphRecords.save_node)
    save_edge = forward("graph", GraphRecords.save_edge)
    set_node_position = forward("graph", GraphRecords.set_node_position)
    load_graph = forward("graph", GraphRecords.load_graph)
    append_event = forward("events", EventLog.append_event)
    list_events = forward("events", EventLog.list_events)
    last_event = forward("events", EventLog.last_event)

    # ------------------------------------------------------------------ memory, topics, summaries
    add_memory = forward("memory", MemoryStore.add_memory)
    add_memories = forward("memory", MemoryStore.add_memories)
    list_memory = forward("memory", MemoryStore.list_memory)
    list_memories = forward("memory", MemoryStore.list_memories)
    get_memory = forward("memory", MemoryStore.get_memory)
    memory_session = forward("memory", MemoryStore.memory_session)
    save_memory = forward("memory", MemoryStore.save_memory)
    update_memory = forward("memory", MemoryStore.update_memory)
    memory_revision = forward("memory", MemoryStore.memory_revision)
    memories_since = forward("memory", MemoryStore.memories_since)
    supersede_memory = forward("memory", MemoryStore.supersede_memory)
    touch_memories = forward("memory", MemoryStore.touch_memories)
    save_topics = forward("topics", TopicStore.save_topics)
    move_topic_mentions = forward("topics", TopicStore.move_topic_mentions)
    load_topics = forward("topics", TopicStore.load_topics)
    session_topics = forward("topics", TopicStore.session_topics)
    add_session_topics = forward("topics", TopicStore.add_session_topics)
    add_summary = forward("summaries", SummaryStore.add_summary)
    list_summaries = forward("summaries", SummaryStore.list_summaries)
    get_summary = forward("summaries", SummaryStore.get_summary)
    summary_by_key = forward("summaries", SummaryStore.summary_by_key)

    # ------------------------------------------------------------------ recovery and the index's rows
    save_answer_checkpoint = forward("recovery", TurnRecovery.save_answer_checkpoint)
    answer_checkpoint = forward("recovery", TurnRecovery.answer_checkpoint)
    interrupted_turns = forward("recovery", TurnRecovery.interrupted_turns)
    interrupt_turn = forward("recovery", TurnRecovery.interrupt_turn)
    sweep_runs = forward("recovery", TurnRecovery.sweep_runs)
    list_searchable = forward("recovery", TurnRecovery.list_searchable)
    searchable_ids = forward("recovery", TurnRecovery.searchable_ids)

    # ------------------------------------------------------------------ ids as typed
    match_ids = forward("lookup", IdLookup.match_ids)
    latest_turn_id = forward("lookup", IdLookup.latest_turn_id)
