"""Export/import of the structured context model: byte-identical round trip, strict refusal."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.core.types import ContextDocument, Message, Role
from app.store.exchange import (
    SCHEMA_PATH,
    ExchangeError,
    build_schema,
    export_session,
    import_session,
    load_schema,
    schema_text,
    validate_document,
)
from app.store.sqlite import SqliteStore
from tests.store.helpers import populate

TABLES = ("sessions", "messages", "turns", "evidences", "tasks", "tool_calls", "model_usage",
          "context_blocks", "env_events", "memory_fragments", "graph_nodes", "graph_edges",
          "event_log")


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _counts(store: SqliteStore) -> dict[str, int]:
    return {table: store.count_rows(table) for table in TABLES}


@pytest.fixture
def exported(store: SqliteStore) -> dict[str, Any]:
    populated = populate(store)
    return export_session(store, populated.session_id)


def test_export_import_export_is_byte_identical(tmp_path: Path, store: SqliteStore,
                                                exported: dict[str, Any]) -> None:
    first = _dump(exported)
    assert _dump(export_session(store, exported["session"]["session_id"])) == first  # stable
    second_store = SqliteStore(tmp_path / "second" / "pcm.sqlite3")
    try:
        sid = import_session(second_store, json.loads(first))
        assert sid == exported["session"]["session_id"]
        assert _dump(export_session(second_store, sid)) == first
        # The imported session is usable: turns were rebuilt from the message turn ids.
        turns = second_store.list_turns(sid)
        assert len(turns) == 3 and all(t["answer_message_id"] for t in turns)
        assert second_store.get_session(sid)["title"] == "Résumé: long work ✓"  # type: ignore[index]
    finally:
        second_store.close()


def test_export_content(exported: dict[str, Any]) -> None:
    assert list(exported) == ["schema_version", "meta", "session", "evidences",
                              "context_blocks", "pcm"]
    assert exported["schema_version"] == "1.1"
    session = exported["session"]
    assert [m["role"] for m in session["messages"]] == ["system"] + ["user", "assistant"] * 3
    assert len(exported["evidences"]) == 3
    assert all(key == ev["evidence_id"] for key, ev in exported["evidences"].items())
    first_ev = next(iter(exported["evidences"].values()))
    assert first_ev["valid_to"] == "2026-02-11T00:00:00Z"  # superseded evidence is exported
    assert [m["valid_to"] for m in exported["pcm"]["memory"]] == ["2026-02-12T00:00:00Z", None]
    nodes = exported["pcm"]["graph"]["nodes"]
    assert (nodes[0]["x"], nodes[0]["y"], nodes[0]["pinned"]) == (120.5, -33.25, True)
    assert len(exported["pcm"]["graph"]["edges"]) == 2
    assert len(exported["context_blocks"]) == 6
    assert session["summary"]["message_index_range"] == {"from": 0, "to": 0}
    assert exported["meta"]["actor"]["agent"]["agent_id"] == "agent-001"
    ContextDocument.model_validate(exported)


def test_a_1_0_document_still_imports(exported: dict[str, Any], tmp_path: Path) -> None:
    """Schema 1.1 added memory fields and topics under ``pcm``; a 1.0 document (without them) imports."""
    old = json.loads(json.dumps(exported))
    old["schema_version"] = "1.0"
    old["pcm"].pop("topics")
    for memory in old["pcm"]["memory"]:
        for name in list(memory):
            if name not in ("fragment_id", "content", "keywords", "importance", "source_evidence_ids",
                            "valid_from", "valid_to"):
                memory.pop(name)
    store = SqliteStore(tmp_path / "old.db")
    try:
        sid = import_session(store, old)
        assert [m.content for m in store.list_memory(sid, include_superseded=True)] == \
            [m["content"] for m in old["pcm"]["memory"]]
    finally:
        store.close()


def test_committed_schema_equals_generated_and_validates_export(exported: dict[str, Any]) -> None:
    assert SCHEMA_PATH.is_file(), "run app.store.exchange.write_schema() and commit the file"
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(build_schema())
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]
    Draft202012Validator.check_schema(schema)
    assert list(Draft202012Validator(schema).iter_errors(exported)) == []
    assert "schema_version" in schema["required"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["session"]["messages"][2].__setitem__("role", "robot"),
         "session.messages[2].role: 'robot' is not one of ['system', 'user', 'assistant', 'tool']"),
        (lambda d: d["session"].__setitem__("messages", []), "session.messages: [] should be non-empty"),
        (lambda d: d.pop("schema_version"), "document: 'schema_version' is a required property"),
        (lambda d: d.__setitem__("schema_version", "2.0"), "schema_version: '2.0' is not one of ['1.0', '1.1']"),
        (lambda d: d["session"]["task_state"].pop("todo_list"),
         "session.task_state: 'todo_list' is a required property"),
        (lambda d: d["context_blocks"][1].__setitem__("priority", "urgent"),
         "context_blocks[1].priority: 'urgent' is not one of"),
        (lambda d: d["session"]["messages"][0].__setitem__("content", 5),
         "session.messages[0].content: 5 is not of type 'string'"),
        (lambda d: next(iter(d["evidences"].values())).__setitem__("evidence_id", "other"),
         "does not equal its key"),
        (lambda d: d["session"]["messages"][2]["refs"][0].__setitem__("evidence_id", "ghost"),
         "session.messages[2].refs[0].evidence_id: 'ghost' is not a key of evidences"),
        (lambda d: d["context_blocks"][1]["refs"][0].__setitem__("evidence_id", "ghost"),
         "context_blocks[1].refs[0].evidence_id: 'ghost' is not a key of evidences"),
        (lambda d: d["pcm"]["graph"]["edges"][0].__setitem__("dst", "ghost"),
         "pcm.graph.edges[0].dst: 'ghost' is not a node_id of pcm.graph.nodes"),
        (lambda d: d["session"]["messages"].append(copy.deepcopy(d["session"]["messages"][1])),
         "session.messages[7].message_id: duplicate id"),
        (lambda d: d["context_blocks"][0].pop("block_id"),
         "context_blocks[0]: 'block_id' is a required property"),
        (lambda d: d["session"]["task_state"]["todo_list"].pop("tasks"),
         "session.task_state.todo_list: 'tasks' is a required property"),
        (lambda d: d["session"]["tool_state"]["tool_calls"][0].__setitem__("status", "meh"),
         "session.tool_state.tool_calls[0].status: 'meh' is not one of"),
        (lambda d: d["pcm"]["env_events"][0].__setitem__("kind", 3),
         "pcm.env_events[0].kind: 3 is not one of"),
    ],
    ids=["enum", "no-messages", "no-version", "bad-version", "no-todo", "priority", "type",
         "evidence-key", "message-ref", "block-ref", "edge", "duplicate", "no-block-id",
         "no-tasks", "tool-status", "env-kind"],
)
def test_import_refuses_bad_input_and_writes_nothing(
        tmp_path: Path, exported: dict[str, Any], mutate: Any, expected: str) -> None:
    target = SqliteStore(tmp_path / "target.sqlite3")
    try:
        target.create_session("already there")
        before = _counts(target)
        bad = copy.deepcopy(exported)
        mutate(bad)
        with pytest.raises(ExchangeError) as info:
            import_session(target, bad)
        assert expected in str(info.value)
        assert _counts(target) == before
    finally:
        target.close()


def test_import_refuses_existing_session_and_colliding_records(
        tmp_path: Path, store: SqliteStore, exported: dict[str, Any]) -> None:
    before = _counts(store)
    with pytest.raises(ExchangeError, match="already exists; import never overwrites"):
        import_session(store, exported)
    assert _counts(store) == before
    # Same records under a new session id: refused in the middle, rolled back entirely.
    renamed = copy.deepcopy(exported)
    renamed["session"]["session_id"] = "renamed"
    with pytest.raises(ExchangeError, match="already exists in the store.*nothing was written"):
        import_session(store, renamed)
    assert _counts(store) == before and store.get_session("renamed") is None


def test_import_keeps_unknown_keys_and_round_trips(tmp_path: Path,
                                                   exported: dict[str, Any]) -> None:
    doc = copy.deepcopy(exported)
    doc["x_vendor"] = {"a": 1}
    doc["session"]["x_note"] = "kept"
    doc["session"]["messages"][1]["x_lang"] = "en"
    doc["pcm"]["graph"]["x_layout"] = "spring"
    doc["meta"] = None
    target = SqliteStore(tmp_path / "t.sqlite3")
    try:
        sid = import_session(target, doc)
        again = export_session(target, sid)
        assert again["x_vendor"] == {"a": 1} and again["session"]["x_note"] == "kept"
        assert again["session"]["messages"][1]["x_lang"] == "en"
        assert again["pcm"]["graph"]["x_layout"] == "spring"
        third = SqliteStore(tmp_path / "u.sqlite3")
        try:
            import_session(third, json.loads(_dump(again)))
            assert _dump(export_session(third, sid)) == _dump(again)
        finally:
            third.close()
    finally:
        target.close()


def test_export_of_empty_session_is_refused(store: SqliteStore) -> None:
    sid = store.create_session("nothing yet")
    with pytest.raises(ExchangeError, match=f"session {sid} has no messages; nothing to export"):
        export_session(store, sid)
    with pytest.raises(ExchangeError, match="no session"):
        export_session(store, "missing")


def test_export_refuses_dangling_refs_it_could_not_import(store: SqliteStore) -> None:
    sid = store.create_session()
    store.add_message(sid, Message(role=Role.USER, content="see",
                                   refs=[{"evidence_id": "never-stored"}]))  # type: ignore[list-item]
    with pytest.raises(ExchangeError, match=r"cannot be exported: session\.messages\[0\]\.refs"):
        export_session(store, sid)


def test_validate_document_rejects_non_objects() -> None:
    with pytest.raises(ExchangeError, match="expected a JSON object"):
        validate_document([1, 2])
