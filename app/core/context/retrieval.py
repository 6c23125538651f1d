"""Recall: several channels in parallel, one fused ranking, near-duplicates out, diversity kept.

Channels (each bounded by the plan's recall size):
  vector      LanceDB nearest neighbours of the query embedding
  fulltext    LanceDB BM25 full-text match
  structured  metadata filter in memory: speakers named in the input, kind, time window
  graph       the main chain back from the anchor along ``continues`` with the turns merged into
              it (``merges`` edges from chain nodes), plus the anchor's neighbours
  recent      the most recent messages of the session
  memory      memory notes, and environment events when the input asks about files, feeds or
              API values (vector search restricted to those kinds)

Every candidate keeps its per-channel rank and score and the reason it was kept or dropped, so
the evidence panel and replay can show exactly why something reached the context.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from app.core.context import ranking
from app.core.context.ranking import FusionMethod
from app.core.session.state import SessionState
from app.core.types import EdgeKind

CHANNELS = ("vector", "fulltext", "structured", "graph", "recent", "memory")
#: Channels that query the index: observations of the outside, replayed as recorded.
INDEX_CHANNELS = ("vector", "fulltext", "memory")


class SearchPort(Protocol):
    """The search index (``app.store.index.SearchIndex`` implements it). Blocking."""

    def search_vector(
        self, query: Sequence[float], k: int = 10, *, session_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]: ...

    def search_text(
        self, query: str, k: int = 10, *, session_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]: ...


class RecallStrategy(BaseModel):
    """How channel lists become one ranking. Strategies are data; presets below."""

    name: str
    fusion: FusionMethod = FusionMethod.RELATIVE
    weights: dict[str, float]
    neighbour_alpha: float = 0.0  # share of the best neighbour's score a turn inherits
    rrf_k: int = 60


PCM_FUSION = RecallStrategy(
    name="pcm",
    fusion=FusionMethod.RELATIVE,
    weights={"vector": 0.7, "fulltext": 0.3, "structured": 0.25, "graph": 0.1, "recent": 0.05, "memory": 0.5},
    neighbour_alpha=0.3,
)
HYBRID_RRF = RecallStrategy(
    name="hybrid_rrf", fusion=FusionMethod.RRF, weights={"vector": 1.0, "fulltext": 1.0}
)
STRATEGIES = {s.name: s for s in (PCM_FUSION, HYBRID_RRF)}


class RecallRequest(BaseModel):
    """What the plan asks recall for (sizes per channel, filters, crop settings)."""

    query: str
    channel_sizes: dict[str, int]
    speakers: list[str] = Field(default_factory=list)
    anchor_node: str | None = None
    chain_turns: int = 6
    top_k: int = 40
    dedup_threshold: float = 0.9
    mmr_lambda: float = 1.0
    exclude_ids: list[str] = Field(default_factory=list)
    strategy: str = PCM_FUSION.name
    kinds: list[str] = Field(default_factory=list)  # plan filter kinds: file | feed | api | memory | task
    time_window: str = "all"  # all | session | recent (the last RECENT_HOURS before ``now``)
    now: str = ""


RECENT_HOURS = 24
_NOTE_KINDS = {"file": "env", "feed": "env", "api": "env", "memory": "memory"}


def _cutoff(now: str, hours: int) -> str:
    """The ISO timestamp ``hours`` before ``now`` (same format), or "" when ``now`` is unknown."""
    from datetime import datetime, timedelta

    try:
        moment = datetime.fromisoformat(now.rstrip("Z"))
    except ValueError:
        return ""
    return (moment - timedelta(hours=hours)).isoformat()


class ChannelHit(BaseModel):
    rank: int
    score: float


class ChannelRun(BaseModel):
    channel: str
    size: int
    hits: list[tuple[str, float]] = Field(default_factory=list)
    elapsed_ms: float = 0.0
    error: str = ""


class Candidate(BaseModel):
    id: str
    kind: str  # message | memory | env
    channels: dict[str, ChannelHit] = Field(default_factory=dict)
    fused: float = 0.0
    rank: int = 0
    kept: bool = False
    reason: str = ""


class RecallResult(BaseModel):
    channels: list[ChannelRun]
    candidates: list[Candidate]  # every candidate seen, best first; ``kept`` marks the selection
    strategy: str

    def kept_ids(self) -> list[str]:
        return [c.id for c in self.candidates if c.kept]


def _structured(state: SessionState, req: RecallRequest, size: int) -> list[tuple[str, float]]:
    """The metadata filter: messages of the speakers the input names, notes of the kinds it
    names (files, feeds, API values, memory), within the time window; most recent first."""
    since = _cutoff(req.now, RECENT_HOURS) if req.time_window == "recent" else ""
    hits: list[tuple[str, str]] = []  # (at, id)
    for name in req.speakers:
        hits.extend((state.messages[m].at, m) for m in state.by_speaker(name))
    wanted = {_NOTE_KINDS[k] for k in req.kinds if k in _NOTE_KINDS}
    hits.extend((n.at, n.note_id) for n in state.notes.values() if n.kind in wanted)
    if since:
        hits = [h for h in hits if h[0] >= since]
    ordered = sorted(set(hits), key=lambda h: (h[0], h[1]), reverse=True)
    return [(item, 1.0) for _, item in ordered[:size]]


def _graph(state: SessionState, req: RecallRequest, size: int) -> list[tuple[str, float]]:
    """Messages along the main chain back from the anchor (closer = higher), then those of turns
    merged into a chain node (scored like that node: injected results are chain members), then
    the anchor's neighbours."""
    if req.anchor_node is None or req.anchor_node not in state.graph:
        return []
    out: dict[str, float] = {}
    chain = state.main_chain(req.anchor_node, req.chain_turns)
    for distance, node in enumerate(chain):
        for mid in state.turn_messages(node):
            out.setdefault(mid, 1.0 / (1 + distance))
    for distance, node in enumerate(chain):
        for edge in state.graph.out_edges(node, EdgeKind.MERGES):
            for mid in state.turn_messages(edge.dst):
                out.setdefault(mid, 1.0 / (1 + distance))
    for node in state.graph.neighbours(req.anchor_node):
        for mid in state.turn_messages(node):
            out.setdefault(mid, 0.25)
    return ranking_items(out)[:size]


