"""``pcm eval streams`` on the scripted agent model: every kind of scenario runs, its checks
hold, and the report has the figures the issue names (the real model: README "Tests")."""

from __future__ import annotations

import json

from app.core.engine.facade import Engine
from app.eval.streams import KINDS, format_streams_eval, run_streams_eval
from tests.conftest import EngineFactory
from tests.engine.agent_model import AgentModel


def test_every_scenario_kind_runs_and_the_report_has_its_figures(make_engine: EngineFactory, tmp_path) -> None:
    async def body(engine: Engine) -> dict:
        from dataclasses import replace
        lab = engine.lab()
        lab.set_background(replace(lab.background(), memory=False))
        return await run_streams_eval(engine, per_kind=2, folder=str(tmp_path))

    report = make_engine.run(body, chat=AgentModel(delay=0.004, words=60), max_streams=2)
    assert [s["kind"] for s in report["scenarios"]] == list(KINDS) * 2
    assert not [s for s in report["scenarios"] if s.get("error")]
    for key in ("scenarios", "pause_tokens_max", "amend_rate", "interrupt_answered_rate", "task_completed_rate"):
        assert key in report
    assert report["pause_tokens_max"] is not None and report["pause_tokens_max"] <= 1
    assert report["interrupt_answered_rate"] == report["task_completed_rate"] == 1.0
    assert report["amend_rate"] == report["resume_completed_rate"] == report["pause_kept_rate"] == 1.0, [
        s for s in report["scenarios"] if s["kind"] == "pause"]
    assert report["file_routed_rate"] == report["file_reached_rate"] == report["file_in_result_rate"] == 1.0
    assert report["parallel_consistent_rate"] == report["replay_exact_rate"] == 1.0, [
        (s["kind"], s["replay"]) for s in report["scenarios"] if s["replay"]]
    json.dumps(report)
    assert "amend_rate: 1.0" in format_streams_eval(report)
