"""``pcm memory list|show|revoke|edit|pin|accept`` and ``pcm topics`` over a real SQLite store (no models
load); ``pcm memory add`` through the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.core.memory.extract import extract_memories
from app.core.memory.topics import TopicIndex
from app.core.types import MemoryFragment
from app.store.sqlite import SqliteStore


def _workspace(data_dir: Path) -> tuple[str, str]:
    store = SqliteStore(data_dir / "pcm.sqlite3")
    try:
        sid = store.create_session("Cluster work")
        memories = extract_memories("Never deploy on Fridays. My city is Porto.", evidence_id="m1",
                                    at="2026-11-01T10:00:00Z")
        store.add_memories(sid, memories)
        index = TopicIndex()
        changes = [index.observe(sid, f"m{n}", text, "2026-11-01T10:00:00Z")
                   for n, text in enumerate(["Scale pods in k8s", "Is Kubernetes worth it?"])]
        for change in changes:
            store.save_topics([*change.topics, *change.updated], change.mentions, change.log)
        fact = next(m for m in memories if m.type == "fact")
    finally:
        store.close()
    return sid, fact.fragment_id


def test_memory_list_show_revoke_and_topics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sid, fact = _workspace(tmp_path)
    data = ["--data-dir", str(tmp_path)]
    assert main([*data, "memory", "list"]) == 0
    out = capsys.readouterr().out
    assert "prohibition\tworkspace\tvalid" in out and "city is Porto" in out and "Cluster work" in out
    assert main([*data, "memory", "show", fact]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session_id"] == sid and shown["key"] == "city" and shown["source_evidence_ids"] == ["m1"]
    assert main([*data, "memory", "revoke", fact]) == 0
    assert "never recalled again" in capsys.readouterr().out
    assert main([*data, "memory", "list"]) == 0
    assert "city is Porto" not in capsys.readouterr().out  # valid ones only by default ...
    assert main([*data, "memory", "list", "--all", "--json"]) == 0
    rows = {r["fragment_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[fact]["state"] == "revoked" and rows[fact]["revoked_at"]  # ... kept, never deleted
    assert main([*data, "topics"]) == 0
    out = capsys.readouterr().out
    assert "Kubernetes\t2 messages\tk8s (first seen), Kubernetes (numeronym)" in out
    assert main([*data, "memory", "show", "nope"]) == 2
    assert "no memory 'nope'" in capsys.readouterr().err
    assert main([*data, "memory", "revoke"]) == 2


def test_memory_add_states_profile_statements_for_every_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``pcm memory add`` goes through the engine's memory writer over the store alone (no model
    loads): a statement is written once, a later one that says it again is held, not written again."""
    from app import main as wiring

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("pcm memory add loaded a model")

    monkeypatch.setattr(wiring, "load_chat_model", refuse)
    monkeypatch.setattr(wiring, "load_embedder", refuse)
    sid, _ = _workspace(tmp_path)
    data = ["--data-dir", str(tmp_path)]
    assert main([*data, "memory", "add", "I prefer short answers. You may use sudo.", "--session", sid]) == 0
    out = capsys.readouterr().out
    assert "added" in out and "preference\tshort answers" in out and "permission" in out
    assert main([*data, "memory", "add", "Never use sudo."]) == 0  # the last used session keeps it
    out = capsys.readouterr().out
    assert "prohibition\tuse sudo" in out and "closed" in out and "permission" in out
    assert main([*data, "memory", "add", "I prefer short answers."]) == 0
    assert "already held" in capsys.readouterr().out
    assert main([*data, "memory", "add", "hello there"]) == 1
    assert "no preference, prohibition or permission" in capsys.readouterr().out
    assert main([*data, "memory", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    profile = {r["content"]: r for r in rows if r["scope"] == "workspace" and r["session_id"] == sid}
    assert profile["short answers"]["type"] == "preference" and profile["use sudo"]["type"] == "prohibition"
    assert main([*data, "memory", "add"]) == 2


def test_memory_edit_pin_and_accept_are_decided_on_the_stored_memory(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Store-only actions: an edit is a new memory replacing the old (refused once it was revoked
    or edited meanwhile: decided on the row as stored, never on a copy); pin and unpin; ``accept``
    makes an imported prohibition the user's own statement (a memory said in no session), which
    closes the permission it contradicts."""
    sid, fact = _workspace(tmp_path)
    data = ["--data-dir", str(tmp_path)]
    store = SqliteStore(tmp_path / "pcm.sqlite3")
    try:
        allowed = extract_memories("You may use sudo.", evidence_id="m2", at="2026-11-01T10:00:00Z")[0]
        store.add_memories(sid, [allowed])
        imported = MemoryFragment(content="use sudo", type="prohibition", scope="workspace").with_origin("imported")
        store.add_memory(sid, imported)
    finally:
        store.close()
    assert main([*data, "memory", "list"]) == 0
    assert f"{imported.fragment_id}\tprohibition\tworkspace\tpending" in capsys.readouterr().out
    assert main([*data, "memory", "edit", fact, "city is Lisbon"]) == 0
    edited_line = capsys.readouterr().out
    assert edited_line.startswith(f"edited {fact}: now mem-") and "city is Lisbon" in edited_line
    assert main([*data, "memory", "edit", fact, "city is Faro"]) == 2  # edited meanwhile: refused, one line
    assert "revoked or edited meanwhile; nothing was changed" in capsys.readouterr().err
    assert main([*data, "memory", "pin", allowed.fragment_id]) == 0 and "pinned" in capsys.readouterr().out
    assert main([*data, "memory", "accept", fact]) == 2
    assert "nothing to accept" in capsys.readouterr().err
    assert main([*data, "memory", "accept", imported.fragment_id]) == 0
    assert "your statement mem-" in capsys.readouterr().out
    assert main([*data, "memory", "list", "--all", "--json"]) == 0
    rows = {r["fragment_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[imported.fragment_id]["state"] == "accepted" and rows[imported.fragment_id]["origin"] == "imported"
    own = rows[rows[imported.fragment_id]["superseded_by"]]
    assert (own["type"], own["content"], own["extractor"], own["origin"], own["source_evidence_ids"]) == (
        "prohibition", "use sudo", "user", "", [])
    assert rows[allowed.fragment_id]["state"] == "closed" and rows[allowed.fragment_id]["pinned"]
    assert main([*data, "memory", "accept", imported.fragment_id]) == 0  # again: says so, writes nothing
    assert "was accepted at" in capsys.readouterr().out
