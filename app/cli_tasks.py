"""``pcm task list|show|pause|resume|amend|cancel`` and what ``pcm ask`` does with a task.

A task runs inside the process that started it (``pcm ask``, the window, the MCP server); when
that process ends, its engine pauses the tasks at work, their work so far kept. From here a task
is listed and shown (the store only, no model), paused, amended or cancelled (recorded in the
session), or resumed: ``pcm task resume`` runs it to its end, printing its progress, like
``pcm ask`` does for an input the intent rules read as a task (``app.cli_follow``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli_follow import follow
from app.core.engine.facade import Engine
from app.core.errors import CoreError, NoRecordError
from app.core.tasks.report import roots, task_lines, task_report
from app.core.types import Task


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def match_task(tasks: list[Task], text: str) -> Task:
    """The task (not a step) ``text`` names: ``last`` (the newest), a whole id or a prefix of 4+."""
    tops = roots(tasks)
    if text == "last":
        if not tops:
            raise NoRecordError("there is no task in this session yet")
        return tops[-1]
    found = [t for t in tops if t.task_id.startswith(text)] if len(text) >= 4 else []
    if not found:
        raise NoRecordError(f"no task {text!r} in this session (`pcm task list` shows them)")
    if len(found) > 1:
        raise CoreError(f"{text!r} is the start of several task ids: give more characters")
    return found[0]


def _session(args: argparse.Namespace) -> str:
    from app.cli_pipeline import _stored
    from app.core.engine.ids import resolve_id

    found: str = _stored(args.data_dir, lambda store: resolve_id(store, "session", args.session or "last"))
    return found


def cmd_task(args: argparse.Namespace) -> int:
    """``pcm task ACTION``: list and show read the store; the others run on an engine."""
    from app.cli_pipeline import _stored, _with_engine

    session_id = _session(args)
    if args.action in ("list", "show"):
        tasks: list[Task] = _stored(args.data_dir, lambda store: store.list_tasks(session_id))
        chosen = roots(tasks) if args.action == "list" else [match_task(tasks, args.task or "last")]
        reports = [task_report(tasks, t.task_id) for t in chosen]
        if args.json:
            print(json.dumps({"session_id": session_id, "tasks": reports}, indent=2, ensure_ascii=False))
        else:
            print("\n".join(line for r in reports for line in task_lines(r)) or "No tasks in this session.")
        return 0
    if args.action == "amend" and not (args.text or "").strip():
        _err("pcm: error: amend: say what to add, e.g. pcm task amend last \"add a budget section\"")
        return 2

    async def work(engine: Engine) -> int:
        task = match_task(await engine.list_tasks(session_id), args.task or "last")
        if args.action == "pause":
            steered = await engine.pause_task(session_id, task.task_id)
        elif args.action == "amend":
            steered = await engine.amend_task(session_id, task.task_id, args.text)
        elif args.action == "cancel":
            steered = await engine.cancel_task(session_id, task.task_id)
        else:
            steered = await engine.resume_task(session_id, task.task_id)
            _err(steered.line)
            return await follow(engine, session_id, task.task_id, as_json=args.json)
        print(steered.line)
        return 0

    return _with_engine(args, work)


def cmd_eval_streams(args: argparse.Namespace) -> int:
    """``pcm eval streams``: the resident agent's scripted scenarios on the real model."""
    import tempfile
    from pathlib import Path

    from app.cli_pipeline import _with_engine
    from app.config import Settings
    from app.eval.streams import format_streams_eval, run_streams_eval

    settings = Settings.load(args.data_dir or tempfile.mkdtemp(prefix="pcm-eval-streams-"))
    per_kind = max(1, (args.limit or 40) // 5)

    def write(report: dict[str, Any]) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")

    async def work(engine: Engine) -> int:
        report = await run_streams_eval(engine, per_kind=per_kind, steps=args.steps, progress=_err, partial=write)
        print(format_streams_eval(report))
        write(report)
        return 0

    return _with_engine(args, work, settings=settings)


def add_parser(sub: Any) -> None:
    """Register ``pcm task``."""
    p = sub.add_parser("task", help="tasks: list, show, pause, resume (runs it to its end), amend, cancel")
    p.add_argument("action", choices=["list", "show", "pause", "resume", "amend", "cancel"])
    p.add_argument("task", nargs="?", metavar="ID", help="a task id, its first characters, or 'last' (default)")
    p.add_argument("text", nargs="?", help="amend: what to add to the task's constraints")
    p.add_argument("--session", metavar="ID", help="the session (an id, its first characters or 'last', the default)")
    p.add_argument("--json", action="store_true", help="list / show / resume: print JSON")
    p.set_defaults(func=cmd_task)
