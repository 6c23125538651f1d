"""``pcm ask`` on a task input and ``pcm task`` on the real models: the task is planned, its steps
run to the end, and it is listed with its steps and their dependencies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

pytestmark = pytest.mark.model


def test_ask_runs_a_task_to_its_end_and_task_lists_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    assert main([*data, "ask", "--new", "Plan and draft the offsite agenda with numbered steps"]) == 0
    out, err = capsys.readouterr()
    assert "Plan for \u201cPlan and draft the offsite agenda" in err and "step 1/" in err
    assert err.rstrip().endswith("complete") and out.strip()  # "task <id>: complete", then its result
    assert main([*data, "task", "list", "--json"]) == 0
    [task] = json.loads(capsys.readouterr().out)["tasks"]
    assert task["state"] == "complete" and 2 <= len(task["steps"]) <= 7
    assert all(s["state"] == "complete" and s["acceptance"] for s in task["steps"])
    assert all(s["depends_on"] for s in task["steps"][1:])
    assert main([*data, "task", "show", task["task_id"][:8]]) == 0
    assert "[complete]" in capsys.readouterr().out
    assert main([*data, "task", "pause", "last"]) != 0  # a complete task has nothing to pause
    assert "complete" in capsys.readouterr().err
