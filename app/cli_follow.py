"""What ``pcm ask`` and ``pcm task resume`` print while a task runs: its plan, the progress of its
steps (stderr) and its result (stdout). Apart from ``app.cli_tasks`` so that ``pcm ask``
(``app.cli_pipeline``) uses it without importing the commands that import the pipeline's.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.core.tasks.report import is_settled, task_lines, task_report

POLL_S = 0.25  # how often a running task's progress is looked at


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def follow(engine: Engine, session_id: str, task_id: str, *, as_json: bool = False,
                 turn: TurnRecord | None = None) -> int:
    """Print a task's steps as they change until it is complete, failed or paused, then its
    result (``as_json``: the task's report with its result, under ``task`` beside the fields of
    ``turn``, the task's turn, when given); exit code 0 only when it completed."""
    seen: dict[str, str] = {}
    while True:
        tasks = await engine.list_tasks(session_id)
        report = task_report(tasks, task_id)
        for step in report["steps"]:
            if seen.get(step["task_id"]) != step["state"]:
                seen[step["task_id"]] = step["state"]
                _err(f"  step {step['step']}/{len(report['steps'])} [{step['state']}] {step['name']}")
        task = next(t for t in tasks if t.task_id == task_id)
        if is_settled(task):
            break
        await asyncio.sleep(POLL_S)
    result = await engine.task_result(session_id, task_id)
    if as_json:
        shown: dict[str, Any] = {**report, "result_text": result}
        if turn is not None:  # pcm ask --json: a turn's record like any other turn's, and its task
            shown = {**turn.model_dump(mode="json"), "task": shown}
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        print(result if task.status.value == "complete" else "\n".join(task_lines(report)))
    _err(f"task {task_id[:8]}: {report['state']}" + (f" ({report['error']})" if report["error"] else ""))
    return 0 if task.status.value == "complete" else 1


async def ask_task(engine: Engine, session_id: str, text: str, *, budget: int | None, as_json: bool) -> int:
    """``pcm ask`` on an input the intent rules read as a task: the task is made and planned
    (its plan printed), its steps run to the end (their progress on stderr), its result printed
    (``as_json``: the planning turn's record, as for any turn, with the task under ``task``)."""
    handle = engine.run_task(session_id, text, budget=budget)
    record = await handle.done
    if handle.task_id is None:
        _err(f"pcm: error: no task was made ({record.finish_reason if record else 'no answer'})")
        return 1
    _err(record.output if record is not None else "")
    return await follow(engine, session_id, handle.task_id, as_json=as_json, turn=record)
