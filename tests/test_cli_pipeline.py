"""The pipeline commands of `pcm` on the real models: ask, show, replay, eval recall/route, bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

pytestmark = pytest.mark.model


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_ask_show_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    assert main([*data, "ask", "Remember that the launch is on Friday.", "--budget", "256", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["output"].strip() and record["build"]["context"]["tokens"] <= 256
    session, turn = record["session_id"], record["turn_id"]
    assert main([*data, "ask", "When is the launch?", "--session", session[:8], "--budget", "256"]) == 0
    out, err = capsys.readouterr()
    used = [line for line in err.splitlines() if line.startswith("turn ")]
    assert out.strip() and len(used) == 1 and "continues" in used[0] and " tokens)" in used[0], err
    assert "intent:" not in err and "plan:" not in err and "{" not in err  # one plain line, no budgets dict
    assert main([*data, "show", "turn", "last", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["build"]["anchor_node"] == record["node_id"]  # the follow-up continues the first turn
    assert main([*data, "ask", "When is the launch again?", "--session", "last", "--budget", "256", "-v"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() and "intent: qa" in err and "plan: " in err and "answered by" in err
    assert any(f"continues {node}" in err for node in (record["node_id"], second["node_id"])), err  # same thread
    assert main([*data, "show", "turn", turn]) == 0
    shown = capsys.readouterr().out
    assert "--- context sent ---" in shown and record["output"].strip()[:20] in shown
    assert main([*data, "replay", "turn", turn]) == 0
    assert "reproduced exactly" in capsys.readouterr().out
    assert main([*data, "replay", "turn", "nope"]) == 2


def test_eval_recall_writes_scored_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "set"
    d.mkdir()
    turns = [
        ("Ana", "I adopted a grey cat called Miso last spring."),
        ("Ben", "Nice! I started learning the cello in March."),
        ("Ana", "My sister moved to Porto for a new job."),
        ("Ben", "I ran my first half marathon in Lisbon."),
    ] * 5
    _write_jsonl(d / "messages.jsonl", [
        {"conversation": "c1", "id": f"c1/D1:{i}", "ts": f"2023-05-08T13:{i:02d}:00", "author": a, "text": f"{t} ({i})"}
        for i, (a, t) in enumerate(turns)
    ])
    _write_jsonl(d / "questions.jsonl", [
        {"qid": "c1#0", "conversation": "c1", "question": "What is the name of Ana's cat?", "gold": ["c1/D1:16"], "category": "single-hop", "ts": "2023-06-01T10:00:00"},
        {"qid": "c1#1", "conversation": "c1", "question": "Where did Ben run a half marathon?", "gold": ["c1/D1:19"], "category": "single-hop", "ts": "2023-06-01T10:00:00"},
    ])
    out = tmp_path / "pred.jsonl"
    code = main(["--data-dir", str(tmp_path / "data"), "eval", "recall", str(d), "--budgets", "64,128",
                 "--counter", "words", "--out", str(out)])
    assert code == 0
    report = capsys.readouterr().out
    assert "hybrid_rrf" in report and "pcm " in report
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {(x["qid"], x["budget"]) for x in lines} == {("c1#0", 64), ("c1#0", 128), ("c1#1", 64), ("c1#1", 128)}
    for line in lines:
        assert line["tokens"] <= line["budget"] and line["build_ms"] > 0
        assert all({"block_id", "block_type", "priority", "content", "source_ids"} <= set(b) for b in line["blocks"])
    best = next(x for x in lines if x["qid"] == "c1#0" and x["budget"] == 128)
    assert any("Miso" in b["content"] for b in best["blocks"])


def test_eval_tune_names_a_recall_weight_or_says_which_there_are(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--tune`` is checked before any model loads: a name that is no recall weight, or a pair
    without a number, is one line and exit 2."""
    for name in ("messages.jsonl", "questions.jsonl"):
        (tmp_path / name).write_text("", encoding="utf-8")
    base = ["--data-dir", str(tmp_path / "data"), "eval", "recall", str(tmp_path), "--out", str(tmp_path / "p.jsonl")]
    assert main([*base, "--tune", "time=0.15,vectr=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown recall weight vectr" in err and "sentence_match" in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--tune", "time"]) == 2
    assert "NAME=NUMBER" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path / "data"), "bench", "build", "--turns", "10", "--tune", "speed=1"]) == 2
    assert "unknown recall weight speed" in capsys.readouterr().err
    assert not (tmp_path / "p.jsonl").exists()


def test_eval_route_and_bench_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "irc"
    d.mkdir()
    msgs = [
        {"id": "s:1", "stream": "s", "ts": "2010-01-01T10:00", "author": "ana", "text": "how do I mount a usb drive?", "kind": "message", "scored": True},
        {"id": "s:2", "stream": "s", "ts": "2010-01-01T10:01", "author": "bob", "text": "ana: use the mount command with the device", "kind": "message", "scored": True},
        {"id": "s:3", "stream": "s", "ts": "2010-01-01T10:02", "author": "cy", "text": "anyone tried the new kernel?", "kind": "message", "scored": True},
        {"id": "s:4", "stream": "s", "ts": "2010-01-01T10:03", "author": "ana", "text": "bob: thanks, which device name?", "kind": "message", "scored": True},
    ]
    _write_jsonl(d / "messages.jsonl", msgs)
    _write_jsonl(d / "gold.jsonl", [
        {"id": "s:1", "parent_id": None, "parent_ids": []},
        {"id": "s:2", "parent_id": "s:1", "parent_ids": ["s:1"]},
        {"id": "s:3", "parent_id": None, "parent_ids": []},
        {"id": "s:4", "parent_id": "s:2", "parent_ids": ["s:2"]},
    ])
    out = tmp_path / "route.jsonl"
    assert main(["eval", "route", str(d), "--out", str(out)]) == 0
    assert "thread" in capsys.readouterr().out.lower()
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["s:1", "s:2", "s:3", "s:4"]
    assert main(["--data-dir", str(tmp_path / "b"), "bench", "build", "--turns", "300", "--json",
                 "--tune", "time=0,sentence_match=0"]) == 0
    report = json.loads(capsys.readouterr().out)
    row = report["sizes"]["300"]
    # each question built with the weights too, in the same process: 60 builds and their cost
    tuned = row["tuned"]
    assert tuned["settings"] == {"time": 0.0, "sentence_match": 0.0} and tuned["p95"] >= tuned["p50"] > 0
    assert tuned["build_vs_tuned_p95"] == round(row["build"]["p95"] / tuned["p95"], 2)
    assert row["build"]["p95"] >= row["build"]["p50"] > 0 and row["bare_vector_query"]["p50"] > 0
    # below the ANN threshold every query is flat: the "ANN" query is the same scan, its recall 1
    assert row["path"] == "flat" and row["ann_recall_at_20"] == 1.0 and row["peak_rss_mb"] > 0
    # then a new engine opens the session again: its read-ahead, its first build and the ones after
    again = row["reopened"]
    assert again["open_ms"] > 0 and again["read_ahead_ms"] >= 0 and again["first_build_ms"] > 0
    assert again["next_builds"]["p95"] >= again["next_builds"]["p50"] > 0
    assert main(["--data-dir", str(tmp_path / "i"), "bench", "ingest", "--turns", "200", "--json"]) == 0
    ingest = json.loads(capsys.readouterr().out)["sizes"]["200"]
    assert ingest["ingest_turns_per_s"] > 0 and ingest["bare_embed_texts_per_s"] > 0
    assert ingest["memory"]["memories"] > 0 and ingest["chunk_ms_per_turn"]["p50"] > 0
