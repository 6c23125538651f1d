"""``pcm eval tools``: how well the plan's tool filter picks the few tools a request needs out of a
few hundred, what the offered list costs next to the full one, and how long the filter takes.

Inputs (``DIR``, default ``resources/eval/tools``): ``registry.json`` — tools as MCP servers list
them (``{"sources": {server: package}, "tools": [{server, name, title, description, input_schema,
read_only, destructive, open_world}]}``), joined by the app's built-in tools — and
``requests.jsonl`` — ``{"text", "needed": [[alternatives…], …], "split"}``: every group must be
offered (any one of its alternatives) for the request to count as served. ``split`` "dev" (the
default) is what the filter's weights were tuned on; "test" requests were written after that
and never tuned on.

Each request runs the engine's own path without I/O: the real embedder embeds every tool's
description once (``description_text``), then per request the query; the intent engine (with its
embedded prototypes) reads the request; ``PlanBuilder`` builds the plan over all tools with the
similarity signals (``similarities``), and its ``tools.allowed`` is the offer. Reported:

- recall of the plan's offer (the plan-set limit: 6/8/10 by confidence band) and recall@k of the
  filter's ranking for fixed k; the same without the similarity signal (words and names only);
- tokens of the offered tool list against the full list (the lines the model would be shown:
  ``name: description`` and the parameters), counted as ceil(1.3 × words);
- filter latency (similarities + scoring + choosing over all tools) p50/p95 in ms, wall clock and
  the thread's own CPU time (on a shared machine the wall clock's tail is time spent descheduled;
  the load average is reported with it), next to a bare embedding top-8 over the same tools
  measured in the same loop, and the whole plan build for comparison. The query
  embedding is timed apart (it is the build's own, shared).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.core.intent.engine import IntentEngine, PrototypeBank
from app.core.plan.builder import PlanBuilder, PlanContext
from app.core.plan.tool_filter import (
    DEFAULT_FILTER,
    choose_tools,
    description_text,
    score_tools,
    similarities,
)
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.ports import Embedder, ServerTool, WordTokenCounter
from app.core.tools.builtin import builtin_tools
from app.core.tools.server import server_spec

KS: tuple[int, ...] = (1, 3, 5, 8, 10)


def load_tools(path: Path) -> tuple[list[ToolSpec], dict[str, dict[str, Any]], dict[str, str]]:
    """The registry file's tools as specs (built-ins first), their input schemas by name, and the sources."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    specs = builtin_specs()
    schemas: dict[str, dict[str, Any]] = {}
    for row in doc["tools"]:
        listed = ServerTool.model_validate(row)
        spec = server_spec(listed)
        specs.append(spec)
        schemas[spec.name] = listed.input_schema
    return specs, schemas, dict(doc.get("sources", {}))


def builtin_specs() -> list[ToolSpec]:
    """The built-in tools' specs (their ports are never called here)."""

    async def nothing(*_args: Any, **_kw: Any) -> list[Any]:
        return []

    return [t.spec for t in builtin_tools(files=lambda: None, search=nothing, feed=nothing, tasks=None)]  # type: ignore[arg-type]


def load_requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def tool_line(spec: ToolSpec, schema: dict[str, Any] | None) -> str:
    """One tool as the model would be shown it: name, description, parameters."""
    props = (schema or {}).get("properties") or {}
    params = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items() if isinstance(v, dict))
    return f"- {spec.name}: {spec.description}" + (f" ({params})" if params else "")


