"""``pcm bench mcp``: get_relevant_snippets through a real ``pcm mcp`` process and the official
MCP client (client to client: request, search, response), next to ``pcm bench build`` on the same
data folder in the same run.

One throw-away folder gets a synthetic history of ``turns`` turns (``app.eval.bench``) and its
build benchmark; then the engine closes, ``pcm mcp`` is started over stdio on that folder and the
same questions are asked through it.

``bench_cold_start`` (part of ``pcm bench startup``) times what a client waits for when it starts
``pcm mcp``: a new process each run, to ``initialize`` answered and to its first
get_relevant_snippets answered (the tools wait for the engine, which loads meanwhile)."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import Settings


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2), "n": len(ordered)}


def _server(data: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PCM_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    return StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env)


def _failed(result: Any) -> str | None:
    from mcp.types import TextContent

    return " ".join(c.text for c in result.content if isinstance(c, TextContent)) if result.is_error else None


async def _through_mcp(data: Path, queries: list[str], max_tokens: int) -> list[float]:
    from mcp import Client

    times: list[float] = []
    async with Client(_server(data), read_timeout_seconds=300) as client:
        for q in queries[:3]:  # warm-up: the first queries open the index files
            await client.call_tool("get_relevant_snippets", {"query": q, "maxTokens": max_tokens})
        for q in queries:
            started = time.perf_counter()
            result = await client.call_tool("get_relevant_snippets", {"query": q, "maxTokens": max_tokens})
            times.append((time.perf_counter() - started) * 1000)
            said = _failed(result)
            if said is not None:
                raise RuntimeError(f"get_relevant_snippets failed: {said}")
    return times


COLD_QUERY = "What did we decide about the database?"


async def _cold_start(data: Path) -> tuple[float, float]:
    """Seconds from starting ``pcm mcp`` on ``data`` to ``initialize`` answered, and to the first
    get_relevant_snippets answered."""
    from mcp import Client

    started = time.perf_counter()
    async with Client(_server(data), read_timeout_seconds=300) as client:
        greeted = time.perf_counter() - started
        result = await client.call_tool("get_relevant_snippets", {"query": COLD_QUERY, "maxTokens": 300})
        answered = time.perf_counter() - started
    said = _failed(result)
    if said is not None:
        raise RuntimeError(f"get_relevant_snippets failed: {said}")
    return greeted, answered


def bench_cold_start(runs: int, *, say: Callable[[str], None] = lambda _l: None) -> dict[str, Any]:
    """``pcm mcp`` started ``runs + 1`` times on one throw-away data folder, a new process each; the
    first start (it creates the store and the index) is reported apart."""
    with tempfile.TemporaryDirectory(prefix="pcm-bench-mcp-start-") as tmp:
        data = Path(tmp) / "data"
        first = asyncio.run(_cold_start(data))
        say(f"pcm mcp: first start: initialize {first[0]:.2f} s, first call {first[1]:.2f} s")
        rows: list[tuple[float, float]] = []
        for n in range(max(1, runs)):
            rows.append(asyncio.run(_cold_start(data)))
            say(f"pcm mcp: start {n + 1}/{runs}: initialize {rows[-1][0]:.2f} s, first call {rows[-1][1]:.2f} s")
    return {"runs": len(rows), "first": {"initialize_s": round(first[0], 2), "first_call_s": round(first[1], 2)},
            "initialize_s": _stats([a for a, _ in rows]), "first_call_s": _stats([b for _, b in rows])}


def format_cold_start(r: dict[str, Any]) -> str:
    i, c, f = r["initialize_s"], r["first_call_s"], r["first"]
    return "\n".join([
        f"pcm mcp over {r['runs']} starts (stdio, a new process each, the official client)",
        f"  to initialize answered          median {i['p50']:.2f} s   p95 {i['p95']:.2f} s",
        f"  to the first tool call answered median {c['p50']:.2f} s   p95 {c['p95']:.2f} s",
        f"  first start on a fresh folder: initialize {f['initialize_s']:.2f} s, first call {f['first_call_s']:.2f} s",
    ])


def bench_mcp(turns: int, *, budget: int = 1024, say: Callable[[str], None] = lambda _l: None) -> dict[str, Any]:
    from app import main as wiring
    from app.eval.bench import bench_build, questions

    with tempfile.TemporaryDirectory(prefix="pcm-bench-mcp-") as tmp:
        data = Path(tmp) / "data"
        settings = Settings.load(data)
        engine = wiring.build_engine(settings, chat=False, counter="words")

        async def build() -> dict[str, Any]:
            try:
                await engine.start()
                return await bench_build(engine, [turns], budget=budget, progress=say)
            finally:
                await engine.close()

        built = asyncio.run(build())["sizes"][str(turns)]
        say(f"{turns} turns: asking through pcm mcp")
        mcp_ms = asyncio.run(_through_mcp(data, questions(60), budget))
    mcp = _stats(mcp_ms)
    return {"turns": turns, "budget_tokens": budget, "mcp_get_relevant_snippets_ms": mcp,
            "build_ms": built["build"], "bare_vector_query_ms": built["bare_vector_query"],
            "ratio_to_build_p50": round(mcp["p50"] / max(built["build"]["p50"], 1e-6), 2),
            "ratio_to_build_p95": round(mcp["p95"] / max(built["build"]["p95"], 1e-6), 2)}


def format_report(r: dict[str, Any]) -> str:
    m, b, v = r["mcp_get_relevant_snippets_ms"], r["build_ms"], r["bare_vector_query_ms"]
    return "\n".join([
        f"{r['turns']} stored turns, {r['budget_tokens']} tokens (the same folder, the same run)",
        f"  MCP get_relevant_snippets, client to client   p50 {m['p50']} ms   p95 {m['p95']} ms   (n={m['n']})",
        f"  engine build (pcm bench build)                 p50 {b['p50']} ms   p95 {b['p95']} ms",
        f"  bare vector query                              p50 {v['p50']} ms   p95 {v['p95']} ms",
        f"  MCP / build: p50 {r['ratio_to_build_p50']}×, p95 {r['ratio_to_build_p95']}×",
    ])
