"""``pcm eval report``'s parts over real SQLite + LanceDB with the scripted fakes: every strategy's
PRED files on a tiny dialogue folder, a tiny stream and the generated conflict set, the answers
from a scripted model, the summary and the page — regenerated from the PRED files alone, byte for
byte."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.engine.facade import Engine
from app.eval.answers import AnswerCache
from app.eval.report_html import write_report
from app.eval.report_run import ReportPlan, run_all
from app.eval.strategies import ABLATIONS, STRATEGIES
from app.llm.fakes import ScriptedChatModel
from tests.conftest import EngineFactory
from tests.eval.test_answers_eval import _dataset
from tests.eval.test_purity_eval import _write as _stream

pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (pip install -e .[report])")


def _run(make_engine: EngineFactory, tmp_path: Path, plan: ReportPlan) -> tuple[Path, dict[str, Any]]:
    dialogue, stream = _dataset(tmp_path / "tiny"), tmp_path / "irc"
    _stream(stream)
    out = tmp_path / "out"
    cache = AnswerCache(tmp_path / "cache.jsonl")
    model = ScriptedChatModel(["On 7 May 2023.", "A black and white bowl.", "That is not mentioned."], name="scripted")

    async def make(name: str) -> Engine:
        engine = make_engine(data_dir=tmp_path / "engines" / name)
        await engine.start()
        return engine

    async def main() -> dict[str, Any]:
        return await run_all(out / "pred", [dialogue, stream], plan, make, answerer=lambda: (model, "scripted"),
                             cache=cache, say=lambda _line: None)

    result = asyncio.run(main())
    run = {"commit": "abc123", "dirty": False, "command": "pcm eval report out --data tiny --data irc",
           "regenerate": "pcm eval report out --from-pred", "started": "s", "finished": "f", "machine": "m",
           "datasets": [{"name": "tiny", "kind": "dialogue", "path": str(dialogue)},
                        {"name": "irc", "kind": "stream", "path": str(stream)}], **result}
    (out / "pred" / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return out, run


def test_every_strategy_is_run_scored_and_the_page_regenerates_exactly(make_engine: EngineFactory,
                                                                         tmp_path: Path) -> None:
    plan = ReportPlan(budgets=(128, 256), answer_sample=3, conflicts=3, model="scripted")
    out, run = _run(make_engine, tmp_path, plan)
    pred = out / "pred"
    for name in STRATEGIES:  # every strategy on the dialogue folder and the conflict set
        lines = [json.loads(x) for x in (pred / "tiny" / f"{name}.jsonl").read_text().splitlines()]
        assert {(x["qid"], x["budget"]) for x in lines} == {(q, b) for q in ("c1#0", "c1#1", "c1#2") for b in (128, 256)}
        assert all(x["tokens"] <= x["budget"] and 0.0 <= x["recall"] <= 1.0 for x in lines), name
        assert all({"content", "source_ids"} <= set(b) for x in lines for b in x["blocks"])
        conflicts = [json.loads(x) for x in (pred / "conflicts" / f"{name}.jsonl").read_text().splitlines()]
        assert len(conflicts) == 3 * 2 and all(x["outcome"] in ("exposed", "unordered", "current", "stale", "neither")
                                               for x in conflicts)
    full = [json.loads(x) for x in (pred / "tiny" / "b1-full.jsonl").read_text().splitlines()]
    assert [x["recall"] for x in full if x["qid"] == "c1#0"] == [0.0, 1.0]  # the whole history fits at 256 only
    answers = [json.loads(x) for x in (pred / "tiny" / "answers" / "pcm.jsonl").read_text().splitlines()]
    assert {(x["qid"], x["budget"]) for x in answers} == {(q, b) for q in ("c1#0", "c1#1", "c1#2") for b in (128, 256)}
    assert not (pred / "tiny" / "answers" / f"{ABLATIONS[0].name}.jsonl").exists(), "ablations answer on request only"
    assert {p.stem for p in (pred / "irc").glob("*.jsonl")} == {"pcm", "no-routing", "b1-full", "b2-last-n", "b3-rag"}
    irc = [json.loads(x) for x in (pred / "irc" / "pcm.jsonl").read_text().splitlines()]
    assert irc and all(x["stream"] == "s" and "build_ms" in x for x in irc)
    assert any("purity" in x for x in irc) and any("thread_recall" in x for x in irc)

    summary = write_report(out)
    page, figures = (out / "index.html").read_bytes(), (out / "summary.json").read_bytes()
    assert b"abc123" in page and b"pcm eval report out --from-pred" in page and page.count(b"data:image/png") >= 4
    tiny = summary["dialogue"]["tiny"]
    assert set(tiny["strategies"]) == set(STRATEGIES) and tiny["answered"] == 3 and tiny["model"] == "scripted"
    assert tiny["vs_pcm"]["recall"]["b1-full"]["128"]["n"] == 2  # the adversarial question aside
    assert tiny["strata"]["category"]["pcm"]["128"]["temporal"]["n"] == 1
    assert {r["mechanism"] for r in summary["ablations"]} == {s.ablate[0] for s in ABLATIONS}
    assert summary["stream"]["irc"]["vs_pcm"]["purity"]["no-routing"]
    assert summary["conflicts"]["items"] == 3

    write_report(out)  # from the PRED files alone: the same bytes
    assert (out / "index.html").read_bytes() == page and (out / "summary.json").read_bytes() == figures
    (out / "index.html").unlink()
    assert main(["eval", "report", str(out), "--from-pred"]) == 0  # the command does the same
    assert (out / "index.html").read_bytes() == page and (out / "summary.json").read_bytes() == figures
    assert main(["eval", "report", str(tmp_path / "nothing"), "--from-pred"]) == 2  # one line, no trace
    assert run["cache"]["misses"] == 4 * 2 * 3 - run["cache"]["hits"]
