"""``pcm bench build`` and ``pcm bench ingest``: context build latency over stored histories of
growing size, and the ingest's pace.

For each size a fresh session is filled with a synthetic, deterministic history (several people
talking about recurring topics), the index's upkeep is run (the ANN index trained when the table
passed its threshold, as the background upkeep would within seconds), then the engine builds
contexts (no generation) for a fixed set of questions. Reported: p50/p95 of the build split by
stage; the bare LanceDB top-k vector query of the same run, flat (exact), on the ANN path and as
the vector channel asks it (the session's vectors held in-process past the ANN threshold; in turn
per query), the ANN path's recall@k against the flat hits, and the build's ratio to the flat
query; the same builds with the memory and topic channels switched off (interleaved, each side
first for every other question, so noise and warmed caches hit both alike); ingest throughput
next to the bare embedder's on the same texts, the memory writer's catch-up behind it, and the
process's peak memory. ``pcm bench ingest`` reports the ingest part alone.
"""

from __future__ import annotations

import random
import resource
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core.engine.facade import Engine
from app.core.types import Author, AuthorKind, Message, Role
from app.store.search_rows import message_row

PEOPLE = ["Ana", "Bruno", "Chen", "Dara", "Emeka", "Farah"]
TOPICS = [
    ("garden", ["tomatoes", "compost", "the greenhouse", "watering", "seedlings"]),
    ("trip", ["the train to Lisbon", "hotel booking", "passport renewal", "museum tickets", "the ferry"]),
    ("code", ["the parser", "a failing test", "the release branch", "the build cache", "the API client"]),
    ("kitchen", ["the sourdough", "a curry recipe", "the new oven", "birthday cake", "meal planning"]),
    ("music", ["guitar lessons", "the choir concert", "a vinyl record", "piano practice", "the playlist"]),
    ("money", ["the tax return", "a savings plan", "the rent increase", "insurance", "the budget sheet"]),
]
VERBS = ["talked about", "finally fixed", "was worried about", "made progress on", "asked about", "postponed"]
QUALIFIERS = ["yesterday", "last week", "this morning", "again", "with a friend", "after work"]


def synthetic_history(n: int, *, seed: int = 7, start: float = 1_700_000_000.0) -> list[Message]:
    """``n`` deterministic turns, 30 s apart, with ids ``h<seed>-<i>``."""
    rng = random.Random(seed)
    out: list[Message] = []
    for i in range(n):
        who = PEOPLE[rng.randrange(len(PEOPLE))]
        topic, things = TOPICS[rng.randrange(len(TOPICS))]
        thing = things[rng.randrange(len(things))]
        text = (f"I {VERBS[rng.randrange(len(VERBS))]} {thing} {QUALIFIERS[rng.randrange(len(QUALIFIERS))]}; "
                f"the {topic} plan needs step {rng.randrange(1, 40)} next.")
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + 30 * i))
        out.append(Message(message_id=f"h{seed}-{i}", role=Role.USER, content=text,
                           author=Author(kind=AuthorKind.USER, id=who), at=at))
    return out


def questions(k: int, *, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        who = PEOPLE[rng.randrange(len(PEOPLE))]
        topic, things = TOPICS[rng.randrange(len(TOPICS))]
        out.append(f"What did {who} say about {things[rng.randrange(len(things))]} and the {topic} plan?")
    return out


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 2), "p95": round(_pct(values, 0.95), 2)}


async def _build_without_memory_topic(engine: Engine, session_id: str, query: str, budget: int) -> float:
    """One build's time (ms) with the memory and topic channels switched off."""
    kept = engine.lab().set_ablation(("memory", "topic"))
    try:
        return (await engine.build(session_id, query, budget=budget))[1].build_ms
    finally:
        engine.lab().set_ablation(kept)


async def _build_tuned(engine: Engine, session_id: str, query: str, budget: int, tuning: Mapping[str, float]) -> float:
    """One build's time (ms) with ``tuning``'s recall weights (``EngineLab.set_tuning``)."""
    kept = engine.lab().set_tuning(tuning)
    try:
        return (await engine.build(session_id, query, budget=budget))[1].build_ms
    finally:
        engine.lab().set_tuning(kept)


