"""``pcm eval streams``: the resident agent on the real model, in scripted scenarios (seed 000 §8.4).

Five kinds of scenario, each in a fresh session of one engine, each over its own task text:

- ``interrupt``: a task, and while a step streams the question "How is the task going?" — is it
  answered (as an interruption) while the task runs, and does the task complete after it?
- ``pause``: a task paused by words ("Wait, pause the task") while a step streams, then resumed
  ("Resume") — how many tokens the model produced after the pause was asked (``task.paused``'s
  ``tokens_after_stop``: at most the one in flight) and how long stopping took; the checkpoint
  kept; does the resumed task complete?
- ``amend``: a task amended by words ("While you're at it, also add a budget section") while a
  step streams — does the final result have the section (checked by rule: the added step's
  heading with text under it, or the section's words in the result)?
- ``file``: a task that names a file, whose file changes while a step streams (an env event with
  the new text) — is the event routed to the task (or its running step), does the change reach
  the task (its events and constraints) and its result (the new figure in the result text)?
- ``parallel``: two tasks at once and a question beside them — both complete, the question is
  answered, and the graph, the task stack and the replay agree.

Every scenario also replays: the task state folded from the event log equals the live one
(``Engine.replay_state``) and every turn's build replays without a difference (``Engine.replay``).
Answers are capped (``max_tokens``) and tasks planned by rules by default (``--steps model`` asks
the model for the plan too), so that the forty scenarios finish in minutes on a loaded machine.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.core.engine.facade import Engine
from app.core.runtime.scheduler import StreamHandle
from app.core.types import EnvEvent, Task, TaskStatus

KINDS = ("interrupt", "pause", "amend", "file", "parallel")
TASKS = (
    "Plan and draft the team offsite agenda with numbered steps",
    "Book the venue, send the invitations and order the food",
    "Write a short project proposal for the new billing system",
    "Research three laptops under 1000 euros and compare them",
    "Prepare the quarterly report for the board",
    "Collect the receipts, sort them by month and file the expense claim",
    "Summarise the customer interviews and list the top complaints",
    "Review the contract, note the risks and email the lawyer",
)
SECTIONS = ("budget", "risks", "timeline", "contacts", "costs", "summary", "schedule", "checklist")
FILE_TASKS = ("Update the summary in report.md", "Check the figures in sales.md and write a short note",
              "Draft a memo from plan.md", "Review numbers.md and list what changed",
              "Summarise status.md for the team", "Turn budget.md into three bullet points",
              "Write a short update from metrics.md", "Read notes.md and draft a reply")
QUESTION = "How is the task going?"
TIMEOUT_S = 600.0


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


async def _streaming_step(engine: Engine, sid: str, root_id: str, tokens: int) -> StreamHandle | None:
    """The first stream running a step of ``root_id`` once it produced ``tokens`` (None: none did)."""
    deadline = time.perf_counter() + TIMEOUT_S
    while time.perf_counter() < deadline:
        steps = {t.task_id for t in await engine.list_tasks(sid) if t.parent_task_id == root_id and t.step}
        live = [h for h in engine.scheduler(sid).running() if h.run_task_id in steps and h.tokens >= tokens]
        if live:
            return live[0]
        root = next(t for t in await engine.list_tasks(sid) if t.task_id == root_id)
        if root.status in (TaskStatus.COMPLETE, TaskStatus.FAILED):
            return None
        await asyncio.sleep(0.01)
    return None


async def _start(engine: Engine, text: str) -> tuple[str, str, StreamHandle]:
    state = await engine.open_session(None, title="eval streams")
    handle = engine.run_task(state.session_id, text)
    await handle.done
    assert handle.task_id is not None, "no task was made"
    return state.session_id, handle.task_id, handle


async def _settle(engine: Engine, sid: str, task_id: str) -> Task:
    try:
        return await engine.wait_task(sid, task_id, timeout=TIMEOUT_S)
    except asyncio.TimeoutError:
        return next(t for t in await engine.list_tasks(sid) if t.task_id == task_id)


async def _replays(engine: Engine, sid: str) -> list[str]:
    """What does not replay exactly: the task state, then each turn's build."""
    problems = list(await engine.replay_state(sid))
    for turn_id in await engine.turn_statuses(sid):
        problems += [f"turn {turn_id[:8]}: {d}" for d in await engine.replay(turn_id)]
    return problems


async def _interrupt(engine: Engine, n: int) -> dict[str, Any]:
    sid, root_id, _ = await _start(engine, TASKS[n % len(TASKS)])
    step = await _streaming_step(engine, sid, root_id, 4)
    question = engine.scheduler(sid).submit(QUESTION)
    answer = await question.done
    # the task, not the one step that was streaming: a step may end while the answer is written
    # and the next step goes on (the scripted model's steps are as short as the answer)
    root = next(t for t in await engine.list_tasks(sid) if t.task_id == root_id)
    task_running = step is not None and root.status not in (TaskStatus.COMPLETE, TaskStatus.FAILED)
    answered = question.kind == "interrupt" and bool(answer.output.strip()) and task_running
    done = await _settle(engine, sid, root_id)
    return {"answered_while_running": answered, "interrupt_first_token_ms": question.first_token_ms,
            "completed": done.status == TaskStatus.COMPLETE, "replay": await _replays(engine, sid)}