def served(offered: Sequence[str], needed: Sequence[Sequence[str]]) -> bool:
    """Every needed group has one of its alternatives in ``offered``."""
    have = set(offered)
    return all(any(alt in have for alt in group) for group in needed)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def run_tools_eval(embedder: Embedder, folder: Path, *, out: Path | None = None,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every request of ``folder`` through the filter; return the report (module doc)."""
    say = progress or (lambda _line: None)
    specs, schemas, sources = load_tools(folder / "registry.json")
    requests = load_requests(folder / "requests.jsonl")
    say(f"embedding {len(specs)} tool descriptions")
    started = time.perf_counter()
    matrix = np.asarray(embedder.embed([description_text(s) for s in specs]), dtype=np.float32)
    embed_tools_s = time.perf_counter() - started
    intents = IntentEngine(PrototypeBank.from_embed(lambda texts: embedder.embed(texts)))
    planner = PlanBuilder()
    names = [s.name for s in specs]
    by_name = {s.name: s for s in specs}
    counter = WordTokenCounter()
    full_tokens = counter.count("\n".join(tool_line(s, schemas.get(s.name)) for s in specs))
    rows: list[dict[str, Any]] = []
    timings: dict[str, list[float]] = {"query_embed_ms": [], "filter_ms": [], "filter_cpu_ms": [], "plan_ms": [],
                                       "bare_top8_ms": []}
    for n, req in enumerate(requests):
        t0 = time.perf_counter()
        query = embedder.embed([req["text"]])[0]
        t1 = time.perf_counter()
        intent = intents.infer(req["text"])
        qv = [float(x) for x in query]
        bare = time.perf_counter()  # the same-run baseline: plain embedding top-8 over every tool
        sims = matrix @ np.asarray(qv, dtype=np.float32)
        np.argpartition(-sims, 8)[:8]
        timings["bare_top8_ms"].append((time.perf_counter() - bare) * 1000)
        t2, cpu = time.perf_counter(), time.thread_time()
        signals = ToolSignals(similarity=similarities(names, matrix, qv))
        ranked = score_tools(specs, intent, signals)
        choose_tools(ranked, by_name, limit=8, refuse=lambda _s: None)
        t3, cpu_ms = time.perf_counter(), (time.thread_time() - cpu) * 1000
        plan = planner.build(intent, PlanContext(tools=specs, tool_signals=signals)).plan
        t4 = time.perf_counter()
        words_only = [s.name for s in score_tools(specs, intent, ToolSignals())]
        offered = list(plan.tools.allowed)
        ranking = [s.name for s in ranked]
        row = {"text": req["text"], "split": req.get("split", "dev"), "needed": req["needed"], "offered": offered, "served": served(offered, req["needed"]),
               "at_k": {k: served(ranking[:k], req["needed"]) for k in KS},
               "words_only_at_8": served(words_only[:8], req["needed"]),
               "mode": intent.mode.value, "band": plan.strategy, "blocked": [b for b in plan.tools.blocked],
               "tokens": counter.count("\n".join(tool_line(by_name[o], schemas.get(o)) for o in offered)),
               "why": plan.tools.why}
        rows.append(row)
        timings["query_embed_ms"].append((t1 - t0) * 1000)
        timings["filter_ms"].append((t3 - t2) * 1000)
        timings["filter_cpu_ms"].append(cpu_ms)
        timings["plan_ms"].append((t4 - t3) * 1000)
        if (n + 1) % 25 == 0:
            say(f"requests: {n + 1}/{len(requests)}")
    if out is not None:
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return _report(rows, timings, full_tokens, len(specs), sources, embed_tools_s)


def _report(rows: list[dict[str, Any]], timings: dict[str, list[float]], full_tokens: int, tools: int,
            sources: dict[str, str], embed_tools_s: float) -> dict[str, Any]:
    n = len(rows) or 1
    offered_tokens = [r["tokens"] for r in rows]
    return {
        "tools": tools, "servers": len(sources), "requests": len(rows),
        "recall_plan": round(sum(r["served"] for r in rows) / n, 4),
        "recall_plan_by_split": {split: round(sum(r["served"] for r in part) / len(part), 4)
                                 for split in sorted({r["split"] for r in rows})
                                 if (part := [r for r in rows if r["split"] == split])},
        "requests_by_split": {split: sum(r["split"] == split for r in rows) for split in sorted({r["split"] for r in rows})},
        "offered_mean": round(sum(len(r["offered"]) for r in rows) / n, 2),
        "recall_at_k": {str(k): round(sum(r["at_k"][k] for r in rows) / n, 4) for k in KS},
        "recall_at_8_words_only": round(sum(r["words_only_at_8"] for r in rows) / n, 4),
        "full_list_tokens": full_tokens,
        "offered_tokens_mean": round(sum(offered_tokens) / n, 1),
        "offered_tokens_max": max(offered_tokens, default=0),
        "offered_share_mean": round(sum(offered_tokens) / n / max(1, full_tokens), 4),
        "offered_share_max": round(max(offered_tokens, default=0) / max(1, full_tokens), 4),
        "timing_ms": {k: {"p50": round(percentile(v, 50), 3), "p95": round(percentile(v, 95), 3)}
                      for k, v in timings.items()},
        "embed_tool_descriptions_s": round(embed_tools_s, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else [],
        "similarity_floor": DEFAULT_FILTER.similarity_floor,
        "missed": [{"text": r["text"], "split": r["split"], "needed": r["needed"], "offered": r["offered"], "mode": r["mode"],
                    "blocked": r["blocked"]} for r in rows if not r["served"]],
        "sources": sources,
    }


def format_tools_report(report: dict[str, Any]) -> str:
    """The report as a few lines of text."""
    t = report["timing_ms"]
    lines = [
        f"tool filter over {report['tools']} tools ({report['servers']} servers + built-ins), "
        f"{report['requests']} requests",
        f"needed tool offered by the plan: {report['recall_plan']:.1%} (mean {report['offered_mean']} tools offered); "
        + ", ".join(f"{split} {v:.1%} of {report['requests_by_split'][split]}"
                    for split, v in report["recall_plan_by_split"].items()),
        "recall@k of the ranking: " + ", ".join(f"@{k} {v:.1%}" for k, v in report["recall_at_k"].items())
        + f"; words and names only @8 {report['recall_at_8_words_only']:.1%}",
        f"offered list tokens: mean {report['offered_tokens_mean']}, max {report['offered_tokens_max']} of the full "
        f"list's {report['full_list_tokens']} ({report['offered_share_mean']:.1%} mean, "
        f"{report['offered_share_max']:.1%} max)",
        f"filter p50 {t['filter_ms']['p50']:.2f} ms, p95 {t['filter_ms']['p95']:.2f} ms (its own CPU time p50 "
        f"{t['filter_cpu_ms']['p50']:.2f} ms, p95 {t['filter_cpu_ms']['p95']:.2f} ms; load average "
        f"{report['load_average'][:1]}; bare embedding top-8 p50 {t['bare_top8_ms']['p50']:.3f} ms); whole plan p50 "
        f"{t['plan_ms']['p50']:.2f} ms, p95 {t['plan_ms']['p95']:.2f} ms; query embedding p50 "
        f"{t['query_embed_ms']['p50']:.1f} ms; tool descriptions embedded once in {report['embed_tool_descriptions_s']} s",
    ]
    for miss in report["missed"]:
        lines.append(f"  missed ({miss['split']}): {miss['text']!r} needs {miss['needed']} ({miss['mode']}); "
                     f"offered {miss['offered'][:6]}")
    return "\n".join(lines)
