"""SqliteStore: migrations, PRAGMAs, append-only log, supersede, graph, turns, transactions."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from app.core.types import (
    ContextBlock,
    EnvEvent,
    Evidence,
    EvidenceSource,
    GraphEdge,
    GraphNode,
    MemoryFragment,
    Message,
    ModelUsage,
    Role,
    Task,
    TaskStatus,
    ToolCall,
)
from app.store.migrations import apply_migrations
from app.store.sqlite import MIGRATIONS, NotFoundError, SqliteStore, StoreError, StoreThreadError
from tests.store.helpers import populate

ALL_TABLES = {
    "sessions", "messages", "turns", "env_events", "intents", "context_plans", "tasks",
    "evidences", "context_blocks", "tool_calls", "model_usage", "memory_fragments",
    "graph_nodes", "graph_edges", "event_log", "schema_migrations",
}


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def _evidence(content: str = "fact") -> Evidence:
    return Evidence(type="tool_result", source=EvidenceSource(kind="tool", name="t"),
                    content=content)


# ---------------------------------------------------------------- schema and PRAGMAs


def test_migrations_apply_in_order_from_empty(store: SqliteStore) -> None:
    assert store.migrations() == [name for name, _ in MIGRATIONS]
    assert [name for name, _ in MIGRATIONS][:2] == ["0001_initial", "0002_canvas_positions"]
    store.close()
    with _raw(store.db_path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert ALL_TABLES <= tables
        rows = conn.execute("SELECT id, name, applied_at FROM schema_migrations ORDER BY id")
        rows = rows.fetchall()
        assert [r["name"] for r in rows] == [name for name, _ in MIGRATIONS]
        assert all(r["applied_at"].endswith("Z") for r in rows)
        # Reopening applies nothing again.
        assert apply_migrations(conn) == []


def test_pragmas_wal_and_full_sync(store: SqliteStore) -> None:
    assert store.pragma("journal_mode") == "wal"
    assert store.pragma("synchronous") == 2  # FULL
    assert store.pragma("foreign_keys") == 1
    assert store.pragma("busy_timeout") >= 1000


def test_migration_from_previous_schema_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = _raw(path)
    assert apply_migrations(conn, MIGRATIONS[:1]) == ["0001_initial"]
    # Data as the first release wrote it: canvas positions inside graph_nodes.data.
    conn.execute("INSERT INTO sessions (session_id, title, created_at, updated_at) "
                 "VALUES ('s1', 'old session', '2025-01-01T00:00:00Z', '2025-01-01T00:00:00Z')")
    conn.execute("INSERT INTO messages (message_id, session_id, seq, role, author, content, at, "
                 "refs, turn_id, data) VALUES ('m1', 's1', 1, 'user', 'null', 'hello old', "
                 "'2025-01-01T00:00:01Z', '[]', NULL, '{}')")
    conn.execute("INSERT INTO graph_nodes (node_id, session_id, seq, kind, label, ref_id, attrs, "
                 "created_at, data) VALUES ('n1', 's1', 1, 'turn', 'T1', 'm1', '{\"k\":[1]}', "
                 "'2025-01-01T00:00:02Z', '{\"x\":10.5,\"y\":-4.0,\"pinned\":true,\"extra\":\"kept\"}')")
    conn.execute("INSERT INTO graph_nodes (node_id, session_id, seq, kind, label, ref_id, attrs, "
                 "created_at, data) VALUES ('n2', 's1', 2, 'task', 'T2', NULL, '{}', "
                 "'2025-01-01T00:00:03Z', '{\"x\":null,\"y\":null,\"pinned\":false}')")
    conn.close()

    store = SqliteStore(path)
    assert store.migrations() == [name for name, _ in MIGRATIONS]
    assert [m.content for m in store.list_messages("s1")] == ["hello old"]
    assert store.get_session("s1")["title"] == "old session"  # type: ignore[index]
    nodes = store.load_graph("s1").nodes
    assert [(n.node_id, n.x, n.y, n.pinned) for n in nodes] == [
        ("n1", 10.5, -4.0, True), ("n2", None, None, False)]
    assert nodes[0].attrs == {"k": [1]} and nodes[0].model_extra == {"extra": "kept"}
    # The new build writes through the new columns on the migrated database.
    store.set_node_position("n2", 1.0, 2.0)
    assert store.load_graph("s1").nodes[1].pinned is True
    store.close()
    with _raw(path) as conn:
        data = json.loads(conn.execute("SELECT data FROM graph_nodes WHERE node_id='n1'")
                          .fetchone()[0])
        assert data == {"extra": "kept"}


# ---------------------------------------------------------------- append-only and supersede


def test_the_latest_event_of_a_type_is_found_through_an_index(store: SqliteStore) -> None:
    """``last_event`` (the task book's revision, read by a session's first build) reads no more of
    a long log than it returns: without the index it read the session's whole log, newest first."""
    sid = store.create_session("s")
    store.append_event(sid, "task.changed", {"rev": 1})
    for n in range(50):
        store.append_event(sid, "message.added", {"n": n})
    assert store.last_event(sid, "task.changed")["payload"] == {"rev": 1}
    assert store.last_event(sid, "never") is None
    store.close()
    with _raw(store.db_path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM event_log WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
            (sid, "task.changed")))
    assert "event_log_type" in plan and "TEMP B-TREE" not in plan