async def _pause(engine: Engine, n: int) -> dict[str, Any]:
    sid, root_id, _ = await _start(engine, TASKS[n % len(TASKS)])
    step = await _streaming_step(engine, sid, root_id, 4)
    control = engine.scheduler(sid).submit("Wait, pause the task")
    await control.done
    paused = await _settle(engine, sid, root_id)
    stops: list[dict[str, Any]] = []
    for _ in range(3000):  # the stopped stream keeps its work as it ends
        stops = [e["payload"] for e in await engine.records().events(sid, "task.paused")]
        if stops or step is None:
            break
        await asyncio.sleep(0.01)
    kept = [s for s in await engine.list_tasks(sid) if s.parent_task_id == root_id and s.checkpoint_id]
    resume = engine.scheduler(sid).submit("Resume")
    await resume.done
    for _ in range(1000):  # (the resume is applied beside the control's answer)
        if not next(t for t in await engine.list_tasks(sid) if t.task_id == root_id).paused:
            break
        await asyncio.sleep(0.01)
    done = await _settle(engine, sid, root_id)
    return {"paused": paused.paused and control.kind == "interrupt", "streaming_when_paused": step is not None,
            "tokens_after_stop": [s["tokens_after_stop"] for s in stops if s["tokens_after_stop"] is not None],
            "stop_ms": [s["stop_ms"] for s in stops if s["stop_ms"] is not None],
            "checkpoint_kept": bool(kept), "completed": done.status == TaskStatus.COMPLETE,
            "replay": await _replays(engine, sid)}


def _has_section(result: str, section: str) -> bool:
    """The amendment's section is in the result: the added step's heading with text under it,
    or a line that names the section."""
    heading = re.search(rf"^\d+\. Add an? {section} section\n(.+)", result, re.MULTILINE | re.IGNORECASE)
    return heading is not None and bool(heading.group(1).strip()) or bool(
        re.search(rf"\b{section}\b", result.split("\n", 1)[-1], re.IGNORECASE))


async def _amend(engine: Engine, n: int) -> dict[str, Any]:
    section = SECTIONS[n % len(SECTIONS)]
    sid, root_id, _ = await _start(engine, TASKS[n % len(TASKS)])
    await _streaming_step(engine, sid, root_id, 4)
    amend = engine.scheduler(sid).submit(f"While you're at it, also add a {section} section")
    answer = await amend.done
    done = await _settle(engine, sid, root_id)
    result = await engine.task_result(sid, root_id)
    return {"section": section, "acknowledged": section in answer.output, "constraints": done.constraints,
            "present": done.status == TaskStatus.COMPLETE and _has_section(result, section),
            "completed": done.status == TaskStatus.COMPLETE, "replay": await _replays(engine, sid)}


async def _file(engine: Engine, n: int, folder: str) -> dict[str, Any]:
    text = FILE_TASKS[n % len(FILE_TASKS)]
    name = next(w for w in text.split() if w.endswith(".md"))
    figure = str(120 + 17 * n)
    sid, root_id, _ = await _start(engine, text)
    await _streaming_step(engine, sid, root_id, 4)
    event = EnvEvent(kind="file", source=folder, uri=f"{folder}/{name}", title=name,
                     content=f"Figures updated: the total is now {figure}.",
                     payload={"change": "modified", "path": name, "folder": folder})
    routed = await engine.ingest_env(sid, [event])
    done = await _settle(engine, sid, root_id)
    result = await engine.task_result(sid, root_id)
    tasks = {t.task_id: t for t in await engine.list_tasks(sid)}
    target = tasks.get(routed[0].task_id or "") if routed else None
    # the task or one of its steps (a running step that names the file is the first target)
    return {"routed_to_task": target is not None and root_id in (target.task_id, target.parent_task_id),
            "reached_task": event.event_id in done.events,
            "amended": any(c.startswith(f"{name} changed") for c in done.constraints),
            "in_result": figure in result, "completed": done.status == TaskStatus.COMPLETE,
            "replay": await _replays(engine, sid)}


async def _parallel(engine: Engine, n: int) -> dict[str, Any]:
    state = await engine.open_session(None, title="eval streams parallel")
    sid = state.session_id
    first = engine.run_task(sid, TASKS[n % len(TASKS)])
    second = engine.run_task(sid, TASKS[(n + 3) % len(TASKS)])
    await asyncio.gather(first.done, second.done)
    question = engine.scheduler(sid).submit("What is the capital of France?")
    answer = await question.done
    ids = [h.task_id for h in (first, second) if h.task_id]
    done = [await _settle(engine, sid, t) for t in ids]
    tasks = await engine.list_tasks(sid)
    stack_ok = all(t.status in (TaskStatus.COMPLETE, TaskStatus.FAILED) for t in tasks)
    graph = await engine.session_state(sid)
    graph_ok = all(t.node_id in graph.graph for t in tasks if t.node_id)
    return {"answered": bool(answer.output.strip()), "completed": len(done) == 2 and all(
        t.status == TaskStatus.COMPLETE for t in done), "stack_ok": stack_ok, "graph_ok": graph_ok,
        "replay": await _replays(engine, sid)}


