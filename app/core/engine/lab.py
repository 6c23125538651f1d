"""The engine as evaluations and benchmarks handle it (``Engine.lab()``; used by ``app.eval``).

They switch what the app never switches while it runs — recall channels off (ablations), the
model's intent signal, the background writers, an interruption's cut-in — read figures the app
does not show — the memory writer's and the summarizer's statistics, the summaries replayed from
the first update — and compare builds with what a bare index gives: its own vector and full-text
rankings of a query, and a plain vector query. Every switch returns or takes the setting so that
it can be restored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.core.context.recall_model import PCM_FUSION
from app.core.engine.context import EngineContext
from app.core.engine.index_upkeep import IndexUpkeep
from app.core.engine.memory import MemoryService, WriterStats
from app.core.engine.streams import EngineStreams
from app.core.engine.summaries import SummaryService, SummaryStats
from app.core.types import SummaryRecord


@dataclass(frozen=True)
class Background:
    """The background writers: the memory writer and the summaries on or off, how many new
    messages a summary update waits for, and who writes summaries ("auto": the chat model when it
    is idle; "off": the extractive summarizer)."""

    memory: bool
    summaries: bool
    summary_every: int
    summary_model: str


class EngineLab:
    """See the module docstring."""

    def __init__(self, ctx: EngineContext, memory: MemoryService, summaries: SummaryService,
                 streams: EngineStreams, upkeep: IndexUpkeep, read_ahead: Callable[[], Awaitable[None]]) -> None:
        self._ctx, self._memory, self._summaries, self._streams = ctx, memory, summaries, streams
        self._upkeep, self._read_ahead = upkeep, read_ahead

    # ------------------------------------------------------------------ switches

    def set_ablation(self, channels: Sequence[str]) -> tuple[str, ...]:
        """Close these mechanisms from the next build (``app.core.types.Ablation``: "routing",
        "fences", "progress", "template", "env", "gate", "compression", "memory", "topic",
        "summaries"; "deadlines": recall waits for every channel, past the plan's time limit, so a
        figure does not depend on how loaded the machine was) or recall channels by name; return
        what was closed until now."""
        config = self._ctx.config
        before, config.ablate = config.ablate, tuple(channels)
        return before

    def ablation(self) -> tuple[str, ...]:
        """What is closed now (``set_ablation``): an evaluation that routes by its own router reads it."""
        return self._ctx.config.ablate

    def set_tuning(self, settings: Mapping[str, float]) -> dict[str, float]:
        """Build with these recall weights in place of the strategy's from the next build (a
        channel's name: its fusion weight; ``asking_discount``, ``sentence_match``,
        ``length_prior``, ``neighbour_alpha``: those fields; ``RecallStrategy.tuned``), for a grid
        whose held-out figures ``app.eval.folds`` reads; return the settings until now. A name
        that is neither is a ``ValueError``, raised here."""
        PCM_FUSION.tuned(settings)  # checks the names
        config = self._ctx.config
        before, config.tune = dict(config.tune), tuple(sorted(settings.items()))
        return before

    def set_llm_intent(self, mode: str) -> str:
        """Ask the chat model for intent JSON when the fast intent is unsure ("auto"), or never
        ("off"), from the next build; return the mode until now."""
        config = self._ctx.config
        before, config.llm_intent = config.llm_intent, mode
        return before

    def background(self) -> Background:
        """The background writers as they are now."""
        config = self._ctx.config
        return Background(memory=self._memory.enabled, summaries=self._summaries.enabled,
                          summary_every=config.summary_every, summary_model=config.summary_model)

    def set_background(self, background: Background) -> None:
        """Switch the background writers as ``background`` says, from their next cue."""
        config = self._ctx.config
        self._memory.enabled, self._summaries.enabled = background.memory, background.summaries
        config.summary_every, config.summary_model = background.summary_every, background.summary_model

    def set_cut_in(self, on: bool) -> bool:
        """Let prompt inputs cut into a running task's generation (False: they queue for the model);
        return the setting until now."""
        config = self._streams.runtime.config
        before, config.cut_in = config.cut_in, on
        return before

    def set_task_steps(self, mode: str) -> str:
        """How new tasks get their steps from now on ("model", "rules", "off": one stream, see
        ``EngineConfig.task_steps``); return the mode until now."""
        config = self._ctx.config
        before, config.task_steps = config.task_steps, mode
        return before

    def set_max_tokens(self, max_tokens: int) -> int:
        """Cap every answer at ``max_tokens`` from the next build (a step, an interruption's answer);
        return the cap until now."""
        config = self._ctx.config
        before = config.generation.max_tokens
        config.generation = config.generation.model_copy(update={"max_tokens": max_tokens})
        return before

    # ------------------------------------------------------------------ figures

    def memory_stats(self) -> WriterStats:
        """What the memory writer did so far."""
        return self._memory.stats

    def summary_stats(self) -> SummaryStats:
        """What the summary service did so far (cache hits and misses, who wrote each level)."""
        return self._summaries.stats

    async def replay_summaries(self, session_id: str) -> list[SummaryRecord]:
        """Go through every update of the session's summaries again from the first (the cache in
        memory dropped; ``SummaryService.replay``)."""
        return await self._summaries.replay(session_id)

    # ------------------------------------------------------------------ baselines

    def can_search(self) -> bool:
        """Whether the engine has an embedder and a search index (what the baselines query)."""
        return self._ctx.embedder is not None and self._ctx.index is not None

    async def index_rankings(self, query: str, k: int, *, session_id: str,
                             kinds: Sequence[str] = ("message",)) -> tuple[list[str], list[str]]:
        """The index's own rankings of ``query`` in the session: the ids of its ``k`` nearest
        vectors (the query embedded as builds embed it) and of its ``k`` best full-text matches."""
        ctx, index = self._ctx, self._ctx.index
        if index is None:
            return [], []
        vecs = await ctx.embed([query])
        vector = [] if vecs is None else [i for i, _ in await ctx.on_index(
            index.search_vector, vecs[0], k, session_id=session_id, kinds=list(kinds))]
        text = [i for i, _ in await ctx.on_index(index.search_text, query, k, session_id=session_id,
                                                 kinds=list(kinds))]
        return vector, text

    async def vector_query(self, vector: Sequence[float] | np.ndarray, k: int, *, session_id: str,
                           exact: bool = False, held: bool = False,
                           trace: list[str] | None = None) -> list[tuple[str, float]]:
        """A bare top-``k`` vector query on the index (what a build's latency is compared with):
        on its ANN index when it has one, or ``exact``: the flat scan; ``held``: as the vector
        channel asks it (past the ANN threshold, the session's vectors held in-process).
        ``trace`` gets the path that served it."""
        index = self._ctx.index
        if index is None:
            return []
        return await self._ctx.on_index(index.search_vector, vector, k, session_id=session_id, exact=exact,
                                        held=held, trace=trace)

    async def read_ahead(self) -> None:
        """Wait until what opening a session reads ahead for its first build is read
        (``Engine.open_session``): a benchmark times that build as a user who types a question
        after opening meets it."""
        await self._read_ahead()

    async def index_upkeep(self) -> str:
        """Bring the index up to date now — the ANN index trained if due, every written row folded
        in — as the background upkeep would; return what was done ("" when nothing was due)."""
        return await self._upkeep.run(force=True)

    def vector_path(self) -> str:
        """How vector queries search now: "ann" (the approximate index) or "flat" ("" without an index)."""
        return "" if self._ctx.index is None else self._ctx.index.vector_path
