"""``pcm eval purity`` on a generated two-conversation stream (real SQLite + LanceDB, fakes)."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.engine.facade import Engine
from app.core.pipeline.summary_items import carried_ids
from app.core.types import BlockType, ContextBlock, Priority, Ref, SummaryCovers, SummaryRecord
from app.eval.data import StreamMessage
from app.eval.purity import format_purity_report, run_purity_eval, score_contexts
from tests.conftest import EngineFactory

#: Two conversations interleaved: ana and bob on a printer, cid and dee on a wifi card.
LINES = [
    ("bob", "morning all"),
    ("dee", "hi there"),
    ("ana", "bob: my printer prints blank pages since the upgrade"),
    ("cid", "dee: the wifi card drops the connection every hour"),
    ("bob", "ana: did you reinstall the printer driver after the upgrade?"),
    ("dee", "cid: which wifi chipset is it, check lspci"),
    ("ana", "bob: yes, the printer driver is new and the pages are still blank"),
    ("cid", "dee: lspci says the wifi chipset is an intel 7260"),
    ("bob", "ana: then clean the printer heads from the printer settings page"),
    ("dee", "cid: the intel 7260 wifi needs power saving off, set it in the module options"),
]


def _write(folder: Path) -> None:
    folder.mkdir()
    parents = {0: None, 1: None, 2: 0, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 6, 9: 7}
    with (folder / "messages.jsonl").open("w") as out, (folder / "gold.jsonl").open("w") as gold:
        for i, (author, text) in enumerate(LINES):
            out.write(json.dumps({"id": f"s:{i}", "stream": "s", "ts": f"2020-01-01T10:{i:02d}", "author": author,
                                  "text": text, "kind": "message", "scored": i >= 4}) + "\n")
            parent = parents[i]
            gold.write(json.dumps({"id": f"s:{i}", "parent_id": None if parent is None else f"s:{parent}",
                                   "parent_ids": [] if parent is None else [f"s:{parent}"]}) + "\n")


def test_score_contexts_counts_own_and_leaked_words() -> None:
    msgs = [StreamMessage(f"m{i}", "s", "t", "a", text) for i, text in enumerate(["one two", "three", "four five"])]
    gold = {"m0": [], "m1": [], "m2": ["m0"]}
    result = score_contexts(msgs, gold, {("m2", 100): ["m0", "m1"]})[100]
    # own: "a: one two" (3 words); leaked: "a: three" (2 words)
    assert result["purity"] == 3 / 5 and result["leak_words"] == 2 and result["thread_recall"] == 1.0


def test_a_summary_line_carries_the_turns_it_covers() -> None:
    ids = [f"m{i}" for i in range(6)]
    summary = SummaryRecord(subject="branch", subject_id="root", level="brief", content="...",
                            covers=SummaryCovers(first=0, last=5, ids=ids),
                            parts=[{"first": 0, "last": 2, "first_id": "m0", "last_id": "m2"},
                                   {"first": 3, "last": 5, "first_id": "m3", "last_id": "m5"}])
    offer = {"root": "root", "levels": {"brief": summary.model_dump(mode="json")}}  # as BuildRecord.summaries
    block = ContextBlock(block_id="b", block_type=BlockType.SUMMARY, content="(turns 3-5) ...", priority=Priority.LOW,
                         refs=[Ref(evidence_id=summary.summary_id, selector="turns:3-5"), Ref(evidence_id="m9")])
    assert carried_ids(offer, block) == ["m3", "m4", "m5", "m9"]  # its words count where they came from


def test_purity_eval_routes_builds_and_scores_against_baselines(make_engine: EngineFactory, tmp_path: Path) -> None:
    data = tmp_path / "stream"
    _write(data)
    out = tmp_path / "pred.jsonl"

    async def body(engine: Engine) -> dict:
        return await run_purity_eval(engine, data, [64, 256], out)

    report = make_engine.run(body)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6 * 2 and {line["budget"] for line in lines} == {64, 256}
    assert set(lines[0]) == {"id", "budget", "tokens", "build_ms", "blocks"}
    assert all(set(b) == {"block_type", "source_ids", "content"} for line in lines for b in line["blocks"])
    assert all(line["tokens"] <= line["budget"] for line in lines)
    methods = report["methods"]
    assert set(methods) == {"pcm", "recent", "last_n", "bm25", "vector"}
    for budget in ("64", "256"):
        assert methods["pcm"][budget]["purity"] > methods["recent"][budget]["purity"]
        assert methods["pcm"][budget]["leak_words"] < methods["recent"][budget]["leak_words"]
    assert "purity" in format_purity_report(report)