async def run_streams_eval(engine: Engine, *, per_kind: int = 8, max_tokens: int = 48, steps: str = "rules",
                           folder: str = "/tmp/pcm-eval-streams", progress: Callable[[str], None] | None = None,
                           partial: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run ``per_kind`` scenarios of each kind (module doc); return the report with its figures
    (``partial`` hears the report so far after each scenario: a long run keeps what it measured)."""
    say = progress or (lambda _line: None)
    lab = engine.lab()
    saved_steps, saved_tokens, saved_intent = lab.set_task_steps(steps), lab.set_max_tokens(max_tokens), \
        lab.set_llm_intent("off")
    # Recall waits for every channel (as in the other evaluations): under load a channel past its
    # time limit is skipped live but not in the replay, which would measure the machine's load.
    saved_ablation = lab.set_ablation(("deadlines",))
    scenarios: list[dict[str, Any]] = []
    try:
        for n in range(per_kind):
            for kind in KINDS:
                started = time.perf_counter()
                try:
                    got = await (_file(engine, n, folder) if kind == "file" else
                                 {"interrupt": _interrupt, "pause": _pause, "amend": _amend,
                                  "parallel": _parallel}[kind](engine, n))
                except Exception as exc:  # noqa: BLE001 - a scenario that breaks is a failed scenario
                    got = {"error": f"{type(exc).__name__}: {exc}", "completed": False, "replay": ["not run"]}
                got.update(kind=kind, n=n, seconds=round(time.perf_counter() - started, 1))
                scenarios.append(got)
                if partial is not None:
                    partial({"model": engine.model_name, "max_tokens": max_tokens, "steps": steps, "partial": True,
                             **figures(scenarios), "scenarios": scenarios})
                say(f"{kind} {n + 1}/{per_kind}: " + ("ok" if got.get("completed") else "not completed"))
    finally:
        lab.set_task_steps(saved_steps)
        lab.set_max_tokens(saved_tokens)
        lab.set_llm_intent(saved_intent)
        lab.set_ablation(saved_ablation)
    return {"model": engine.model_name, "max_tokens": max_tokens, "steps": steps, **figures(scenarios),
            "scenarios": scenarios}


def _rate(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return round(sum(1 for r in rows if r.get(key)) / len(rows), 3) if rows else None


def figures(scenarios: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report's figures from its scenarios."""
    of = {k: [s for s in scenarios if s["kind"] == k] for k in KINDS}
    tokens = [t for s in of["pause"] for t in s.get("tokens_after_stop", [])]
    stop_ms = [t for s in of["pause"] for t in s.get("stop_ms", [])]
    after = [s for s in scenarios if s["kind"] in ("interrupt", "pause", "amend", "file")]
    parallel = of["parallel"]
    return {
        "scenario_count": len(scenarios),
        "interrupt_answered_rate": _rate(of["interrupt"], "answered_while_running"),
        "task_completed_rate": _rate(after, "completed"),
        "pause_tokens_max": max(tokens) if tokens else None,
        "pause_tokens_p50": _pct(tokens, 0.5) if tokens else None,
        "pause_tokens_p95": _pct(tokens, 0.95) if tokens else None,
        "pause_ms_p50": round(statistics.median(stop_ms), 1) if stop_ms else None,
        "pause_ms_p95": round(_pct(stop_ms, 0.95), 1) if stop_ms else None,
        "pause_kept_rate": _rate(of["pause"], "checkpoint_kept"),
        "resume_completed_rate": _rate(of["pause"], "completed"),
        "amend_rate": _rate(of["amend"], "present"),
        "file_routed_rate": _rate(of["file"], "routed_to_task"),
        "file_reached_rate": _rate(of["file"], "amended"),
        "file_in_result_rate": _rate(of["file"], "in_result"),
        "parallel_consistent_rate": round(sum(1 for s in parallel if s.get("completed") and s.get("stack_ok")
                                              and s.get("graph_ok") and not s.get("replay")) / len(parallel), 3)
        if parallel else None,
        "replay_exact_rate": round(sum(1 for s in scenarios if not s.get("replay")) / len(scenarios), 3)
        if scenarios else None,
    }


def format_streams_eval(report: dict[str, Any]) -> str:
    """The figures as a few lines."""
    keys = [k for k in report if k not in ("scenarios", "model", "max_tokens", "steps")]
    head = f"eval streams on {report['model']} ({report['scenario_count']} scenarios, answers up to " \
           f"{report['max_tokens']} tokens, steps by {report['steps']})"
    return "\n".join([head, *(f"  {k}: {report[k]}" for k in keys if k != "scenario_count")])
