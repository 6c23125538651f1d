"""What a build reads, as the engine gives it (``app.core.pipeline.sources.BuildSources``).

- ``LiveSources``: the engine's services now — a turn (its tools run, its model calls are
  recorded), an evaluation question, a scheduler stream (its task stack given), an answer again
  (the detail the user set on the turn);
- ``RecordedSources``: a recorded build (replay, re-anchor, progressive detail) — what was an
  observation of the outside or the user's choice then is answered from the ``BuildRecord``, one
  method beside its live twin; the rest is recomputed as live (DESIGN.md §4 "Replay");
- ``PushSources``: an environment push — the index and the user's profile, nothing of a turn.

What all three read alike (the index, the input's embedding, recent vectors, the profile) is
``StoredReads``, which they extend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.context.compiler import Fact
from app.core.context.recall_model import ChannelRun, SearchPort
from app.core.context.retrieval import TopicSearch
from app.core.context.runner import recorded_runs
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.tasks import TaskService
from app.core.engine.tools import ToolService
from app.core.intent.llm import INTENT_JSON_SCHEMA, intent_messages
from app.core.intent.model import Intent
from app.core.intent.profile import UserProfile
from app.core.pipeline.detail import Detail
from app.core.pipeline.record import BuildRecord
from app.core.pipeline.sources import LlmSignal, ToolStep
from app.core.pipeline.summary_items import Offered, offer_from_record
from app.core.plan.tools import ToolSignals, ToolSpec
from app.core.ports import GenerationParams
from app.core.runtime.executors import ChatStream
from app.core.session.state import NoteView, SessionState
from app.core.tasks.stack import TaskInputs

LLM_INTENT_CHARS = 2000  # of an input shown to the model for its intent JSON


@dataclass(frozen=True)
class LiveServices:
    """What live sources read: the engine's context and services, the topic channel's search
    (``MemoryService.topic_search``) and the branch summaries on offer (``SummaryService.offer``)."""

    ctx: EngineContext
    sessions: SessionService
    tasks: TaskService
    tools: ToolService
    topics: TopicSearch
    offer: Callable[[str], Offered]


class StoredReads:
    """What every build reads alike, live or replayed or pushed: the search index, the input's
    embedding, the stored vectors of recent messages, the user's profile (all recomputed on replay)."""

    def __init__(self, ctx: EngineContext, sessions: SessionService) -> None:
        self.ctx, self._sessions = ctx, sessions

    @property
    def index(self) -> SearchPort | None:
        return self.ctx.index

    async def run_blocking(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await self.ctx.on_index(fn, *args, **kw)

    async def query_vector(self, text: str) -> Sequence[float] | None:
        vecs = await self.ctx.embed([text])
        return vecs[0] if vecs is not None else None

    async def vectors(self, ids: Sequence[str]) -> Mapping[str, Sequence[float] | np.ndarray]:
        return await self.ctx.vectors_for(ids)

    def profile(self, state: SessionState) -> UserProfile:
        return self._sessions.profile(state)


class LiveSources(StoredReads):
    """A build's inputs as the engine's services give them now.

    ``turn`` (session id, turn id): the build is that turn's — its tools run and its model calls
    are recorded in ``model_usage``; without it no tool runs. ``tasks``: the task stack a
    scheduler stream gives its build (else the session's now). ``detail``: the progressive detail
    the user set (answering a turn again). ``kept``: branch summaries that stand in for the current
    ones of their roots (those a restored checkpoint kept, for a build on the restored branch)."""

    def __init__(self, services: LiveServices, *, turn: tuple[str, str] | None = None,
                 given_tasks: TaskInputs | None = None, detail: Detail | None = None,
                 kept: Offered | None = None) -> None:
        super().__init__(services.ctx, services.sessions)
        self._services = services
        self.turn, self.given_tasks, self.given_detail, self.kept = turn, given_tasks, detail, kept

    # -- recomputed on replay as they are live (and the index, vectors and profile: ``StoredReads``)

    def facts(self, state: SessionState) -> tuple[Fact, ...]:
        return self._services.sessions.facts(state)

    def overrides(self, state: SessionState) -> tuple[tuple[str, str], ...]:
        return tuple((said, node) for _, said, node in state.overrides)

    def topics(self) -> TopicSearch | None:
        return self._services.topics

    async def outside_notes(self, state: SessionState, ids: Sequence[str]) -> list[NoteView]:
        return await self._services.sessions.outside_notes(state, ids)

    def ablate(self) -> tuple[str, ...]:
        return self.ctx.config.ablate

    def tuning(self) -> tuple[tuple[str, float], ...]:
        return self.ctx.config.tune

    # -- observations and choices: live now (``RecordedSources`` answers them as recorded)

    def limits(self, state: SessionState) -> tuple[int, int] | None:
        """(context size, answer reserve) when the session sets its own answer length, which its
        contexts then leave room for (at most half the context); None keeps the builder's."""
        if not state.generation.max_tokens:
            return None
        size = self.ctx.builder.context_size
        return size, min(state.generation.max_tokens, size // 2)

    async def tasks(self, state: SessionState) -> TaskInputs:
        if self.given_tasks is not None:
            return self.given_tasks
        await self._services.tasks.book(state.session_id)
        return self._services.tasks.inputs(state.session_id)

    async def llm_intent(self, text: str, fast: Callable[[], Intent]) -> LlmSignal:
        """The model's intent JSON when the fast intent is unsure about the mode (and the model is
        asked at all: ``EngineConfig.llm_intent`` "auto"), within the time limit; never raises."""
        ctx = self.ctx
        if ctx.chat is None or ctx.config.llm_intent != "auto":
            return None, "skipped"
        if fast().confidence.mode >= ctx.config.llm_intent_below:
            return None, "skipped"
        # The head of a long paste says what it is for; the whole of it would not fit the model.
        stream = ChatStream(ctx.ex, ctx.chat, intent_messages(text[:LLM_INTENT_CHARS]), stage="intent",
                            params=GenerationParams(max_tokens=160, temperature=0.0), json_schema=INTENT_JSON_SCHEMA,
                            on_result=ctx.usage_recorder(*self.turn) if self.turn is not None else None)
        try:
            result = await asyncio.wait_for(stream.wait(), ctx.config.llm_intent_timeout_s)
        except asyncio.TimeoutError:
            stream.stop()  # a call still queued behind an answer starts and stops at once
            return None, "late"
        except Exception:  # noqa: BLE001 - the LLM signal only ever degrades
            return None, "error"
        if result.finish_reason not in ("stop", "length") or result.parsed is None:
            return result.text, "invalid"
        return result.parsed, "ok"

    def tools(self) -> tuple[tuple[ToolSpec, ...], ToolStep | None]:
        return self._services.tools.specs(), self._services.tools.step(self.turn[1]) if self.turn is not None else None

    async def tool_signals(self, state: SessionState, query_vector: Sequence[float] | None) -> ToolSignals:
        return await self._services.tools.signals(state.session_id, query_vector)

    def system_prompt(self, state: SessionState) -> str:
        return state.generation.system_prompt

    def other_sessions(self, state: SessionState) -> int:
        return self._services.sessions.other_sessions(state)

    def summaries(self, state: SessionState) -> Offered:
        offer = self._services.offer(state.session_id)
        return {**offer, **self.kept} if self.kept and offer else offer

    def detail(self) -> Detail:
        return self.given_detail or Detail()

    def channels(self) -> Mapping[str, ChannelRun]:
        return {}


class RecordedSources(LiveSources):
    """A recorded build's inputs (replay, re-anchor, progressive detail): its observations of the
    outside — index channel hits, the model's intent JSON, the tools, the tool filter's signals and
    the tools' results, the task stack, the branch summaries offered — and the user's choices then (standing instruction, the
    workspace its plan's scope saw, model limits, detail) as recorded; the rest recomputed as live.
    ``summaries``/``detail`` replace the recorded ones (a detail change sets another detail)."""

    def __init__(self, build: BuildRecord, services: LiveServices, *, summaries: Offered | None = None,
                 detail: Detail | None = None) -> None:
        super().__init__(services)
        self.build = build
        self.offered = offer_from_record(build.summaries) if summaries is None else summaries
        self.recorded_detail = Detail.model_validate(build.detail) if detail is None else detail

    def limits(self, _state: SessionState) -> tuple[int, int] | None:
        budget = self.build.plan["budget"]
        return budget["context_size"], budget["answer_reserve"]

    async def tasks(self, _state: SessionState) -> TaskInputs:
        return TaskInputs.model_validate(self.build.tasks)

    async def llm_intent(self, _text: str, _fast: Callable[[], Intent]) -> LlmSignal:
        llm = self.build.llm_intent or {}
        return llm.get("output"), llm.get("status", "skipped")

    def tools(self) -> tuple[tuple[ToolSpec, ...], ToolStep | None]:
        round_ = self.build.tools
        return tuple(self.build.tool_specs), self._services.tools.replayed(round_) if round_ is not None else None

    async def tool_signals(self, _state: SessionState, _query_vector: Sequence[float] | None) -> ToolSignals:
        return self.build.tool_signals

    def system_prompt(self, _state: SessionState) -> str:
        return self.build.system_prompt

    def other_sessions(self, _state: SessionState) -> int:
        # 1 when the plan chose the workspace, else 0: sessions created since must not flip it
        return int(self.build.plan.get("retrieval", {}).get("scope") == "workspace")

    def summaries(self, _state: SessionState) -> Offered:
        return self.offered

    def detail(self) -> Detail:
        return self.recorded_detail

    def channels(self) -> Mapping[str, ChannelRun]:
        return recorded_runs(self.build.recall.channels)


class PushSources(StoredReads):
    """What an environment push's build reads: the index and the user's profile (``StoredReads``);
    nothing of a turn (no task stack, tool round, model signal, summaries, facts, overrides or
    workspace recall)."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, tools: ToolService) -> None:
        super().__init__(ctx, sessions)
        self._tools = tools

    def facts(self, _state: SessionState) -> tuple[Fact, ...]:
        return ()

    def overrides(self, _state: SessionState) -> tuple[tuple[str, str], ...]:
        return ()

    def topics(self) -> TopicSearch | None:
        return None

    async def outside_notes(self, _state: SessionState, _ids: Sequence[str]) -> list[NoteView]:
        return []

    def ablate(self) -> tuple[str, ...]:
        return ()

    def tuning(self) -> tuple[tuple[str, float], ...]:
        return ()

    def limits(self, _state: SessionState) -> tuple[int, int] | None:
        return None

    async def tasks(self, _state: SessionState) -> TaskInputs:
        return TaskInputs()

    async def llm_intent(self, _text: str, _fast: Callable[[], Intent]) -> LlmSignal:
        return None, "skipped"

    def tools(self) -> tuple[tuple[ToolSpec, ...], ToolStep | None]:
        return self._tools.specs(), None

    async def tool_signals(self, _state: SessionState, _query_vector: Sequence[float] | None) -> ToolSignals:
        return ToolSignals()

    def system_prompt(self, _state: SessionState) -> str:
        return ""

    def other_sessions(self, _state: SessionState) -> int:
        return 0

    def summaries(self, _state: SessionState) -> Offered:
        return {}

    def detail(self) -> Detail:
        return Detail()

    def channels(self) -> Mapping[str, ChannelRun]:
        return {}
