"""The one bundle every engine service shares (DESIGN.md §2: composed, not inherited).

``EngineContext`` holds the ports (store, index, embedder, chat model, token counter), the named
executors, the configuration, and the state the services share: the open sessions, their locks,
and the cached message vectors. The ``Engine`` facade
builds it once and hands it to each service (``app.core.engine.sessions``, ``turns``, ``branches``,
``tasks``, ``tools``, ``environment``, ``streams``); no service reaches into another's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from app.core.pipeline.builder import ContextBuilder
from app.core.ports import (
    ChatModel,
    ChatResult,
    Embedder,
    GenerationParams,
    SearchIndex,
    SessionStore,
    TokenCounter,
)
from app.core.routing.anchor import SESSION_DEFAULT, RoutingWeights
from app.core.runtime.background import spawn
from app.core.runtime.executors import Executors
from app.core.session.state import SessionState
from app.core.signals import Signal
from app.core.types import Message

T = TypeVar("T")


@dataclass
class EngineConfig:
    """The engine's settings (strategy as data; ``app.main`` fills it from ``Settings``)."""

    default_budget: int = 1024
    # The tokens each prompt leaves for its answer, which is also the answer's length limit (the
    # plan records it). 0: a quarter of the context size, at least 256 and at most 2048 tokens
    # (512 for the default 2048-token context). A session's own answer length replaces it.
    answer_reserve: int = 0
    context_size: int = 2048
    # The local model's JSON is one more intent signal, asked for only when the fast path is
    # unsure about the mode ("auto") and only within the time limit; "off" never asks.
    llm_intent: str = "auto"
    llm_intent_below: float = 0.35
    llm_intent_timeout_s: float = 2.0
    generation: GenerationParams = field(default_factory=lambda: GenerationParams(max_tokens=256))
    routing: RoutingWeights = SESSION_DEFAULT
    max_streams: int = 2  # concurrent streams per session (Settings.max_concurrent_streams)
    # A streaming answer is written to the store before each piece is shown, at most this often
    # (seconds; below 0 turns it off): nothing the user saw is lost in a crash; a larger value
    # means fewer writes and a choppier stream.
    checkpoint_s: float = 0.05
    # The background memory writer (memory objects and topics after each answered turn and env
    # batch); off, nothing new is remembered (what is kept is still recalled).
    memory_writer: bool = True
    # The local model as one more extraction signal of the memory writer ("auto"; "off" never asks):
    # a background call per user turn that gives way to any prompt input, within the time limit.
    memory_model: str = "off"
    memory_model_timeout_s: float = 8.0
    # The largest file a user may attach (``Engine.attach_file``), in bytes; larger ones are refused.
    attach_max_bytes: int = 2_000_000
    # Summaries of the session, its branches and tasks at three levels (engine/summaries.py),
    # updated in the background once ``summary_every`` new messages wait; off, none is made.
    summaries: bool = True
    summary_every: int = 8
    # Who writes them: "auto" asks the chat model when it is idle (``app.main`` sets it for the
    # app), "off" keeps to the extractive summarizer; either way the extractive one stands in.
    summary_model: str = "off"
    summary_timeout_s: float = 20.0
    summary_quiet_s: float = 2.0  # the model writes a summary only after this long without a call
    # Mechanisms an evaluation closed (``app.core.types.Ablation``: routing, fences, progress,
    # template, env, gate, compression, memory, topic, summaries; "deadlines": recall's channels
    # are waited for past the plan's time limit, so the contexts do not depend on the machine's
    # load) and recall channels switched off by name (e.g. "vector"). The app never sets it.
    ablate: tuple[str, ...] = ()
    # Recall weights an evaluation set in place of the strategy's ((name, value) pairs,
    # ``EngineLab.set_tuning``, ``RecallStrategy.tuned``). The app never sets them.
    tune: tuple[tuple[str, float], ...] = ()
    # A new task's steps (``app.core.engine.agent``): "model" asks the chat model for them as JSON
    # (checked by rules, made by rules when the proposal fails), "rules" makes them by rules
    # alone, "off" runs a task as one stream (its answer is its result).
    task_steps: str = "model"
    # An env event relevant to a branch nobody works on now: "notify" leaves a notice on it,
    # "answer" a short answer by the chat model (at most ``proactive_max_tokens``), "off" nothing.
    proactive: str = "notify"
    proactive_max_tokens: int = 96

    def __post_init__(self) -> None:
        if self.answer_reserve <= 0:
            self.answer_reserve = default_answer_reserve(self.context_size)


def default_answer_reserve(context_size: int) -> int:
    """The answer reserve of a context of ``context_size`` tokens: a quarter, within 256…2048."""
    return max(256, min(2048, context_size // 4))


@dataclass
class EngineContext:
    """Ports, executors, configuration, the context builder and the shared session state of one engine."""

    store: SessionStore
    index: SearchIndex | None
    embedder: Embedder | None
    chat: ChatModel | None
    counter: TokenCounter
    ex: Executors
    config: EngineConfig
    builder: ContextBuilder  # one build: intent, plan, routing, recall, compile
    sessions: dict[str, SessionState] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # message vectors read from the index
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    # (session id, turn id, input message, answer message) once a turn's answer is stored: the
    # memory writer's cue. Slots must return at once (spawn any work).
    answered: Signal[[str, str, Message, Message]] = field(default_factory=lambda: Signal("answered"))
    # History ingested (session id, messages): the topic index and the memory writer read it.
    ingested: Signal[[str, list[Message]]] = field(default_factory=lambda: Signal("ingested"))
    def lock(self, session_id: str) -> asyncio.Lock:
        """The lock that orders one session's turn builds and graph changes."""
        return self._locks.setdefault(session_id, asyncio.Lock())

    async def on_store(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``fn(*args, **kw)`` on the store executor (the one SQLite connection)."""
        return await self.ex.run("store", fn, *args, **kw)

    def usage_recorder(self, session_id: str, turn_id: str | None) -> Callable[[ChatResult], None] | None:
        """What a turn's model call (intent, tool choice) hands ``ChatStream(on_result=...)`` so
        its usage — provider, tokens, latency, cost — is written to ``model_usage`` when it
        finishes; None outside a turn (evaluation builds write nothing)."""
        if turn_id is None:
            return None

        def record(result: ChatResult) -> None:
            usage = result.usage.model_copy(update={"turn_id": turn_id})
            spawn(self.on_store(self.store.add_model_usage, session_id, usage), name=f"usage {usage.stage} {turn_id}")

        return record

    async def on_index(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """``fn(*args, **kw)`` on the index executor (LanceDB queries)."""
        return await self.ex.run("index", fn, *args, **kw)

    async def embed(self, texts: list[str]) -> np.ndarray | None:
        """Embeddings of ``texts`` (rows L2-normalised), or None without an embedder or texts."""
        embedder = self.embedder
        if embedder is None or not texts:
            return None
        return await self.ex.run("embed", embedder.embed, texts)

    async def vectors_for(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The index's vectors of the given message ids (cached; unknown ids are left out)."""
        missing = [i for i in ids if i not in self.vectors]
        if missing and self.index is not None:
            self.vectors.update(await self.on_index(self.index.vectors, missing))
        return {i: self.vectors[i] for i in ids if i in self.vectors}