def test_event_log_rejects_update_and_delete(store: SqliteStore) -> None:
    sid = store.create_session("s")
    seq = store.append_event(sid, "custom", {"a": 1})
    before = store.list_events(sid)
    store.close()
    with _raw(store.db_path) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE event_log SET type = 'x' WHERE seq = ?", (seq,))
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM event_log WHERE seq = ?", (seq,))
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM event_log")
    reopened = SqliteStore(store.db_path)
    assert reopened.list_events(sid) == before
    assert before[-1]["payload"] == {"a": 1} and before[-1]["type"] == "custom"
    reopened.close()


def test_store_has_no_delete_api() -> None:
    verbs = ("delete", "remove", "drop", "purge", "clear", "truncate")
    public = [name for name in dir(SqliteStore) if not name.startswith("_")]
    assert not [name for name in public if name.startswith(verbs)]


def test_supersede_keeps_rows_with_valid_to(store: SqliteStore) -> None:
    sid = store.create_session()
    old = store.add_evidence(sid, _evidence("price is 10"))
    new = store.add_evidence(sid, _evidence("price is 12"))
    superseded = store.supersede_evidence(old.evidence_id, at="2026-03-01T00:00:00Z")
    assert superseded.valid_to == "2026-03-01T00:00:00Z"
    assert [e.evidence_id for e in store.list_evidences(sid)] == [new.evidence_id]
    all_ev = store.list_evidences(sid, include_superseded=True)
    assert [e.evidence_id for e in all_ev] == [old.evidence_id, new.evidence_id]
    assert store.get_evidence(old.evidence_id).content == "price is 10"  # type: ignore[union-attr]
    # Superseding again keeps the first valid_to.
    again = store.supersede_evidence(old.evidence_id, at="2027-01-01T00:00:00Z")
    assert again.valid_to == "2026-03-01T00:00:00Z"
    assert store.count_rows("evidences") == 2

    frag = store.add_memory(sid, MemoryFragment(content="likes tea", keywords=["tea"]))
    store.supersede_memory(frag.fragment_id, at="2026-03-02T00:00:00Z")
    assert store.list_memory(sid) == []
    kept = store.list_memory(sid, include_superseded=True)
    assert [(f.fragment_id, f.valid_to) for f in kept] == [
        (frag.fragment_id, "2026-03-02T00:00:00Z")]
    types = [e["type"] for e in store.list_events(sid)]
    assert types.count("evidence.superseded") == 1 and "memory.superseded" in types
    with pytest.raises(NotFoundError):
        store.supersede_evidence("nope")


# ---------------------------------------------------------------- graph


def test_graph_save_load_identical(store: SqliteStore) -> None:
    sid = store.create_session()
    nodes = [
        GraphNode(kind="turn", label="first ✓", ref_id="t1",
                  attrs={"nested": {"a": [1, 2.5, None]}, "s": "x"}, x=0.1, y=-7.25, pinned=True,
                  created_at="2026-01-01T00:00:00+01:00"),
        GraphNode(kind="memory", label="m", attrs={}, x=None, y=None),
        GraphNode(kind="artifact", label="file", ref_id="f", attrs={"path": "/a b/c"}, x=1e6,
                  y=3.0, pinned=False, custom_extra={"kept": True}),
    ]
    for node in nodes:
        store.save_node(sid, node)
    edges = [GraphEdge(src=nodes[0].node_id, dst=nodes[1].node_id, kind="references",
                       attrs={"w": 0.3}),
             GraphEdge(src=nodes[1].node_id, dst=nodes[2].node_id, kind="derived_from")]
    for edge in edges:
        store.save_edge(sid, edge)
    # Updating a node keeps its place in the insertion order.
    nodes[0] = nodes[0].model_copy(update={"label": "renamed", "attrs": {"k": 1}})
    store.save_node(sid, nodes[0])
    store.set_node_position(nodes[1].node_id, 42.0, 43.5)
    nodes[1] = nodes[1].model_copy(update={"x": 42.0, "y": 43.5, "pinned": True})

    def dumped(items: list) -> str:  # type: ignore[type-arg]
        return json.dumps([i.model_dump(mode="json") for i in items], ensure_ascii=False)

    graph = store.load_graph(sid)
    assert dumped(graph.nodes) == dumped(nodes)
    assert dumped(graph.edges) == dumped(edges)
    store.close()
    reopened = SqliteStore(store.db_path)
    graph = reopened.load_graph(sid)
    assert dumped(graph.nodes) == dumped(nodes) and dumped(graph.edges) == dumped(edges)
    other = reopened.create_session()
    with pytest.raises(StoreError, match="another session"):
        reopened.save_node(other, nodes[0])
    with pytest.raises(sqlite3.IntegrityError):  # edges must join stored nodes
        reopened.save_edge(sid, GraphEdge(src="ghost", dst=nodes[0].node_id, kind="merges"))
    reopened.close()


