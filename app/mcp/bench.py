"""``pcm bench mcp``: get_relevant_snippets through a real ``pcm mcp`` process and the official
MCP client (client to client: request, search, response), next to ``pcm bench build`` on the same
data folder in the same run.

One throw-away folder gets a synthetic history of ``turns`` turns (``app.eval.bench``) and its
build benchmark; then the engine closes, ``pcm mcp`` is started over stdio on that folder and the
same questions are asked through it."""

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


async def _through_mcp(data: Path, queries: list[str], max_tokens: int) -> list[float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import TextContent

    env = {**os.environ, "PCM_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    server = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env)
    times: list[float] = []
    async with Client(server, read_timeout_seconds=300) as client:
        for q in queries[:3]:  # warm-up: the first queries open the index files
            await client.call_tool("get_relevant_snippets", {"query": q, "maxTokens": max_tokens})
        for q in queries:
            started = time.perf_counter()
            result = await client.call_tool("get_relevant_snippets", {"query": q, "maxTokens": max_tokens})
            times.append((time.perf_counter() - started) * 1000)
            if result.is_error:
                said = " ".join(c.text for c in result.content if isinstance(c, TextContent))
                raise RuntimeError(f"get_relevant_snippets failed: {said}")
    return times


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
