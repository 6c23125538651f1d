"""``pcm eval summaries`` on a tiny dataset written in tmp (extractive path, real SQLite + LanceDB)."""

from __future__ import annotations

import json
from pathlib import Path

from app.core.engine.facade import Engine
from app.eval.summaries import format_summary_report, run_summary_eval, write_json
from tests.conftest import EngineFactory


def _dataset(folder: Path) -> Path:
    folder.mkdir()
    lines = []
    for n in range(30):
        who = "Ana" if n % 2 == 0 else "Bo"
        day = 1 + n // 10  # three sittings a day apart: three parts
        text = (f"On day {day} {who} moved the build script to tools/build_{n}.sh and met Carla in Porto. "
                f"It was sunny and nice." if n % 3 == 0 else f"Sounds good, {'Bo' if who == 'Ana' else 'Ana'}!")
        lines.append({"conversation": "c1", "id": f"c1/D{day}:{n}", "ts": f"2024-05-0{day}T10:00:{n:02d}Z",
                      "author": who, "text": text})
    (folder / "messages.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    questions = [{"qid": "q1", "conversation": "c1", "question": "Where did Ana meet Carla?", "gold": ["c1/D1:0"],
                  "category": "single-hop"},
                 {"qid": "q2", "conversation": "c1", "question": "Did Bo fly to Mars?", "gold": [],
                  "category": "adversarial"}]
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8")
    return folder


def test_the_summary_eval_reports_each_level_and_the_cache_on_a_replay(make_engine: EngineFactory,
                                                                        tmp_path: Path) -> None:
    data = _dataset(tmp_path / "tiny")

    async def body(engine: Engine) -> dict:
        return await run_summary_eval(engine, data)

    report = make_engine.run(body)
    levels = report["levels"]
    assert set(levels) == {"brief", "standard", "detailed"}
    retention = [levels[level]["identifier_retention"] for level in ("brief", "standard", "detailed")]
    assert retention[0] < retention[1] <= retention[2] and retention[2] >= 0.8
    ratio = [levels[level]["compression_ratio"] for level in ("brief", "standard", "detailed")]
    assert 0 < ratio[0] < ratio[1] <= ratio[2] < 1
    assert report["questions_counted"] == 1  # the adversarial question is left out
    assert levels["detailed"]["gold_coverage"] == 1.0  # "Carla" is named by the part holding the gold turn
    assert report["cache_hit_rate"] == 1.0  # the replay computes nothing again
    assert report["outcomes"] == {"extractive": report["outcomes"]["extractive"]}
    assert "cache hit rate on a replay: 1.000" in format_summary_report(report)
    out = tmp_path / "summaries.json"
    write_json(report, out)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert set(written) == {"levels", "cache_hit_rate"}
    assert set(written["levels"]["brief"]) == {"identifier_retention", "compression_ratio", "gold_coverage",
                                               "gen_ms_p50", "gen_ms_p95"}