def _peak_mb() -> float:
    """The process's peak resident memory so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


async def _embed_rate(engine: Engine, texts: list[str]) -> float:
    """The bare embedder's throughput on ``texts`` (texts/s), on the engine's embed thread."""
    started = time.perf_counter()
    await engine.embed(texts)
    return len(texts) / (time.perf_counter() - started)


async def ingest_history(engine: Engine, session_id: str, history: Sequence[Message], *, chunk: int = 2000,
                         progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Ingest ``history`` in chunks and wait for the memory writer; return the ingest's throughput
    next to the bare embedder's on the same index texts (measured before the ingest and after the
    catch-up of the memory writer and the summaries, averaged: the machine's load drifts, and the
    background work would share the cores), per-chunk p50/p95 (ms per turn), and the memory
    writer's catch-up behind it."""
    n = len(history)
    sample = [message_row(session_id, m).text for m in history[: min(n, 500)]]
    embed_before = await _embed_rate(engine, sample)
    per_turn: list[float] = []
    started = time.perf_counter()
    for lo in range(0, n, chunk):
        t0 = time.perf_counter()
        await engine.ingest(session_id, list(history[lo:lo + chunk]))
        per_turn.append((time.perf_counter() - t0) * 1000 / len(history[lo:lo + chunk]))
        if progress:
            progress(f"{n} turns: ingested {min(n, lo + chunk)}")
    ingest_s = time.perf_counter() - started
    writer = engine.lab().memory_stats()
    writer_before = (writer.pieces, writer.seconds)
    started = time.perf_counter()
    await engine.memory_idle()  # the memory writer reads the history behind the ingest
    writer_wait_s = time.perf_counter() - started
    await engine.session_summaries(session_id)  # and the summaries (this waits for their update)
    embed_rate = (embed_before + await _embed_rate(engine, sample)) / 2
    pieces, writer_s = writer.pieces - writer_before[0], writer.seconds - writer_before[1]
    return {
        "ingest_turns_per_s": round(n / ingest_s, 1), "bare_embed_texts_per_s": round(embed_rate, 1),
        "ingest_vs_embed": round((n / ingest_s) / embed_rate, 2), "chunk_ms_per_turn": _stats(per_turn),
        "memory": {"memories": len(await engine.memories()), "writer_pieces_per_s": round(pieces / writer_s, 1)
                   if writer_s else None, "writer_wait_after_ingest_s": round(writer_wait_s, 2)},
    }


async def _vector_paths(engine: Engine, session_id: str, qvecs: Any, k: int = 20) -> dict[str, Any]:
    """The bare top-``k`` query flat (exact), on the index's ANN path and as the vector channel
    asks it (past the ANN threshold: the session's vectors held in-process), in turn per query;
    the ANN path's recall@k against the exact hits of the same queries."""
    lab = engine.lab()
    flat: list[float] = []
    approx: list[float] = []
    channel: list[float] = []
    paths: list[str] = []
    found = wanted = 0
    for v in qvecs:
        t0 = time.perf_counter()
        exact = await lab.vector_query(v, k, session_id=session_id, exact=True)
        flat.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        hits = await lab.vector_query(v, k, session_id=session_id)
        approx.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        await lab.vector_query(v, k, session_id=session_id, held=True, trace=paths)
        channel.append((time.perf_counter() - t0) * 1000)
        found += len({i for i, _ in hits} & {i for i, _ in exact})
        wanted += len(exact)
    return {"path": lab.vector_path(), "bare_vector_query": _stats(flat), "ann_vector_query": _stats(approx),
            "channel_path": paths[-1] if paths else "", "channel_vector_query": _stats(channel),
            f"ann_recall_at_{k}": round(found / max(wanted, 1), 4)}


