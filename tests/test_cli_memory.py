"""``pcm memory list|show|revoke`` and ``pcm topics`` over a real SQLite store (no models load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.core.memory.extract import extract_memories
from app.core.memory.topics import TopicIndex
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
