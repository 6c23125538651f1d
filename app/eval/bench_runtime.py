"""``pcm bench streams``: the multi-stream runtime on the engine as configured (the real model).

The measurements, each in fresh sessions of the same engine:

1. ``parallel``: ``n`` inputs (tasks and questions, alternating) submitted at once to a session
   with ``k`` slots; per stream its path, first token and total time (from submission), the
   peak number of streams holding a slot, and whether the task graph is consistent afterwards
   (final statuses, ``Engine.replay_state`` without differences).
2. ``bare``: the same question with nothing else running, asked in a session whose task just
   finished (so the prompt and the model's cache are like the interruption's) — the baseline
   first token, measured in the same run (shared, noisy machines: compare ratios, DESIGN.md §6).
3. ``interrupt``: the same question asked while a task streams; first token p50/p95 with the
   cut-in (``StreamConfig.cut_in``) and without it (the question waits for the model like any
   other call), and whether the task still ran to completion.
4. ``writer_on`` / ``interrupt_writer_off``: (3) with the cut-in, the background memory writer on
   and off in turn; the ratio of their p95 is what the writer costs an interruption's first token.
5. ``summaries_on`` / ``interrupt_summaries_off``: the same with summaries on — the worst case:
   an update after every answered turn, written by the chat model (a background call the
   interruption stops) — and off, in turn.

A task runs as one stream, as before tasks had steps (``EngineConfig.task_steps`` "off"), so
that an interruption always meets a task's answer streaming; ``pcm eval streams`` measures the
agent's steps, pauses and amendments. The optional LLM intent signal (``EngineConfig.llm_intent``) is off during the run: it asks the
model only when the rules are unsure, which happens for the bare question but not for the same
question while a task runs, and would make the two first tokens incomparable.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from app.core.engine.facade import Engine
from app.core.engine.lab import Background
from app.core.runtime.scheduler import StreamHandle
from app.core.types import TaskStatus

TASKS = (  # no shared content words: a task naming a running one would be taken as about it
    "Write a plan with numbered steps to organise a team offsite in Lisbon",
    "Draft an agenda for the garden club meeting",
    "Write a packing checklist for moving house",
    "Summarize how sourdough bread is baked",
)
QUESTIONS = (
    "What is the capital of France?",
    "How long does bread dough usually rise?",
    "Which vegetables grow well in May?",
    "What is a good name for a grey cat?",
)
INTERRUPTION = "How is the task going?"


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _timing(handle: StreamHandle) -> tuple[float, int]:
    """(build ms, prompt tokens) of a finished stream's turn."""
    record = handle.done.result() if handle.done.done() and not handle.done.exception() else None
    if record is None:
        return float("nan"), 0
    return record.timing.build_ms, int(record.usage.get("prompt_tokens", 0))


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "n": 0}
    return {"p50": round(statistics.median(values), 1), "p95": round(_pct(values, 0.95), 1), "n": len(values)}


async def _wait_tokens(handle: StreamHandle, n: int, timeout_s: float = 120.0) -> None:
    deadline = time.perf_counter() + timeout_s
    while handle.tokens < n and not handle.done.done() and time.perf_counter() < deadline:
        await asyncio.sleep(0.005)