# ---------------------------------------------------------------- turns and messages


def test_record_user_input_creates_turn_and_message(store: SqliteStore) -> None:
    sid = store.create_session("chat")
    turn_id, message = store.record_user_input(sid, "hello", at="2026-01-01T00:00:00Z")
    assert message.role == Role.USER and message.turn_id == turn_id
    assert message.author is not None and message.author.kind == "user"
    turn = store.get_turn(turn_id)
    assert turn is not None
    assert (turn["session_id"], turn["seq"], turn["input_message_id"], turn["status"]) == (
        sid, 1, message.message_id, "recorded")
    assert turn["answer_message_id"] is None and turn["record"] == {}
    assert store.list_messages(sid) == [message]
    assert store.get_message(message.message_id) == message
    with pytest.raises(NotFoundError):
        store.record_user_input("missing-session", "x")
    with store.transaction(), pytest.raises(StoreError, match="durably"):
        store.record_user_input(sid, "inside a batch")


def test_turn_answer_update_intent_plan(store: SqliteStore) -> None:
    sid = store.create_session()
    turn_id, _ = store.record_user_input(sid, "q1")
    answer = store.set_turn_answer(turn_id, Message(role=Role.ASSISTANT, content="a1"))
    assert answer.turn_id == turn_id
    updated = store.update_turn(turn_id, anchor_node_id="n9", status="answered",
                                record={"intent": {"mode": "ask"}, "blocks": ["b1"]})
    assert updated["answer_message_id"] == answer.message_id
    assert updated["anchor_node_id"] == "n9" and updated["status"] == "answered"
    assert updated["record"] == {"intent": {"mode": "ask"}, "blocks": ["b1"]}
    with pytest.raises(StoreError, match="unknown fields"):
        store.update_turn(turn_id, session_id="other")
    with pytest.raises(NotFoundError):
        store.update_turn("nope", status="x")
    store.save_intent(turn_id, {"mode": "ask", "confidence": {"mode": 0.5}})
    store.save_intent(turn_id, {"mode": "task", "confidence": {"mode": 0.9}})
    store.save_plan(turn_id, {"budget": 1024})
    assert store.get_intent(turn_id) == {"mode": "task", "confidence": {"mode": 0.9}}
    assert store.get_plan(turn_id) == {"budget": 1024}
    assert store.count_rows("intents") == 2  # earlier versions are kept
    t2, _ = store.record_user_input(sid, "q2")
    assert [t["turn_id"] for t in store.list_turns(sid)] == [turn_id, t2]
    assert [m.content for m in store.list_messages(sid)] == ["q1", "a1", "q2"]


def test_records_round_trip_byte_identical(store: SqliteStore) -> None:
    sid = store.create_session()
    task = store.add_task(sid, Task(name="t", depends_on=["x"], parent_task_id="p",
                                    created_at="2026-01-01T00:00:00.5Z", unknown_key=[1]))
    call = store.add_tool_call(sid, ToolCall(tool="grep", args_digest={"q": "é"},
                                             duration_ms=1.25, status="timeout"))
    usage = store.add_model_usage(sid, ModelUsage(model="m", params={"top_p": 0.95},
                                                  first_token_latency_ms=12.0, status="cancelled"))
    env = store.add_env_event(sid, EnvEvent(kind="feed", source="https://f", payload={"n": 1}))
    ev = store.add_evidence(sid, Evidence(type="llm_output", source=EvidenceSource(kind="llm"),
                                          confidence=0.333333333333, metadata={"tags": []}))
    for wrote, read in [(task, store.list_tasks(sid)), (call, store.list_tool_calls(sid)),
                        (usage, store.list_model_usage(sid)), (env, store.list_env_events(sid)),
                        (ev, store.list_evidences(sid))]:
        assert [r.model_dump_json() for r in read] == [wrote.model_dump_json()]
    assert store.get_task(task.task_id).model_extra == {"unknown_key": [1]}  # type: ignore[union-attr]
    done = store.update_task(task.task_id, status=TaskStatus.COMPLETE, result_summary="ok")
    assert store.get_task(task.task_id) == done
    assert done.status == TaskStatus.COMPLETE and done.updated_at != task.updated_at
    with pytest.raises(StoreError):
        store.update_task(task.task_id, task_id="other")


