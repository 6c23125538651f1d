"""The engine facade: sessions, turns (record → build → answer → trace), history ingest, replay,
and the canvas's branch actions (``app.core.engine.branches``: re-anchor, focus, inject, node marks).

Everything runs on one event loop; blocking work goes to the named executors (DESIGN.md §3):
``store`` (the one SQLite connection), ``embed`` (the embedder, also LanceDB writes that embed),
``index`` (LanceDB queries), ``llm`` (the chat model). A user's input is committed durably before
anything else happens with it. The UI and the CLI both talk to this class only.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from app.core.context.compiler import Fact, extract_facts
from app.core.context.retrieval import INDEX_CHANNELS, ChannelRun
from app.core.engine.branches import BranchActions, override_spans
from app.core.engine.environment import EnvironmentActions
from app.core.engine.tasks import TaskActions, TurnHooks
from app.core.engine.tools import ToolStore
from app.core.intent.engine import IntentEngine, PrototypeBank
from app.core.intent.llm import INTENT_JSON_SCHEMA, intent_messages
from app.core.intent.model import IntentContext, RunningTask
from app.core.intent.profile import UserProfile
from app.core.pipeline.builder import BuildInputs, ContextBuilder
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord, diff
from app.core.plan.builder import PlanBuilder
from app.core.plan.tools import ToolSpec
from app.core.ports import ChatModel, Embedder, GenerationParams, TokenCounter
from app.core.routing.anchor import SESSION_DEFAULT, AnchorRouter, RoutingWeights
from app.core.runtime.background import spawn
from app.core.runtime.executors import ChatStream, Executors
from app.core.session.state import SessionState
from app.core.tasks.stack import TaskInputs
from app.core.tools.model import ToolRound
from app.core.types import (
    Author,
    AuthorKind,
    ContextBlock,
    EdgeKind,
    EnvEvent,
    Evidence,
    EvidenceSource,
    EvidenceType,
    GraphEdge,
    GraphNode,
    Message,
    NodeKind,
    Ref,
    Role,
    SourceKind,
    utc_now,
)

T = TypeVar("T")


class EngineStore(Protocol):
    """What the engine needs of the system of record (``SqliteStore`` implements it)."""

    def create_session(self, title: str = "", session_id: str | None = None) -> str: ...
    def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    def record_user_input(self, session_id: str, text: str, *, author: Author | None = None, at: str | None = None) -> tuple[str, Message]: ...
    def add_message(self, session_id: str, message: Message) -> Message: ...
    def add_turn(self, session_id: str, turn_id: str, input_message_id: str, **kw: Any) -> None: ...
    def set_turn_answer(self, turn_id: str, message: Message) -> Message: ...
    def update_turn(self, turn_id: str, /, **fields: Any) -> dict[str, Any]: ...
    def get_turn(self, turn_id: str) -> dict[str, Any] | None: ...
    def list_turns(self, session_id: str) -> list[dict[str, Any]]: ...
    def list_messages(self, session_id: str) -> list[Message]: ...
    def load_graph(self, session_id: str, *, include_superseded: bool = False) -> Any: ...
    def save_node(self, session_id: str, node: GraphNode) -> None: ...
    def save_edge(self, session_id: str, edge: GraphEdge) -> None: ...
    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None: ...
    def save_intent(self, turn_id: str, data: dict[str, Any]) -> Any: ...
    def save_plan(self, turn_id: str, data: dict[str, Any]) -> Any: ...
    def add_context_blocks(self, session_id: str, turn_id: str, blocks: Sequence[ContextBlock]) -> Any: ...
    def add_model_usage(self, session_id: str, usage: Any) -> Any: ...
    def add_evidence(self, session_id: str, evidence: Evidence) -> Evidence: ...
    def get_evidence(self, evidence_id: str) -> Evidence | None: ...
    def append_event(self, session_id: str, type: str, payload: dict[str, Any]) -> int: ...
    def list_events(self, session_id: str | None, after_seq: int = 0) -> list[dict[str, Any]]: ...
    def transaction(self) -> Any: ...


class EngineIndex(Protocol):
    """What the engine needs of the search index (``SearchIndex`` implements it)."""

    def search_vector(self, query: Any, k: int = 10, *, session_id: str | None = None, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]: ...
    def search_text(self, query: str, k: int = 10, *, session_id: str | None = None, kinds: Sequence[str] | None = None) -> list[tuple[str, float]]: ...
    def index_messages(self, session_id: str, messages: Sequence[Message]) -> int: ...
    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...


@dataclass
class EngineConfig:
    default_budget: int = 1024
    answer_reserve: int = 256
    context_size: int = 2048
    # The local model's JSON is one more intent signal, asked for only when the fast path is
    # unsure about the mode ("auto") and only within the time limit; "off" never asks.
    llm_intent: str = "auto"
    llm_intent_below: float = 0.35
    llm_intent_timeout_s: float = 2.0
    generation: GenerationParams = field(default_factory=lambda: GenerationParams(max_tokens=256))
    routing: RoutingWeights = SESSION_DEFAULT
    max_streams: int = 2  # concurrent streams per session (Settings.max_concurrent_streams)


@dataclass
class TurnRun:
    """A turn in flight: iterate ``tokens()`` for the answer; ``record`` when done."""

    turn_id: str
    session_id: str
    build: BuildRecord
    timing: StageTiming
    node_id: str
    stream: ChatStream | None
    done: asyncio.Future[TurnRecord]

    def stop(self) -> None:
        if self.stream is not None:
            self.stream.stop()


def _settle_heap() -> None:
    """Move the long-lived session objects out of the collector's sight.

    A loaded session is tens of thousands of objects that live as long as the engine; without
    this, every full collection walks them all and shows up as 50–100 ms spikes in whatever
    stage of a build it interrupts.
    """
    gc.collect()
    gc.freeze()


def message_evidence(view: Any) -> Evidence:
    """The evidence record of a stored message (same id), so blocks and answers can cite it."""
    user = view.role == Role.USER
    return Evidence(
        evidence_id=view.message_id,
        type=EvidenceType.USER_INPUT if user else EvidenceType.LLM_OUTPUT,
        source=EvidenceSource(kind=SourceKind.USER if user else SourceKind.LLM, name=view.speaker),
        content=view.text,
        valid_from=view.at,
        metadata={"turn_id": view.turn_id},
    )


class Engine(BranchActions, EnvironmentActions, TaskActions):
    """One engine per data folder; sessions are loaded on first use and kept in memory."""

    def __init__(
        self,
        *,
        store: EngineStore,
        index: EngineIndex | None,
        embedder: Embedder | None,
        chat: ChatModel | None,
        counter: TokenCounter,
        executors: Executors,
        config: EngineConfig | None = None,
    ) -> None:
        self.store, self.index, self.embedder, self.chat = store, index, embedder, chat
        self.counter = counter
        self.ex = executors
        self.config = config or EngineConfig()
        self.sessions: dict[str, SessionState] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self._locks: dict[str, asyncio.Lock] = {}  # per session: turn builds and graph changes
        self._running: dict[str, TurnRun] = {}  # turns whose answer is not recorded yet
        self._profiles: weakref.WeakKeyDictionary[SessionState, tuple[int, UserProfile]] = weakref.WeakKeyDictionary()
        self._facts: weakref.WeakKeyDictionary[SessionState, tuple[int, tuple[Fact, ...]]] = weakref.WeakKeyDictionary()
        self.builder = ContextBuilder(
            intents=IntentEngine(None),
            planner=PlanBuilder(),
            router=AnchorRouter(self.config.routing),
            counter=counter,
            answer_reserve=self.config.answer_reserve,
            context_size=self.config.context_size,
        )
        self._init_environment()  # tool registry, watched folders, env signals (app.core.engine.environment)
        self._init_tasks()  # task stacks and the stream scheduler (app.core.engine.tasks)

    async def start(self) -> None:
        """Embed the intent prototypes once (on the embed executor)."""
        if self.embedder is not None:
            bank = await self.ex.run("embed", PrototypeBank.from_embed, lambda texts: self.embedder.embed(texts))
            self.builder.intents = IntentEngine(bank)

    async def _blocking(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await self.ex.run("index", fn, *args, **kw)

    # ------------------------------------------------------------------ for the ui and the cli

    async def with_store(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(store, *args)`` run on the store executor; returns its result. For the adapter
        callables a front end is handed (export, import, list sessions), which take the store."""
        return await self.ex.run("store", fn, self.store, *args)

    async def env_events(self, session_id: str) -> list[EnvEvent]:
        """The session's stored environment events, oldest first."""
        store: ToolStore = self.store  # type: ignore[assignment]  # the engine rewrite completes EngineStore
        return await self.ex.run("store", store.list_env_events, session_id)

    @property
    def model_name(self) -> str | None:
        """The chat model's name, None when the engine has no chat model."""
        return self.chat.name if self.chat is not None else None

    # ------------------------------------------------------------------ sessions

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        if session_id is not None and session_id in self.sessions:
            return self.sessions[session_id]
        if session_id is None or await self.ex.run("store", self.store.get_session, session_id) is None:
            session_id = await self.ex.run("store", self.store.create_session, title, session_id)
        messages = await self.ex.run("store", self.store.list_messages, session_id)
        graph = await self.ex.run("store", lambda: self.store.load_graph(session_id, include_superseded=True))
        state = SessionState.load(session_id, messages, graph)  # superseded edges: history only
        await self._load_notes(state)  # env events and memory notes, for recall
        for turn in await self.ex.run("store", self.store.list_turns, session_id):
            if (turn.get("record") or {}).get("build") and turn["turn_id"] in state.turns:
                seq = state.turns[turn["turn_id"]].seq  # the state's own turn order, as as_of uses
                state.override_spans.extend(override_spans(turn["turn_id"], seq, turn["record"]))
        self.sessions[session_id] = state
        _settle_heap()
        return state

    async def _embed(self, texts: list[str]) -> np.ndarray | None:
        if self.embedder is None or not texts:
            return None
        return await self.ex.run("embed", self.embedder.embed, texts)

    async def _vectors_for(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        missing = [i for i in ids if i not in self.vectors]
        if missing and self.index is not None:
            self.vectors.update(await self._blocking(self.index.vectors, missing))
        return {i: self.vectors[i] for i in ids if i in self.vectors}

    def facts(self, state: SessionState) -> tuple[Fact, ...]:
        """Keyed statements of the app user so far (cached per state, extended incrementally)."""
        seen, facts = self._facts.get(state, (0, ()))
        new: list[Fact] = []
        for mid in state.order[seen:]:
            view = state.messages[mid]
            if view.role == Role.USER and view.speaker == Role.USER.value:
                new.extend(extract_facts(view.text, evidence_id=mid, at=view.at, reliability=1.0))
        facts = facts + tuple(new)
        self._facts[state] = (len(state.order), facts)
        return facts

    def profile(self, state: SessionState) -> UserProfile:
        """The user's profile stated so far in this session (prohibitions, permissions, preferences).

        Only the app user's own inputs count (speaker "user"); named participants of imported
        history are not the person at the keyboard. Cached per state and extended incrementally.
        """
        seen, profile = self._profiles.get(state, (0, UserProfile()))
        for mid in state.order[seen:]:
            view = state.messages[mid]
            if view.role == Role.USER and view.speaker == Role.USER.value:
                profile, _ = profile.updated_from(view.text)
        self._profiles[state] = (len(state.order), profile)
        return profile

    # ------------------------------------------------------------------ ingest (history, no generation)

    async def ingest(self, session_id: str, messages: Sequence[Message], *, chain: bool = True) -> int:
        """Store messages as history turns (one turn each), link them along ``continues``, index them."""
        state = await self.open_session(session_id)
        async with self._lock(session_id):
            return await self._ingest(state, messages, chain)

    async def _ingest(self, state: SessionState, messages: Sequence[Message], chain: bool) -> int:
        session_id = state.session_id
        previous = state.turns[state.turn_order[-1]].node_id if (chain and state.turn_order) else None
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []

        def write() -> None:
            with self.store.transaction():
                for m in messages:
                    self.store.add_message(session_id, m)
                    self.store.add_turn(session_id, m.turn_id or m.message_id, m.message_id, status="history", created_at=m.at)
                for n in nodes:
                    self.store.save_node(session_id, n)
                for e in edges:
                    self.store.save_edge(session_id, e)

        for m in messages:
            if m.turn_id is None:
                m.turn_id = m.message_id
            state.add_message(m)
            node = GraphNode(kind=NodeKind.TURN, label=m.content[:40], ref_id=m.turn_id, created_at=m.at)
            state.add_node(node)
            nodes.append(node)
            if previous is not None:
                edge = GraphEdge(src=node.node_id, dst=previous, kind=EdgeKind.CONTINUES, created_at=m.at)
                state.add_edge(edge)
                edges.append(edge)
            previous = node.node_id
        await self.ex.run("store", write)
        if self.index is not None:
            await self.ex.run("embed", self.index.index_messages, session_id, list(messages))
        await self._warm_counts(state, [m.message_id for m in messages])
        _settle_heap()
        return len(messages)

    async def _warm_counts(self, state: SessionState, ids: Sequence[str]) -> None:
        """Count new messages' tokens once, off the build path (the counter caches them)."""
        texts = [state.messages[i].render() for i in ids if i in state.messages]
        await self.ex.run("embed", lambda: [self.counter.count(t) for t in texts])

    # ------------------------------------------------------------------ build (no generation)

    async def build(
        self,
        session_id: str,
        text: str,
        *,
        budget: int | None = None,
        at: str | None = None,
        exclude_ids: Sequence[str] = (),
        anchor_override: str | None = None,
        state: SessionState | None = None,
        recorded_channels: Sequence[ChannelRun] | None = None,
        query_vector: np.ndarray | None = None,
        limits: tuple[int, int] | None = None,
        input_id: str = "input",
        recorded_llm: dict[str, Any] | None = None,
        focus_node: str | None = None,
        focus_chosen: bool = False,
        turn_id: str | None = None,
        tool_specs: Sequence[ToolSpec] | None = None,
        recorded_tools: ToolRound | None = None,
        tasks: TaskInputs | None = None,
    ) -> tuple[BuildRecord, StageTiming]:
        """Build the context for ``text`` without generating (turns, evaluation and replay use it).

        ``focus_node`` is the node the user works on, ``focus_chosen`` whether they chose it
        (``submit`` passes ``SessionState.focus_node()``); see ``BuildInputs``. Tools run only
        for a turn (``turn_id``); ``tool_specs``/``recorded_tools`` replay a recorded build's.
        """
        state = state or await self.open_session(session_id)
        t0 = time.perf_counter()
        if query_vector is None:
            vecs = await self._embed([text])
            query_vector = vecs[0] if vecs is not None else None
        embed_ms = (time.perf_counter() - t0) * 1000
        candidate_ids = [m for tid in state.turn_order[-self.builder.candidate_turns * 2:] for m in state.turns[tid].message_ids]
        vectors = await self._vectors_for(candidate_ids)
        if tasks is None:  # the session's tasks now (a stream's hooks and replay give theirs)
            await self.task_book(session_id)
            tasks = self.task_inputs(session_id)
        llm_output, llm_status = None, "skipped"
        if recorded_llm is not None:
            llm_output, llm_status = recorded_llm.get("output"), recorded_llm.get("status", "skipped")
        elif self.chat is not None and self.config.llm_intent == "auto":
            fast = self.builder.intents.infer(text, IntentContext(
                query_vector=None if query_vector is None else [float(x) for x in query_vector],
                running_tasks=[RunningTask(task_id=t.task_id, name=t.name, status=t.status.value) for t in tasks.running()]))
            if fast.confidence.mode < self.config.llm_intent_below:
                llm_output, llm_status = await self._llm_intent(text)
        specs, tool_step = self._tool_setup(tool_specs, turn_id, recorded_tools)
        inputs = BuildInputs(
            text=text,
            at=at or utc_now(),
            budget=budget or self.config.default_budget,
            query_vector=[float(x) for x in query_vector] if query_vector is not None else None,
            exclude_ids=tuple(exclude_ids),
            focus_node=focus_node,
            focus_chosen=focus_chosen,
            anchor_override=anchor_override,
            profile=self.profile(state),
            facts=self.facts(state),
            overrides=tuple((said, node) for _, said, node in state.overrides),
            input_id=input_id,
            llm_output=llm_output,
            llm_status=llm_status,
            tools=specs,
            tasks=tasks,
        )
        record, timing = await self.builder.build(
            state, inputs, vectors=vectors, search=self.index, run_blocking=self._blocking,
            recorded_channels=recorded_channels, tool_step=tool_step,
            context_size=limits[0] if limits else None, answer_reserve=limits[1] if limits else None,
        )
        record.llm_intent = {"output": llm_output, "status": llm_status}
        timing.embed_ms = embed_ms
        timing.build_ms += embed_ms
        return record, timing

    async def _llm_intent(self, text: str) -> tuple[Any, str]:
        """Ask the chat model for intent JSON within the time limit; never raises."""
        assert self.chat is not None
        stream = ChatStream(self.ex, self.chat, intent_messages(text), stage="intent",
                            params=GenerationParams(max_tokens=160, temperature=0.0), json_schema=INTENT_JSON_SCHEMA)
        try:
            result = await asyncio.wait_for(stream.wait(), self.config.llm_intent_timeout_s)
        except asyncio.TimeoutError:
            stream.stop()  # a call still queued behind an answer starts and stops at once
            return None, "late"
        except Exception as exc:  # noqa: BLE001 - the LLM signal only ever degrades
            return None, "error" if str(exc) else "error"
        if result.finish_reason not in ("stop", "length") or result.parsed is None:
            return result.text, "invalid"
        return result.parsed, "ok"

    # ------------------------------------------------------------------ turns

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        budget: int | None = None,
        anchor_override: str | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> TurnRun:
        """Record the input durably, build its context, attach it to the graph, start the answer.

        Returns at once with the build done and the answer streaming; ``await run.done`` for the
        final ``TurnRecord`` (also stored with the turn). The build gets the session's focus (the
        user's choice, else the latest turn's node). ``anchor_override`` may be ``NEW_ROOT``.
        """
        state = await self.open_session(session_id)
        async with self._lock(session_id):  # turn order, build and graph stay in step with branch actions
            return await self._submit(state, text, budget, anchor_override, on_token)

    async def _submit(self, state: SessionState, text: str, budget: int | None, anchor_override: str | None,
                      on_token: Callable[[str], None] | None, hooks: TurnHooks | None = None) -> TurnRun:
        session_id = state.session_id
        turn_id, message = await self.ex.run("store", self.store.record_user_input, session_id, text)
        build, timing = await self.build(
            session_id, text, budget=budget, at=message.at, anchor_override=anchor_override, state=state,
            input_id=message.message_id, focus_node=state.focus_node(), focus_chosen=state.focus_chosen(),
            turn_id=turn_id, tasks=hooks.inputs(state) if hooks is not None else None,
        )
        state.add_message(message)
        if anchor_override:  # the user's correction: a signal for later routing (not NEW_ROOT)
            state.add_override(turn_id, state.turns[turn_id].seq, text, anchor_override)
        node = GraphNode(kind=NodeKind.TURN, label=text[:40], ref_id=turn_id, created_at=message.at,
                         attrs={"ambiguous": build.routing.get("ambiguous", False)})
        state.add_node(node)
        edge = None
        if build.anchor_node is not None:
            edge = GraphEdge(src=node.node_id, dst=build.anchor_node, kind=EdgeKind.CONTINUES, created_at=message.at)
            state.add_edge(edge)
        record = TurnRecord(turn_id=turn_id, session_id=session_id, node_id=node.node_id, build=build, timing=timing)
        # a scheduler stream's path (task, interruption): written with the turn, no await before
        attached = hooks.attached(state, record, message) if hooks is not None else None

        cited = {r.evidence_id for b in build.context.blocks for r in b.refs}
        sources = [state.messages[i] for i in sorted(cited) if i in state.messages]  # the input included

        def persist_build() -> None:
            with self.store.transaction():
                for view in sources:  # messages become evidences the first time a context cites them
                    if self.store.get_evidence(view.message_id) is None:
                        self.store.add_evidence(session_id, message_evidence(view))
                self.store.save_node(session_id, node)
                if edge is not None:
                    self.store.save_edge(session_id, edge)
                self.store.save_intent(turn_id, build.intent)
                self.store.save_plan(turn_id, build.plan)
                self.store.add_context_blocks(
                    session_id, turn_id,
                    [b.model_copy(update={"block_id": f"{turn_id}:{b.block_id}", "turn_id": turn_id}) for b in build.context.blocks],
                )
                if attached is not None and attached.persist is not None:
                    attached.persist()
                self.store.update_turn(turn_id, anchor_node_id=build.anchor_node, status="building", record=record.model_dump(mode="json"))

        await self.ex.run("store", persist_build)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[TurnRecord] = loop.create_future()
        stream = None
        if self.chat is not None:
            stream = ChatStream(self.ex, self.chat, build.prompt, stage="answer",
                                params=attached.params if attached and attached.params else self.config.generation,
                                urgent=bool(attached and attached.urgent))
        run = TurnRun(turn_id, session_id, build, timing, node.node_id, stream, done)
        self._running[turn_id] = run
        spawn(self._finish(run, record, message, on_token), name=f"answer {turn_id}")
        if self.index is not None:  # before the lock is released: later builds see its vector
            await self.ex.run("embed", self.index.index_messages, session_id, [message])
        return run

    async def _finish(self, run: TurnRun, record: TurnRecord, message: Message, on_token: Callable[[str], None] | None) -> None:
        try:
            state = self.sessions[run.session_id]
            answer_text, usage, finish = "", None, "no model"
            if run.stream is not None:
                async for piece in run.stream:
                    if on_token is not None:
                        on_token(piece)
                result = run.stream.result
                assert result is not None
                answer_text, usage, finish = result.text, result.usage.model_copy(update={"turn_id": run.turn_id}), result.finish_reason
            refs = [Ref(evidence_id=e) for e in run.build.context.source_ids()]
            answer = Message(role=Role.ASSISTANT, content=answer_text, turn_id=run.turn_id,
                             author=Author(kind=AuthorKind.AGENT, id="assistant"), refs=refs)
            record.output, record.finish_reason, record.answer_message_id = answer_text, finish, answer.message_id
            if usage is not None:
                record.usage = usage.model_dump(mode="json")
                record.model, record.params = usage.model, usage.params
                record.timing.first_token_ms = usage.first_token_latency_ms
                record.timing.answer_ms = usage.latency_ms

            def persist_answer() -> None:
                with self.store.transaction():
                    self.store.set_turn_answer(run.turn_id, answer)
                    if usage is not None:
                        self.store.add_model_usage(run.session_id, usage)
                    self.store.update_turn(run.turn_id, status="answered" if finish != "error" else "failed", record=record.model_dump(mode="json"))

            await self.ex.run("store", persist_answer)
            if self.index is not None:  # indexed before any build can see it (replay sees the same)
                await self.ex.run("embed", self.index.index_messages, run.session_id, [answer])
            async with self._lock(run.session_id):  # between builds, so as_of knows what a build saw
                state.add_message(answer)
            await self._warm_counts(state, [message.message_id, answer.message_id])
            run.done.set_result(record)
        except Exception as exc:  # the turn is recorded; the failure is reported on the future
            if not run.done.done():
                run.done.set_exception(exc)
        finally:
            self._running.pop(run.turn_id, None)

    # ------------------------------------------------------------------ inspection and replay

    async def turn_record(self, turn_id: str) -> TurnRecord:
        row = await self.ex.run("store", self.store.get_turn, turn_id)
        if row is None or not row.get("record"):
            raise KeyError(f"no recorded turn {turn_id!r}")
        return TurnRecord.model_validate(row["record"])

    async def replay(self, turn_id: str) -> list[str]:
        """Rebuild a turn's plan and context from the stored state as it was; return differences.

        Everything is recomputed from SQLite (the session as of the turn, the profile, intent,
        plan, routing, the structured/graph/recent channels, fusion, compilation); the index
        channels (vector, full text, memory) are fed their recorded hits, since the index is an
        observation of the outside that later turns change. So are the recorded focus and LLM intent.
        """
        record = await self.turn_record(turn_id)
        full = await self.open_session(record.session_id)
        past = full.as_of(turn_id)
        routing = record.build.routing
        mids = full.turns[turn_id].message_ids
        replayed, _ = await self.build(
            record.session_id, record.build.text, budget=record.build.budget, at=record.build.at,
            anchor_override=routing.get("override"), state=past,
            recorded_channels=[run for run in record.build.recall.channels if run.channel in INDEX_CHANNELS],
            limits=(record.build.plan["budget"]["context_size"], record.build.plan["budget"]["answer_reserve"]),
            recorded_llm=record.build.llm_intent, focus_node=routing.get("focus"),
            focus_chosen=bool(routing.get("focus_chosen")), input_id=mids[0] if mids else "input",
            tool_specs=record.build.tool_specs, recorded_tools=record.build.tools,
            tasks=TaskInputs.model_validate(record.build.tasks),
        )
        if "focus" not in routing:  # recorded before builds had a focus
            replayed.routing.pop("focus", None)
            replayed.routing.pop("focus_chosen", None)
        return diff(record.build.comparable(), replayed.comparable())

    async def close(self) -> None:
        """Stop the scheduler's streams, let running answers finish their bookkeeping, then stop
        the executors."""
        await self._close_streams()
        self.ex.shutdown(wait=True)
