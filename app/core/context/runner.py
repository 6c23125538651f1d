"""Running recall's channels: each one timed, the index channels as recorded on replay.

``ChannelRunner`` runs the channels of one build for recall (``app.core.context.retrieval``) and
for its further rounds — a sub-question's own retrieval and the second round the retrieval loop
runs for a part the first left uncovered (``app.core.context.parts``). A channel that queries the
index is an observation of the outside: its run is recorded with the text it searched for
(``ChannelRun.query``; "" for the input) and replay answers it from the record by that key
instead of asking the index again. A failing channel degrades recall, never the turn; an index
channel past the plan's time limit is skipped and recorded so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from app.core.context.channel_names import INDEX_CHANNELS
from app.core.context.recall_model import ChannelRun, RecallRequest, SearchPort

Hits = list[tuple[str, float]]
#: Runs an index query off the event loop: ``run_blocking(fn, *args, **kw)``.
RunBlocking = Callable[..., Awaitable[Hits]]


def run_key(channel: str, query: str = "") -> str:
    """The key a channel run is recorded and found again by: the channel, and the text it searched
    for when that was not the input."""
    return f"{channel}|{query}" if query else channel


def recorded_runs(runs: Sequence[ChannelRun]) -> dict[str, ChannelRun]:
    """The index channels' runs of a recorded build, by ``run_key``: what replay feeds back."""
    return {run_key(r.channel, r.query): r for r in runs if r.channel in INDEX_CHANNELS}


async def timed(channel: str, size: int, work: Callable[[], Awaitable[Hits]], timeout_ms: int = 0,
                query: str = "") -> ChannelRun:
    """Run one channel and time it; its failure is recorded on the run, and so is a channel past
    ``timeout_ms`` (its hits are not waited for: it is skipped)."""
    started = time.perf_counter()
    run = ChannelRun(channel=channel, size=size, query=query)
    try:
        if timeout_ms > 0:
            run.hits = await asyncio.wait_for(work(), timeout_ms / 1000)
        else:
            run.hits = await work()
    except asyncio.TimeoutError:
        run.skipped = True
        run.error = f"skipped: past its time limit of {timeout_ms} ms"
    except Exception as exc:  # a failing channel degrades recall, never the turn
        run.error = f"{type(exc).__name__}: {exc}"
    run.elapsed_ms = (time.perf_counter() - started) * 1000
    return run


#: Hits the early full-text query asks for: more than the plan gives the channel at the usual budgets
#: (184 at 1,024 tokens), so the channel's list is a prefix of it.
EARLY_TEXT_K = 256


class EarlyText:
    """The input's full-text query, started before recall (``start``, by the builder once the query
    is embedded): it needs only the text, so it runs on the index's threads while the intent, the
    plan and routing run on the loop, instead of after them.

    Its hits serve the full-text channel (``serves``) when the plan asks what it asked: the input's
    own text, in the session it searched, at most ``k`` hits, with no date range pushed into the
    query. The channel then takes its first ``size`` hits (BM25 ranks the same rows the same way
    whatever the limit). Otherwise the channel queries as before and this one is dropped. Replay
    never starts one: its runs come from the record."""

    def __init__(self, text: str, session_id: str, k: int, hits: asyncio.Future[Hits]) -> None:
        self.text, self.session_id, self.k, self.hits = text, session_id, k, hits

    @classmethod
    def start(cls, search: SearchPort, run_blocking: RunBlocking, text: str, session_id: str,
              k: int = EARLY_TEXT_K) -> EarlyText:
        hits = asyncio.ensure_future(run_blocking(search.search_text, text, k, session_id=session_id,
                                                  kinds=["message", "env"]))
        return cls(text, session_id, k, hits)

    def serves(self, query: str, size: int, scoped: str | None, bounds: Mapping[str, str | None]) -> bool:
        """Whether its hits answer the full-text channel's query for ``query`` (``size`` hits, in
        ``scoped``, within ``bounds``)."""
        return query == self.text and scoped == self.session_id and 0 < size <= self.k and not any(bounds.values())

    def drop(self) -> None:
        """Not used: stop waiting for it (a query under way finishes on its thread, unread)."""
        if not self.hits.done():
            self.hits.cancel()
        elif not self.hits.cancelled():
            self.hits.exception()  # read, so a failed query is not reported as never retrieved


class ChannelRunner:
    """Runs channels for one build: ``search`` is the index (None: none), ``scoped`` the session the
    index channels search (None: every session), ``recorded`` the runs replay feeds back."""

    def __init__(self, req: RecallRequest, *, search: SearchPort | None, run_blocking: RunBlocking,
                 scoped: str | None, recorded: Mapping[str, ChannelRun] | None = None,
                 early: EarlyText | None = None) -> None:
        self.req, self.search, self.run_blocking, self.scoped = req, search, run_blocking, scoped
        self.recorded = recorded or {}
        self.early = early  # the input's full-text query, started with the build (``EarlyText``)
        self.started = time.perf_counter()

    def elapsed_ms(self) -> float:
        """Milliseconds since the runner was made (the start of recall)."""
        return (time.perf_counter() - self.started) * 1000

    def has(self, channel: str, query: str = "") -> bool:
        """Whether the record holds this run (replay)."""
        return run_key(channel, query) in self.recorded

    def bounds(self, dated: Mapping[str, str | None] | None) -> Mapping[str, str | None]:
        """The since/until an index query keeps to: ``dated``, else the plan's filtering range."""
        return self.req.index_range() if dated is None else dated

    async def run(self, channel: str, size: int, work: Callable[[], Awaitable[Hits]], query: str = "") -> ChannelRun:
        """The channel's run: as recorded, else run now (an index channel within the time limit)."""
        found = self.recorded.get(run_key(channel, query))
        if found is not None:
            return found
        limit = self.req.timeout_ms if channel in INDEX_CHANNELS else 0
        return await timed(channel, size, work, limit, query)

    async def vector(self, size: int, vector: Callable[[], Awaitable[Sequence[float] | None]], query: str = "",
                     dated: Mapping[str, str | None] | None = None) -> ChannelRun:
        """The vector channel for the input (``query`` "") or another text, whose embedding
        ``vector()`` gives (asked only when the run is not recorded); within ``dated`` (the index
        query's since/until; None: the plan's date range when it filters)."""
        paths: list[str] = []  # the path the index searched by ("flat", "ann"): the build record says it

        async def work() -> Hits:
            qv = await vector() if self.search is not None and size else None
            if self.search is None or qv is None or not size:
                return []
            return await self.run_blocking(self.search.search_vector, qv, size, session_id=self.scoped,
                                           kinds=["message", "env"], trace=paths, **self.bounds(dated))
        run = await self.run("vector", size, work, query)
        if paths:  # a recorded run keeps its own
            run.path = paths[0]
        return run

    async def fulltext(self, size: int, query: str = "", dated: Mapping[str, str | None] | None = None) -> ChannelRun:
        """The full-text channel for the input (``query`` "") or another text, within ``dated``."""
        async def work() -> Hits:
            if self.search is None or not size:
                return []
            text, bounds = query or self.req.query, self.bounds(dated)
            if self.early is not None and self.early.serves(text, size, self.scoped, bounds):
                return list(await self.early.hits)[:size]
            # memories are the memory channel's (it leaves out those that only restate this session)
            return await self.run_blocking(self.search.search_text, text, size,
                                           session_id=self.scoped, kinds=["message", "env"], **bounds)
        return await self.run("fulltext", size, work, query)