def test_context_blocks_keep_turn_and_order(store: SqliteStore) -> None:
    sid = store.create_session()
    t1, _ = store.record_user_input(sid, "a")
    t2, _ = store.record_user_input(sid, "b")
    first = store.add_context_blocks(sid, t1, [
        ContextBlock(block_type="instruction", priority="must", content="1"),
        ContextBlock(block_type="memory", priority="low", content="2")])
    store.add_context_blocks(sid, t2, [ContextBlock(block_type="plan", priority="high",
                                                    content="3")])
    store.add_context_blocks(sid, t1, [ContextBlock(block_type="state", priority="medium",
                                                    content="4")])
    assert all(b.turn_id == t1 for b in first)
    assert [b.content for b in store.list_context_blocks(sid, t1)] == ["1", "2", "4"]
    assert [b.content for b in store.list_context_blocks(sid, t2)] == ["3"]
    assert [b.content for b in store.list_context_blocks(sid)] == ["1", "2", "3", "4"]


# ---------------------------------------------------------------- transactions, events, threads


def test_transaction_is_atomic_and_nests(store: SqliteStore) -> None:
    sid = store.create_session()
    events_before = len(store.list_events(sid))
    with pytest.raises(RuntimeError), store.transaction():
        store.add_message(sid, Message(role=Role.USER, content="lost"))
        store.add_evidence(sid, _evidence("lost"))
        raise RuntimeError("boom")
    assert store.list_messages(sid) == [] and store.list_evidences(sid) == []
    assert len(store.list_events(sid)) == events_before
    with store.transaction():
        store.add_message(sid, Message(role=Role.USER, content="kept"))
        with pytest.raises(RuntimeError), store.transaction():
            store.add_message(sid, Message(role=Role.USER, content="inner lost"))
            raise RuntimeError("inner")
        store.add_message(sid, Message(role=Role.USER, content="kept too"))
    assert [m.content for m in store.list_messages(sid)] == ["kept", "kept too"]


def test_every_mutation_writes_an_event(store: SqliteStore) -> None:
    populated = populate(store)
    types = [e["type"] for e in store.list_events(populated.session_id)]
    for expected in ("session.created", "session.updated", "message.added", "turn.recorded",
                     "evidence.added", "task.added", "tool_call.added", "model_usage.added",
                     "context_blocks.added", "turn.answered", "graph.node_saved",
                     "graph.edge_saved", "turn.updated", "graph.node_moved",
                     "evidence.superseded", "memory.added", "memory.superseded",
                     "env_event.added", "task.updated"):
        assert expected in types, expected
    assert types.count("turn.recorded") == 3
    seqs = [e["seq"] for e in store.list_events(None)]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    after = store.list_events(populated.session_id, after_seq=seqs[-3])
    assert [e["seq"] for e in after] == seqs[-2:]


def test_calls_from_another_thread_are_refused(store: SqliteStore) -> None:
    sid = store.create_session()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            store.list_messages(sid)
        except BaseException as err:  # noqa: BLE001 - we assert on it below
            errors.append(err)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], StoreThreadError)


def test_connection_opens_lazily_in_first_calling_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "lazy.sqlite3")
    assert not (tmp_path / "lazy.sqlite3").exists()
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(store.create_session("w")))
    worker.start()
    worker.join()
    assert len(result) == 1
    with pytest.raises(StoreThreadError):
        store.list_sessions()


def test_sessions_and_searchable_rows(store: SqliteStore) -> None:
    populated = populate(store)
    other = store.create_session("empty", session_id="fixed-id")
    assert other == "fixed-id"
    with pytest.raises(StoreError, match="already exists"):
        store.create_session("dup", session_id="fixed-id")
    sessions = store.list_sessions()
    assert [s["session_id"] for s in sessions] == [populated.session_id, "fixed-id"]
    assert sessions[0]["message_count"] == 7 and sessions[0]["turn_count"] == 3
    info = store.get_session(populated.session_id)
    assert info is not None and info["meta"].locale == "zh-CN"
    assert info["summary"].content == "so far: renewals"
    assert store.get_session("nope") is None
    rows = store.list_searchable()
    kinds = [r.kind for r in rows]
    assert kinds.count("message") == 7 and kinds.count("env") == 1
    # Only the still-valid memory fragment is searchable.
    assert [r.id for r in rows if r.kind == "memory"] == [populated.fragment_ids[1]]
    assert "keywords: billing, monthly" in next(r.text for r in rows if r.kind == "memory")