async def _parallel(engine: Engine, k: int, n: int) -> dict[str, Any]:
    state = await engine.open_session(None, title=f"bench streams k={k}")
    sched = engine.scheduler(state.session_id)
    sched.set_limit(k)
    peak = [0]
    sched.stream_started.connect(lambda _h: peak.__setitem__(0, max(peak[0], len(sched.running()))))
    texts = [(TASKS if i % 2 == 0 else QUESTIONS)[(i // 2) % 4] for i in range(n)]
    started = time.perf_counter()
    handles = [sched.submit(text) for text in texts]
    await asyncio.gather(*(h.done for h in handles), return_exceptions=True)
    wall_ms = (time.perf_counter() - started) * 1000
    tasks = await engine.list_tasks(state.session_id)
    differences = await engine.replay_state(state.session_id)
    final = all(t.status in (TaskStatus.COMPLETE, TaskStatus.FAILED) for t in tasks)
    streams = [{"seq": h.seq, "kind": h.kind, "status": h.status, "tokens": h.tokens,
                "first_token_ms": round(h.first_token_ms, 1) if h.first_token_ms is not None else None,
                "total_ms": round(h.total_ms, 1) if h.total_ms is not None else None} for h in handles]
    return {
        "k": k, "n": n, "wall_ms": round(wall_ms, 1), "peak_running": peak[0],
        "completed": sum(1 for h in handles if h.status == "done"), "tasks": len(tasks),
        "tasks_complete": sum(1 for t in tasks if t.status == TaskStatus.COMPLETE),
        "consistent": final and not differences, "differences": differences[:10],
        "first_token_ms": _stats([round(h.first_token_ms, 1) for h in handles if h.first_token_ms is not None]),
        "total_ms": _stats([round(h.total_ms, 1) for h in handles if h.total_ms is not None]),
        "streams": streams,
    }


async def _bare(engine: Engine, runs: int) -> dict[str, Any]:
    latencies, builds, prompts = [], [], []
    for i in range(runs):
        state = await engine.open_session(None, title="bench streams bare")
        sched = engine.scheduler(state.session_id)
        await asyncio.gather(sched.submit(TASKS[i % len(TASKS)]).done, return_exceptions=True)
        handle = sched.submit(INTERRUPTION)
        await asyncio.gather(handle.done, return_exceptions=True)
        if handle.first_token_ms is not None:
            latencies.append(handle.first_token_ms)
        build_ms, prompt = _timing(handle)
        builds.append(build_ms)
        prompts.append(prompt)
    return {"first_token_ms": _stats(latencies), "build_ms": _stats(builds), "prompt_tokens": _stats(prompts)}


async def _on_off(engine: Engine, runs: int, after_tokens: int, switch: Callable[[bool], None]
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Interruptions (cut in) with some background work on and off (``switch``), one of each in
    turn (noise hits both alike); their first tokens."""
    on: list[float] = []
    off: list[float] = []
    for _ in range(runs):
        for enabled, into in ((True, on), (False, off)):
            switch(enabled)
            got = await _interrupt(engine, 1, True, after_tokens)
            into.append(got["first_token_ms"]["p50"])
    return {"first_token_ms": _stats(on)}, {"first_token_ms": _stats(off)}


def _writer_switch(engine: Engine, configured: Background) -> Callable[[bool], None]:
    """On or off: the memory writer (summaries as configured)."""
    def switch(enabled: bool) -> None:
        engine.lab().set_background(replace(configured, memory=enabled))
    return switch


def _summaries_switch(engine: Engine, configured: Background) -> Callable[[bool], None]:
    """On: summaries after every answered turn, asking the chat model (the worst case for an input
    that arrives meanwhile); off: none (the memory writer as configured)."""
    def switch(enabled: bool) -> None:
        engine.lab().set_background(replace(configured, summaries=enabled, summary_every=1 if enabled else 8,
                                            summary_model="auto" if enabled else "off"))
    return switch


async def _interrupt(engine: Engine, runs: int, cut_in: bool, after_tokens: int) -> dict[str, Any]:
    saved = engine.lab().set_cut_in(cut_in)
    latencies: list[float] = []
    interrupts = kept_running = completed = 0
    task_ms: list[float] = []
    builds: list[float] = []
    prompts: list[float] = []
    measured = attempts = 0
    try:
        while measured < runs and attempts < 3 * runs:
            attempts += 1
            state = await engine.open_session(None, title="bench streams interrupt")
            sched = engine.scheduler(state.session_id)
            task = sched.submit(TASKS[attempts % len(TASKS)])
            await _wait_tokens(task, after_tokens)
            if task.done.done() or task.kind != "task":  # answered in fewer tokens, or not a task
                await asyncio.gather(task.done, return_exceptions=True)
                continue
            measured += 1
            question = sched.submit(INTERRUPTION)
            await asyncio.gather(question.done, return_exceptions=True)
            build_ms, prompt = _timing(question)
            builds.append(build_ms)
            prompts.append(prompt)
            interrupts += question.kind == "interrupt"
            kept_running += not task.done.done()
            if question.first_token_ms is not None:
                latencies.append(question.first_token_ms)
            await asyncio.gather(task.done, return_exceptions=True)
            completed += task.status == "done"
            if task.total_ms is not None:
                task_ms.append(task.total_ms)
    finally:
        engine.lab().set_cut_in(saved)
    return {"cut_in": cut_in, "runs": measured, "first_token_ms": _stats(latencies), "build_ms": _stats(builds),
            "prompt_tokens": _stats(prompts), "routed_as_interrupt": interrupts,
            "answered_while_task_ran": kept_running, "tasks_completed": completed, "task_total_ms": _stats(task_ms)}


async def bench_streams(engine: Engine, *, k: int = 4, n: int = 8, runs: int = 5, after_tokens: int = 8,
                        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the three measurements (module doc) and return the report (see ``format_streams_report``)."""
    say = progress or (lambda _line: None)
    assert engine.model_name is not None, "bench streams needs the chat model"
    report: dict[str, Any] = {"model": engine.model_name, "max_tokens": engine.default_generation().max_tokens,
                              "runs": runs}
    lab = engine.lab()
    saved, configured = lab.set_llm_intent("off"), lab.background()
    steps = lab.set_task_steps("off")  # a task is one stream here (its steps: ``pcm eval streams``)
    try:
        await _bare(engine, 1)  # warm-up: first builds pay for opening index files
        say(f"{n} inputs with k={k}")
        report["parallel"] = await _parallel(engine, k, n)
        say("bare first token")
        report["bare"] = await _bare(engine, runs)
        say("interruption with cut-in")
        report["interrupt"] = await _interrupt(engine, runs, True, after_tokens)
        say("interruption queued for the model (no cut-in)")
        report["interrupt_queued"] = await _interrupt(engine, runs, False, after_tokens)
        say("interruption with cut-in, the memory writer on and off in turn")
        report["writer_on"], report["interrupt_writer_off"] = await _on_off(
            engine, runs, after_tokens, _writer_switch(engine, configured))
        lab.set_background(configured)
        say("interruption with cut-in, summaries (by the model, after every turn) on and off in turn")
        report["summaries_on"], report["interrupt_summaries_off"] = await _on_off(
            engine, runs, after_tokens, _summaries_switch(engine, configured))
    finally:
        lab.set_llm_intent(saved)
        lab.set_background(configured)
        lab.set_task_steps(steps)
    base = report["bare"]["first_token_ms"]
    off = report["interrupt_writer_off"]["first_token_ms"]
    report["writer_cost_p95"] = round(report["writer_on"]["first_token_ms"]["p95"] / max(off["p95"], 1e-6), 2)
    summaries_off = report["interrupt_summaries_off"]["first_token_ms"]
    report["summaries_cost_p95"] = round(report["summaries_on"]["first_token_ms"]["p95"] / max(summaries_off["p95"], 1e-6), 2)
    for key in ("interrupt", "interrupt_queued"):
        got = report[key]["first_token_ms"]
        report[key]["ratio_to_bare_p50"] = round(got["p50"] / max(base["p50"], 1e-6), 2)
        report[key]["ratio_to_bare_p95"] = round(got["p95"] / max(base["p95"], 1e-6), 2)
    return report


def format_streams_report(report: dict[str, Any]) -> str:
    """The report as a few lines of text."""
    p = report["parallel"]
    lines = [
        f"streams on {report['model']} (answers up to {report['max_tokens']} tokens), {report['runs']} runs each",
        f"{p['n']} inputs, k={p['k']}: {p['completed']}/{p['n']} done in {p['wall_ms']:.0f} ms, peak {p['peak_running']} "
        f"running, {p['tasks_complete']}/{p['tasks']} tasks complete, graph {'consistent' if p['consistent'] else 'INCONSISTENT'}",
        f"  first token p50 {p['first_token_ms']['p50']} ms p95 {p['first_token_ms']['p95']} ms; "
        f"total p50 {p['total_ms']['p50']} ms p95 {p['total_ms']['p95']} ms",
    ]
    for s in p["streams"]:
        lines.append(f"    #{s['seq']} {s['kind']:<9} {s['status']:<7} first {s['first_token_ms']} ms, "
                     f"total {s['total_ms']} ms, {s['tokens']} tokens")
    b = report["bare"]
    lines.append(f"bare first token (nothing running): p50 {b['first_token_ms']['p50']} ms p95 {b['first_token_ms']['p95']} ms"
                 f" (build p50 {b['build_ms']['p50']} ms, prompt p50 {b['prompt_tokens']['p50']} tokens)")
    for key, name in (("interrupt", "interruption, cut in"), ("interrupt_queued", "interruption, queued")):
        r = report[key]
        lines.append(f"{name}: first token p50 {r['first_token_ms']['p50']} ms p95 {r['first_token_ms']['p95']} ms "
                     f"(x{r['ratio_to_bare_p50']} / x{r['ratio_to_bare_p95']} of bare; build p50 {r['build_ms']['p50']} ms, "
                     f"prompt p50 {r['prompt_tokens']['p50']} tokens); routed as interrupt "
                     f"{r['routed_as_interrupt']}/{r['runs']}, answered while the task ran "
                     f"{r['answered_while_task_ran']}/{r['runs']}, tasks completed {r['tasks_completed']}/{r['runs']}")
    off = report["interrupt_writer_off"]["first_token_ms"]
    on = report["writer_on"]["first_token_ms"]
    lines.append(f"interruption, cut in, memory writer on / off in turn: first token p50 {on['p50']} / {off['p50']} ms, "
                 f"p95 {on['p95']} / {off['p95']} ms; on/off p95 x{report['writer_cost_p95']}")
    off = report["interrupt_summaries_off"]["first_token_ms"]
    on = report["summaries_on"]["first_token_ms"]
    lines.append(f"interruption, cut in, summaries by the model after every turn on / off in turn: first token p50 "
                 f"{on['p50']} / {off['p50']} ms, p95 {on['p95']} / {off['p95']} ms; on/off p95 x{report['summaries_cost_p95']}")
    return "\n".join(lines)