def _recent(state: SessionState, size: int) -> list[tuple[str, float]]:
    ids = state.recent(size)
    n = len(ids)
    return [(m, (i + 1) / n) for i, m in enumerate(ids)][::-1]


def ranking_items(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    return [(i, scores[i]) for i in ranking.ranked(scores)]


async def _timed(channel: str, size: int, work: Callable[[], Awaitable[list[tuple[str, float]]]]) -> ChannelRun:
    """Run one channel and time it; its failure is recorded on the run."""
    started = time.perf_counter()
    run = ChannelRun(channel=channel, size=size)
    try:
        run.hits = await work()
    except Exception as exc:  # a failing channel degrades recall, never the turn
        run.error = f"{type(exc).__name__}: {exc}"
    run.elapsed_ms = (time.perf_counter() - started) * 1000
    return run


def _memory_kinds(state: SessionState, req: RecallRequest) -> list[str]:
    """Note kinds the memory channel searches: memory notes always; environment events too when
    the input asks about files, feeds or API values (elsewhere the vector channel's env hits are
    enough, and an unasked-for event would otherwise top this channel's list just for being the
    nearest one)."""
    wanted = {"memory"} | ({"env"} if {"file", "feed", "api"} & set(req.kinds) else set())
    return sorted(wanted & {n.kind for n in state.notes.values()})


async def recall(
    state: SessionState,
    req: RecallRequest,
    *,
    query_vector: Sequence[float] | None,
    search: SearchPort | None,
    run_blocking: Callable[..., Awaitable[list[tuple[str, float]]]],
    recorded: Mapping[str, ChannelRun] | None = None,
) -> RecallResult:
    """Run the channels concurrently, fuse, propagate to neighbours, dedup, diversify.

    ``run_blocking(fn, *args, **kw)`` runs an index query off the event loop (an executor).
    ``recorded`` channel runs are used as observed instead of running those channels.
    """
    strategy = STRATEGIES.get(req.strategy, PCM_FUSION)
    sizes = {c: max(0, int(req.channel_sizes.get(c, 0))) for c in CHANNELS}
    sid = state.session_id

    async def vector() -> list[tuple[str, float]]:
        if search is None or query_vector is None or not sizes["vector"]:
            return []
        return await run_blocking(search.search_vector, query_vector, sizes["vector"], session_id=sid, kinds=["message", "env"])

    async def fulltext() -> list[tuple[str, float]]:
        if search is None or not sizes["fulltext"]:
            return []
        return await run_blocking(search.search_text, req.query, sizes["fulltext"], session_id=sid)

    async def memory() -> list[tuple[str, float]]:
        kinds = _memory_kinds(state, req)
        if search is None or query_vector is None or not sizes["memory"] or not kinds:
            return []
        return await run_blocking(search.search_vector, query_vector, sizes["memory"], session_id=sid, kinds=kinds)

    async def local(fn: Callable[[], list[tuple[str, float]]]) -> list[tuple[str, float]]:
        return fn()

    async def given(channel: str, work: Callable[[], Awaitable[list[tuple[str, float]]]]) -> ChannelRun:
        if recorded and channel in recorded:
            return recorded[channel]
        return await _timed(channel, sizes[channel], work)

    runs = await asyncio.gather(
        given("vector", vector),
        given("fulltext", fulltext),
        given("structured", lambda: local(lambda: _structured(state, req, sizes["structured"]))),
        given("graph", lambda: local(lambda: _graph(state, req, sizes["graph"]))),
        given("recent", lambda: local(lambda: _recent(state, sizes["recent"]))),
        given("memory", memory),
    )
    return fuse(state, req, strategy, list(runs))


class _Pool:
    """The candidates of one fusion, by id in first-seen order, with each channel's scores."""

    def __init__(self, state: SessionState, exclude_ids: Sequence[str]) -> None:
        self.state = state
        self.excluded = set(exclude_ids)
        self.per_channel: dict[str, dict[str, float]] = {}
        self.candidates: dict[str, Candidate] = {}

    def known(self, item: str) -> bool:
        """A message or note of the session that the request does not exclude."""
        return (item in self.state.messages or item in self.state.notes) and item not in self.excluded

    def candidate(self, item: str) -> Candidate:
        if item not in self.candidates:
            kind = "message" if item in self.state.messages else self.state.notes[item].kind
            self.candidates[item] = Candidate(id=item, kind=kind)
        return self.candidates[item]

    def add_run(self, run: ChannelRun) -> None:
        """A channel's hits (unknown and repeated ids skipped), each noted on its candidate."""
        scores: dict[str, float] = {}
        for rank, (item, score) in enumerate(run.hits, start=1):
            if not self.known(item) or item in scores:
                continue
            scores[item] = score
            self.candidate(item).channels[run.channel] = ChannelHit(rank=rank, score=round(score, 6))
        self.per_channel[run.channel] = scores

    def mark_speakers(self, speakers: Sequence[str]) -> None:
        """The structured filter also marks matching candidates that other channels found."""
        wanted = {s.lower() for s in speakers}
        if not wanted:
            return
        marks = self.per_channel.setdefault("structured", {})
        for item, cand in self.candidates.items():
            view = self.state.messages.get(item)
            if view is not None and view.speaker.lower() in wanted and item not in marks:
                marks[item] = 1.0
                cand.channels["structured"] = ChannelHit(rank=0, score=1.0)

    def fused(self, strategy: RecallStrategy) -> dict[str, float]:
        """One score per item by the strategy's fusion, then spread to the hits' neighbours."""
        if strategy.fusion == FusionMethod.RRF:
            lists = {c: ranking.ranked(s) for c, s in self.per_channel.items()}
            fused = ranking.rrf(lists, strategy.weights, k=strategy.rrf_k)
        else:
            fused = ranking.relative_fusion(self.per_channel, strategy.weights)
        if strategy.neighbour_alpha > 0:
            neighbours = lambda i: (n for n in self.state.neighbours(i) if self.known(n))  # noqa: E731
            fused = ranking.propagate(fused, neighbours, strategy.neighbour_alpha)
            for item in fused:
                if item not in self.candidates:
                    self.candidate(item).reason = "neighbour of a hit"
        return fused


def _select(state: SessionState, req: RecallRequest, fused: Mapping[str, float]) -> tuple[list[str], dict[str, str]]:
    """The top_k kept after near-duplicates are dropped and diversity is applied (MMR), and the
    near-duplicates (item → the item it repeats)."""
    order = [i for i in ranking.ranked(fused) if fused[i] > 0]
    # Crop before the quadratic-ish steps: beyond a few times top_k nothing can be selected.
    pool = order[: max(2 * req.top_k, 30)]
    texts = {i: _text(state, i) for i in pool}
    sim = ranking.jaccard_matrix([texts[i] for i in pool])
    dupes = ranking.near_duplicates(pool, texts, req.dedup_threshold, sim=sim)
    keep_rows = [n for n, i in enumerate(pool) if i not in dupes]
    unique = [pool[n] for n in keep_rows]
    chosen = ranking.mmr(unique, fused, texts, lam=req.mmr_lambda, k=req.top_k,
                         sim=sim[np.ix_(keep_rows, keep_rows)] if keep_rows else None)
    return chosen, dupes


def _explain(candidates: Mapping[str, Candidate], fused: Mapping[str, float], chosen: Sequence[str],
             dupes: Mapping[str, str], top_k: int) -> None:
    """Each candidate's fused score, rank if kept, and why it was kept or dropped."""
    position = {item: n for n, item in enumerate(chosen, start=1)}
    for item, cand in candidates.items():
        cand.fused = round(fused.get(item, 0.0), 6)
        if item in position:
            cand.kept, cand.rank = True, position[item]
            cand.reason = cand.reason or "kept"
        elif item in dupes:
            cand.reason = f"near-duplicate of {dupes[item]}"
        elif item in fused and fused[item] > 0:
            cand.reason = f"below top {top_k} after diversity"
        else:
            cand.reason = "no weight in this strategy"


def fuse(state: SessionState, req: RecallRequest, strategy: RecallStrategy, runs: list[ChannelRun]) -> RecallResult:
    """The pure half of recall: channel lists in, one ranked and cropped candidate list out.

    Replay calls this with the recorded channel lists of a turn.
    """
    pool = _Pool(state, req.exclude_ids)
    for run in runs:
        pool.add_run(run)
    pool.mark_speakers(req.speakers)
    fused = pool.fused(strategy)
    chosen, dupes = _select(state, req, fused)
    _explain(pool.candidates, fused, chosen, dupes, req.top_k)
    ordered = sorted(pool.candidates.values(), key=lambda c: (not c.kept, c.rank, -c.fused, c.id))
    return RecallResult(channels=runs, candidates=ordered, strategy=strategy.name)


def _text(state: SessionState, item: str) -> str:
    view = state.messages.get(item)
    if view is not None:
        return view.render()
    note = state.notes.get(item)
    return note.render() if note else ""