async def bench_build(
    engine: Engine,
    sizes: Sequence[int],
    *,
    budget: int = 1024,
    n_questions: int = 60,
    chunk: int = 2000,
    tuning: Mapping[str, float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure build latency per stage at each history size, against the bare vector query. With
    ``tuning`` (``pcm bench build --tune``) each question is also built with those recall weights,
    in the same process, each variant (the preset, no memory or topic channel, the tuning) building
    a question first for an equal share of the questions, so a weight's cost is measured without the
    machine's swings between runs."""
    lab = engine.lab()
    assert lab.can_search(), "bench build needs the embedder and the search index"
    report: dict[str, Any] = {"budget": budget, "counter": engine.counter_name, "sizes": {}}
    qs = questions(n_questions)
    qvecs = await engine.embed(qs)
    assert qvecs is not None
    for n in sizes:
        state = await engine.open_session(None, title=f"bench {n}")
        ingest = await ingest_history(engine, state.session_id, synthetic_history(n, seed=n), chunk=chunk,
                                      progress=progress)
        started = time.perf_counter()
        upkeep = await lab.index_upkeep()  # what the background upkeep does within seconds of the ingest
        upkeep_s = time.perf_counter() - started
        # warm-up: first queries pay for opening index files
        for q in qs[:3]:
            await engine.build(state.session_id, q, budget=budget)
        stages: dict[str, list[float]] = {}
        # Bare queries and builds run in separate loops: LanceDB's own worker threads keep the
        # two cores busy for a moment after a query, which would otherwise land on the next build.
        vector = await _vector_paths(engine, state.session_id, qvecs)
        without: list[float] = []  # the same builds with the memory and topic channels switched off
        tuned: list[float] = []  # and with ``tuning``'s recall weights

        async def preset(q: str) -> None:
            _, timing = await engine.build(state.session_id, q, budget=budget)
            for key, value in timing.model_dump().items():
                if value is not None and key.endswith("_ms") and key not in ("first_token_ms", "answer_ms"):
                    stages.setdefault(key, []).append(value)

        async def no_memory_topic(q: str) -> None:
            without.append(await _build_without_memory_topic(engine, state.session_id, q, budget))

        async def with_tuning(q: str) -> None:
            tuned.append(await _build_tuned(engine, state.session_id, q, budget, tuning or {}))

        variants = [preset, no_memory_topic, *([with_tuning] if tuning else [])]
        for k, q in enumerate(qs):
            # Each variant builds a question first for an equal share of the questions: the first
            # build of a query pays for what the next ones find warm (its embedding, index pages,
            # full-text postings), so a fixed order favours the later ones.
            shift = k % len(variants)
            for build_once in variants[shift:] + variants[:shift]:
                await build_once(q)
        build = _stats(stages["build_ms"])
        bare_stats = vector["bare_vector_query"]
        report["sizes"][str(n)] = {
            "build": build,
            "stages": {k: _stats(v) for k, v in stages.items() if k != "build_ms"},
            **vector,
            "ratio_p50": round(build["p50"] / max(bare_stats["p50"], 1e-6), 1),
            "ratio_p95": round(build["p95"] / max(bare_stats["p95"], 1e-6), 1),
            **{k: v for k, v in ingest.items() if k != "chunk_ms_per_turn"},
            "index_upkeep": {"did": upkeep, "seconds": round(upkeep_s, 1)},
            "without_memory_topic": _stats(without),
            "memory_topic_cost_p95": round(build["p95"] / max(_stats(without)["p95"], 1e-6), 2),
            "peak_rss_mb": _peak_mb(),
        }
        if tuning:
            other = _stats(tuned)
            report["sizes"][str(n)]["tuned"] = {"settings": dict(tuning), **other, **{
                f"build_vs_tuned_{q}": round(build[q] / max(other[q], 1e-6), 2) for q in ("p50", "p95")}}
        if progress:
            progress(f"{n} turns: build p95 {build['p95']} ms")
    return report


async def bench_reopened(engine: Engine, report: dict[str, Any], *, budget: int = 1024, n_builds: int = 6) -> None:
    """The first builds after ``bench_build``'s sessions are opened again by a new engine on the
    same folder (an app start): for each size, how long opening the session takes, then its read
    ahead (``Engine.open_session``), the first build and the builds after it (wall time, as the
    user waits for it). Adds ``reopened`` to each size of ``report``."""
    lab = engine.lab()
    titles = {s.get("title"): s["session_id"] for s in await engine.list_sessions()}
    qs = questions(n_builds, seed=5)  # not the questions the first engine built (its caches are gone anyway)
    for n, row in report["sizes"].items():
        session_id = titles[f"bench {n}"]
        started = time.perf_counter()
        await engine.open_session(session_id)
        opened = time.perf_counter()
        await lab.read_ahead()
        read = time.perf_counter()
        walls = []
        for q in qs:
            t = time.perf_counter()
            await engine.build(session_id, q, budget=budget)
            walls.append((time.perf_counter() - t) * 1000)
        row["reopened"] = {"open_ms": round((opened - started) * 1000, 1), "read_ahead_ms": round((read - opened) * 1000, 1),
                           "first_build_ms": round(walls[0], 1), "next_builds": _stats(walls[1:])}


async def bench_ingest(engine: Engine, sizes: Sequence[int], *, chunk: int = 500,
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``pcm bench ingest``: each size ingested into a fresh session (``ingest_history``), with the
    process's peak memory."""
    report: dict[str, Any] = {"chunk": chunk, "sizes": {}}
    for n in sizes:
        state = await engine.open_session(None, title=f"bench ingest {n}")
        got = await ingest_history(engine, state.session_id, synthetic_history(n, seed=n), chunk=chunk,
                                   progress=progress)
        report["sizes"][str(n)] = {**got, "peak_rss_mb": _peak_mb()}
    return report


def format_ingest_report(report: dict[str, Any]) -> str:
    """The ingest report as a few lines of text."""
    lines = [f"history ingest in chunks of {report['chunk']} turns (store, graph, index; the memory writer behind it)",
             f"{'turns':>8} {'ingest/s':>9} {'embed/s':>8} {'ratio':>6} {'ms/turn p50':>12} {'p95':>6}"
             f" {'writer after s':>15} {'peak MB':>8}"]
    for n, row in report["sizes"].items():
        per = row["chunk_ms_per_turn"]
        lines.append(f"{n:>8} {row['ingest_turns_per_s']:>9.1f} {row['bare_embed_texts_per_s']:>8.1f}"
                     f" {row['ingest_vs_embed']:>6.2f} {per['p50']:>12.2f} {per['p95']:>6.2f}"
                     f" {row['memory']['writer_wait_after_ingest_s']:>15.1f} {row['peak_rss_mb']:>8.0f}")
    return "\n".join(lines)


def format_bench_report(report: dict[str, Any]) -> str:
    """The build report as a few lines of text."""
    lines = [
        f"context build (everything but generation, query embedding included), budget {report['budget']}, counter {report['counter']}",
        f"{'turns':>8} {'build p50':>10} {'p95':>8} {'flat p50':>9} {'p95':>7} {'ratio p50':>9} {'p95':>6}"
        f" {'ingest/s':>9} {'embed/s':>8} {'peak MB':>8}",
    ]
    for n, row in report["sizes"].items():
        flat, ann = row["bare_vector_query"], row["ann_vector_query"]
        lines.append(
            f"{n:>8} {row['build']['p50']:>10.1f} {row['build']['p95']:>8.1f} {flat['p50']:>9.1f}"
            f" {flat['p95']:>7.1f} {row['ratio_p50']:>9.1f} {row['ratio_p95']:>6.1f}"
            f" {row['ingest_turns_per_s']:>9.1f} {row['bare_embed_texts_per_s']:>8.1f} {row['peak_rss_mb']:>8.0f}"
        )
        stages = ", ".join(f"{k[:-3]} {v['p50']}/{v['p95']}" for k, v in row["stages"].items())
        lines.append(f"{'':>8} stages p50/p95 ms: {stages}")
        held = row["channel_vector_query"]
        lines.append(f"{'':>8} vector path {row['path']}: ANN query p50/p95 {ann['p50']}/{ann['p95']} ms, recall@20 "
                     f"against flat {row['ann_recall_at_20']}; the vector channel's path {row['channel_path']}: "
                     f"p50/p95 {held['p50']}/{held['p95']} ms; upkeep after the ingest: "
                     f"{row['index_upkeep']['did'] or 'nothing due'} ({row['index_upkeep']['seconds']} s)")
        off, mem = row["without_memory_topic"], row["memory"]
        lines.append(f"{'':>8} memory and topic channels off: build p50/p95 {off['p50']}/{off['p95']} ms; on/off p95 "
                     f"{row['memory_topic_cost_p95']}x; {mem['memories']} memories, writer {mem['writer_pieces_per_s']} "
                     f"pieces/s ({mem['writer_wait_after_ingest_s']} s left after the ingest)")
        tuned = row.get("tuned")
        if tuned:
            settings = ",".join(f"{k}={v:g}" for k, v in tuned["settings"].items())
            lines.append(f"{'':>8} with {settings}: build p50/p95 {tuned['p50']}/{tuned['p95']} ms; the preset against it "
                         f"{tuned['build_vs_tuned_p50']}x/{tuned['build_vs_tuned_p95']}x")
        again = row.get("reopened")
        if again:
            lines.append(f"{'':>8} opened again by a new engine: open {again['open_ms']} ms, read ahead "
                         f"{again['read_ahead_ms']} ms, first build {again['first_build_ms']} ms, the next "
                         f"p50/p95 {again['next_builds']['p50']}/{again['next_builds']['p95']} ms")
    return "\n".join(lines)
