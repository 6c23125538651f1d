"""Turns: build a context (no generation), submit an input (record → build → attach → answer),
finish the answer, read a turn's record and replay it.

A user's input is committed durably before anything else happens with it. ``submit`` returns as
soon as the build is attached to the graph, with the answer streaming (``TurnRun``); the answer's
bookkeeping (``_finish``) runs in the background and resolves ``TurnRun.done``. A scheduler stream
(``app.core.engine.streams``) passes ``TurnHooks`` so its task stack joins the build and its path
(task, interruption) joins the turn's transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from app.core.engine.context import EngineContext
from app.core.engine.recorded import Recorded
from app.core.engine.recovery import AnswerCheckpointer
from app.core.engine.tool_artifacts import tool_artifacts
from app.core.errors import NoRecordError
from app.core.intent.llm import INTENT_JSON_SCHEMA, intent_messages
from app.core.intent.model import IntentContext, RunningTask
from app.core.pipeline.builder import NEW_ROOT, BuildInputs
from app.core.pipeline.detail import Detail
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord
from app.core.ports import GenerationParams
from app.core.runtime.background import spawn
from app.core.runtime.executors import ChatStream
from app.core.session import versions
from app.core.session.evidence import message_evidence, note_evidence
from app.core.session.graph import NoNodeError
from app.core.session.membership import RoutedShares, routed_attrs
from app.core.session.state import SessionState
from app.core.session.titles import title_from
from app.core.session.versions import Version
from app.core.tasks.stack import TaskInputs
from app.core.types import (
    Author,
    AuthorKind,
    EdgeKind,
    GraphEdge,
    GraphNode,
    Message,
    NodeKind,
    Ref,
    Role,
    json_diff,
    utc_now,
)

if TYPE_CHECKING:
    from app.core.engine.sessions import SessionService
    from app.core.engine.tasks import TaskService
    from app.core.engine.tools import ToolService


LLM_INTENT_CHARS = 2000  # of an input shown to the model for its intent JSON


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


@dataclass(frozen=True)
class Attachment:
    """What a stream's hook adds to a turn: writes joining the turn's transaction, and how to
    generate (``params``; ``urgent`` lets the answer cut into a running generation)."""

    persist: Callable[[], None] | None = None
    params: GenerationParams | None = None
    urgent: bool = False


@dataclass(frozen=True)
class TurnHooks:
    """How a scheduler stream takes part in ``TurnService.submit_locked``: the task inputs of the
    build (called under the session lock, before it) and the attachment (called once the turn's
    node is attached)."""

    inputs: Callable[[SessionState], TaskInputs]
    attached: Callable[[SessionState, TurnRecord, Message], Attachment]


def write_cited(store: Any, state: SessionState, build: BuildRecord) -> None:
    """Make the messages and memories ``build``'s context cites evidences, the first time a
    context cites them (inside the caller's transaction, on the store thread)."""
    cited = sorted({r.evidence_id for b in build.context.blocks for r in b.refs})
    for view in (state.messages[i] for i in cited if i in state.messages):
        if store.get_evidence(view.message_id) is None:
            store.add_evidence(state.session_id, message_evidence(view))
    for note in (state.notes[i] for i in cited if i in state.notes):
        if note.kind != "env" and store.get_evidence(note.note_id) is None:
            store.add_evidence(state.session_id, note_evidence(note))


def again(state: SessionState, node_id: str) -> tuple[str, str, Version]:
    """The text, anchor override and ``Version`` that answer ``node_id``'s input again."""
    text, parent, version = versions.answer_again(state, node_id)
    return text, parent or NEW_ROOT, version


class TurnService:
    """Builds, submits, finishes, reads and replays turns."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, tasks: TaskService, tools: ToolService) -> None:
        self.ctx, self.sessions, self.tasks, self.tools = ctx, sessions, tasks, tools
        self.running: dict[str, TurnRun] = {}  # turns whose answer is not recorded yet

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
        query_vector: np.ndarray | None = None,
        limits: tuple[int, int] | None = None,
        input_id: str = "input",
        focus_node: str | None = None,
        focus_chosen: bool = False,
        turn_id: str | None = None,
        tasks: TaskInputs | None = None,
        recorded: Recorded | None = None, detail: Detail | None = None, routed: RoutedShares | None = None,
    ) -> tuple[BuildRecord, StageTiming]:
        """Build the context for ``text`` without generating (turns, evaluation and replay use it).

        ``focus_node`` is the node the user works on, ``focus_chosen`` whether they chose it (``submit``
        passes ``SessionState.focus_node()``); see ``BuildInputs``. Tools run only for a turn (``turn_id``);
        ``recorded`` feeds a recorded build's observations back; ``routed``: an outside router's shares."""
        ctx, state = self.ctx, state or await self.sessions.open(session_id)
        limits = limits or self._session_limits(state)
        t0 = time.perf_counter()
        if query_vector is None:
            vecs = await ctx.embed([text])
            query_vector = vecs[0] if vecs is not None else None
        embed_ms = (time.perf_counter() - t0) * 1000
        turns = state.turn_order[-ctx.builder.candidate_turns * 2:]
        vectors = await ctx.vectors_for([m for tid in turns for m in state.turns[tid].message_ids])
        tasks = await self._tasks_seen(session_id, tasks, recorded)
        qv = None if query_vector is None else [float(x) for x in query_vector]
        llm_output, llm_status = await self._llm_signal(text, qv, tasks, recorded, (session_id, turn_id))
        specs, tool_step, signals = await self.tools.prepare(session_id, qv, turn_id, recorded)
        inputs = BuildInputs(
            text=text, at=at or utc_now(), budget=budget or ctx.config.default_budget, query_vector=qv,
            exclude_ids=tuple(exclude_ids), focus_node=focus_node, focus_chosen=focus_chosen,
            anchor_override=anchor_override, profile=self.sessions.profile(state), facts=self.sessions.facts(state),
            overrides=tuple((said, node) for _, said, node in state.overrides), input_id=input_id,
            llm_output=llm_output, llm_status=llm_status, tools=specs, tool_signals=signals, tasks=tasks,
            system_prompt=recorded.system_prompt if recorded else state.generation.system_prompt,
            other_sessions=recorded.other_sessions if recorded else self.sessions.other_sessions(state),
            outside=partial(self.sessions.outside_notes, state), topics=ctx.topic_search, ablate=ctx.config.ablate,
            summaries=recorded.summaries if recorded else ctx.summary_offer(session_id),
            detail=recorded.detail if recorded else detail or Detail(), routed=routed,
        )
        record, timing = await ctx.builder.build(
            state, inputs, vectors=vectors, search=ctx.index, run_blocking=ctx.on_index,
            recorded_channels=recorded.channels if recorded else None, tool_step=tool_step,
            context_size=limits[0] if limits else None, answer_reserve=limits[1] if limits else None,
        )
        record.llm_intent = {"output": llm_output, "status": llm_status}
        record.excluded = list(exclude_ids)
        timing.embed_ms = embed_ms
        timing.build_ms += embed_ms
        return record, timing

    async def _tasks_seen(self, session_id: str, tasks: TaskInputs | None, recorded: Recorded | None) -> TaskInputs:
        """The task stack a build sees: as recorded (replay), as given (a stream's hooks), else now."""
        if recorded is not None:
            return recorded.tasks
        if tasks is None:
            await self.tasks.book(session_id)
            tasks = self.tasks.inputs(session_id)
        return tasks

    def _session_limits(self, state: SessionState) -> tuple[int, int] | None:
        """(context size, answer reserve) when the session sets its own answer length, which its
        contexts then leave room for (at most half the context); None keeps the builder's."""
        if not state.generation.max_tokens:
            return None
        size = self.ctx.builder.context_size
        return size, min(state.generation.max_tokens, size // 2)

    async def _llm_signal(self, text: str, query_vector: list[float] | None, tasks: TaskInputs,
                          recorded: Recorded | None, turn: tuple[str, str | None]) -> tuple[Any, str]:
        """The LLM intent signal: the recorded one, or asked for when the fast path is unsure."""
        ctx = self.ctx
        if recorded is not None:
            llm = recorded.llm or {}
            return llm.get("output"), llm.get("status", "skipped")
        if ctx.chat is None or ctx.config.llm_intent != "auto":
            return None, "skipped"
        running = [RunningTask(task_id=t.task_id, name=t.name, status=t.status.value) for t in tasks.running()]
        fast = ctx.builder.intents.infer(text, IntentContext(query_vector=query_vector, running_tasks=running))
        if fast.confidence.mode >= ctx.config.llm_intent_below:
            return None, "skipped"
        return await self._llm_intent(text, turn)

    async def _llm_intent(self, text: str, turn: tuple[str, str | None]) -> tuple[Any, str]:
        """Ask the chat model for intent JSON within the time limit; never raises. ``turn`` is
        (session id, turn id): a turn's call is recorded in model_usage."""
        ctx = self.ctx
        assert ctx.chat is not None
        # The head of a long paste says what it is for; the whole of it would not fit the model.
        stream = ChatStream(ctx.ex, ctx.chat, intent_messages(text[:LLM_INTENT_CHARS]), stage="intent",
                            params=GenerationParams(max_tokens=160, temperature=0.0), json_schema=INTENT_JSON_SCHEMA,
                            on_result=ctx.usage_recorder(*turn))
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

    async def rebuild(self, record: TurnRecord, past: SessionState, *, anchor_override: str | None,
                      input_id: str, recorded: Recorded | None = None) -> tuple[BuildRecord, StageTiming]:
        """A recorded turn's build again on ``past`` (the session as of the turn): its text, time,
        budget and model limits, focus and observations of the outside as recorded (``recorded``
        replaces them: a detail change sets another detail)."""
        b = record.build
        return await self.build(
            record.session_id, b.text, budget=b.budget, at=b.at, anchor_override=anchor_override, state=past,
            exclude_ids=b.excluded,
            limits=(b.plan["budget"]["context_size"], b.plan["budget"]["answer_reserve"]),
            focus_node=b.routing.get("focus"), focus_chosen=bool(b.routing.get("focus_chosen")), input_id=input_id,
            recorded=recorded or Recorded.of(b),
        )

    # ------------------------------------------------------------------ turns

    async def submit(self, session_id: str, text: str, *, budget: int | None = None,
                     anchor_override: str | None = None, on_token: Callable[[str], None] | None = None,
                     version: Version | None = None) -> TurnRun:
        """Record the input durably, build its context, attach it to the graph, start the answer.

        Returns at once with the build done and the answer streaming; ``await run.done`` for the
        final ``TurnRecord`` (also stored with the turn). The build gets the session's focus (the
        user's choice, else the latest turn's node). ``anchor_override`` may be ``NEW_ROOT``.
        ``version`` makes the turn another version of an earlier one (``answer_again``).
        """
        state = await self.sessions.open(session_id)
        async with self.ctx.lock(session_id):  # turn order, build and graph stay in step with branch actions
            return await self.submit_locked(state, text, budget, anchor_override, on_token, version=version)

    async def answer_again(self, session_id: str, node_id: str, *, budget: int | None = None,
                           on_token: Callable[[str], None] | None = None) -> TurnRun:
        """Regenerate: answer ``node_id``'s input again as a new version of its turn, continuing the
        same node, shown in place of the others (``app.core.session.versions``), with the
        progressive detail the user set on its context."""
        state = await self.sessions.open(session_id)
        async with self.ctx.lock(session_id):
            text, anchor, version = again(state, node_id)
            detail = await self.detail_of(state.graph.node(node_id).ref_id)
            return await self.submit_locked(state, text, budget, anchor, on_token, version=version, detail=detail)

    async def detail_of(self, turn_id: str | None) -> Detail | None:
        """The progressive detail set on a turn's context (None: none, or no recorded build)."""
        try:
            return Detail.model_validate((await self.record(turn_id)).build.detail) if turn_id else None
        except NoRecordError:
            return None

    async def submit_locked(self, state: SessionState, text: str, budget: int | None, anchor_override: str | None,
                            on_token: Callable[[str], None] | None, hooks: TurnHooks | None = None,
                            version: Version | None = None, detail: Detail | None = None) -> TurnRun:
        """``submit`` for a caller that holds the session lock (the scheduler's streams).

        An ``anchor_override`` that is no node of this session (one pinned in another session,
        or removed) raises ``NoNodeError`` before anything is recorded, so the input is not lost:
        the caller still has its text."""
        ctx, session_id = self.ctx, state.session_id
        if anchor_override and anchor_override != NEW_ROOT and anchor_override not in state.graph:
            raise NoNodeError("the node to reply from is not in this session: send again to let routing "
                              "choose, or pick a node of this session")
        turn_id, message = await ctx.on_store(ctx.store.record_user_input, session_id, text)
        if not state.messages:  # the first input names a session that has no title yet
            await ctx.on_store(ctx.store.title_untitled_session, session_id, title_from(text))
        try:
            build, timing = await self.build(
                session_id, text, budget=budget, at=message.at, anchor_override=anchor_override, state=state,
                input_id=message.message_id, focus_node=state.focus_node(), focus_chosen=state.focus_chosen(),
                turn_id=turn_id, tasks=hooks.inputs(state) if hooks is not None else None, detail=detail,
                exclude_ids=version.excluded if version is not None else versions.put_away_messages(state),
            )
        except Exception:  # the input stays recorded; its turn says it failed (never "recorded" forever)
            await ctx.on_store(ctx.store.update_turn, turn_id, status="failed")
            # It is part of the session like any input: in the live state (as a reopened one has
            # it) and in the index (as later builds and their replay must both see it).
            state.add_message(message)
            if ctx.index is not None:
                await ctx.ex.run("embed", ctx.index.index_messages, session_id, [message])
            raise
        state.add_message(message)
        if anchor_override and version is None:  # the user's correction: a signal for later routing (not NEW_ROOT)
            state.add_override(turn_id, state.turns[turn_id].seq, text, anchor_override)
        node = GraphNode(kind=NodeKind.TURN, label=text[:40], ref_id=turn_id, created_at=message.at,
                         attrs={"ambiguous": build.routing.get("ambiguous", False), **versions.attrs(version)})
        state.add_node(node)
        edge = None
        if build.anchor_node is not None:
            edge = GraphEdge(src=node.node_id, dst=build.anchor_node, kind=EdgeKind.CONTINUES, created_at=message.at,
                             attrs=routed_attrs(build.routing))
            state.add_edge(edge)
        record = TurnRecord(turn_id=turn_id, session_id=session_id, node_id=node.node_id, build=build, timing=timing)
        # a scheduler stream's path (task, interruption): written with the turn, no await before
        attached = hooks.attached(state, record, message) if hooks is not None else None
        linked = self.tasks.link_turn(session_id, turn_id, node.node_id)  # tasks its tool calls made
        results = tool_artifacts(state, build, node, ctx.store)  # tool servers' results on the canvas
        shown = versions.show_only(state, node.node_id, ctx.store) if version is not None else None
        await ctx.on_store(self._persist_build, state, record, node, edge, [attached, linked, results, shown])
        stream = self._answer_stream(state, build, attached)
        done: asyncio.Future[TurnRecord] = asyncio.get_running_loop().create_future()
        run = TurnRun(turn_id, session_id, build, timing, node.node_id, stream, done)
        self.running[turn_id] = run
        spawn(self._finish(run, record, message, on_token), name=f"answer {turn_id}")
        if ctx.index is not None:  # before the lock is released: later builds see its vector
            await ctx.ex.run("embed", ctx.index.index_messages, session_id, [message])
        return run

    def _answer_stream(self, state: SessionState, build: BuildRecord, attached: Attachment | None) -> ChatStream | None:
        """The answer's stream: a stream hook's parameters and urgency, else the session's; None without a model."""
        ctx = self.ctx
        if ctx.chat is None:
            return None
        params = attached.params if attached and attached.params else state.generation.params(ctx.config.generation)
        return ChatStream(ctx.ex, ctx.chat, build.prompt, stage="answer", params=params,
                          urgent=bool(attached and attached.urgent))

    def _persist_build(self, state: SessionState, record: TurnRecord, node: GraphNode, edge: GraphEdge | None,
                       more: Sequence[Attachment | Callable[[], None] | None]) -> None:
        """Write a built turn in one transaction (on the store thread): the messages its context
        cites as evidences, its node and edge, intent, plan, blocks, ``more`` writes and its record."""
        store, build, session_id, turn_id = self.ctx.store, record.build, record.session_id, record.turn_id
        with store.transaction():
            write_cited(store, state, build)  # the input included
            store.save_node(session_id, node)
            if edge is not None:
                store.save_edge(session_id, edge)
            store.save_intent(turn_id, build.intent)
            store.save_plan(turn_id, build.plan)
            store.add_context_blocks(session_id, turn_id, [
                b.model_copy(update={"block_id": f"{turn_id}:{b.block_id}", "turn_id": turn_id})
                for b in build.context.blocks])
            for write in more:
                persist = write.persist if isinstance(write, Attachment) else write
                if persist is not None:
                    persist()
            store.update_turn(turn_id, anchor_node_id=build.anchor_node, status="building",
                              record=record.model_dump(mode="json"))

    async def _finish(self, run: TurnRun, record: TurnRecord, message: Message,
                      on_token: Callable[[str], None] | None) -> None:
        """Stream the answer, record it with its usage, index it, and resolve ``run.done``. When
        the model fails mid-answer the turn is recorded as failed, with what streamed before."""
        ctx = self.ctx
        saver = AnswerCheckpointer(ctx, run.turn_id, ctx.config.checkpoint_s, on_token)
        try:
            state = ctx.sessions[run.session_id]
            failure: Exception | None = None
            answer: Message | None
            try:
                answer = await self._answer(run, record, saver)
            except Exception as exc:  # noqa: BLE001 - recorded below, then reported on the future
                failure, answer = exc, self._failed(run, record, saver.text, exc)
            # Stored, indexed and added between builds, under the session lock: the store's message
            # order is then the order the live state had, which ``as_of`` (replay) and a reopened
            # session both follow, however the streams' answers interleave.
            async with ctx.lock(run.session_id):
                if failure is not None:
                    await ctx.on_store(self._persist_failure, run, record, answer)
                else:
                    assert answer is not None
                    await ctx.on_store(self._persist_answer, run, record, answer)
                if answer is not None:
                    if ctx.index is not None:  # indexed before any build can see it (replay sees the same)
                        await ctx.ex.run("embed", ctx.index.index_messages, run.session_id, [answer])
                    state.add_message(answer)
            if answer is not None:
                await self.sessions.warm_counts(state, [message.message_id, answer.message_id])
            if failure is None and answer is not None:
                ctx.answered.emit(run.session_id, run.turn_id, message, answer)
            if failure is not None:
                raise failure
            run.done.set_result(record)
        except Exception as exc:  # the turn is recorded; the failure is reported on the future
            if not run.done.done():
                run.done.set_exception(exc)
        finally:
            self.running.pop(run.turn_id, None)

    async def _answer(self, run: TurnRun, record: TurnRecord, saver: AnswerCheckpointer) -> Message:
        """Stream the answer into ``record`` (text, finish, usage, timings) through ``saver``, which
        checkpoints each piece before it is shown; return its message."""
        answer_text, finish = "", "no model"
        if run.stream is not None:
            try:
                async for piece in run.stream:
                    saver.add(piece)
            finally:
                await saver.finish()
            result = run.stream.result
            assert result is not None
            answer_text, finish = result.text, result.finish_reason
            usage = result.usage.model_copy(update={"turn_id": run.turn_id})
            record.usage = usage.model_dump(mode="json")
            record.model, record.params = usage.model, usage.params
            record.timing.first_token_ms = usage.first_token_latency_ms
            record.timing.answer_ms = usage.latency_ms
        refs = [Ref(evidence_id=e) for e in run.build.context.source_ids()]
        answer = Message(role=Role.ASSISTANT, content=answer_text, turn_id=run.turn_id,
                         author=Author(kind=AuthorKind.AGENT, id="assistant"), refs=refs)
        record.output, record.finish_reason, record.answer_message_id = answer_text, finish, answer.message_id
        return answer

    @staticmethod
    def _failed(run: TurnRun, record: TurnRecord, partial: str, error: BaseException) -> Message | None:
        """Fill ``record`` for an answer that failed with ``error`` after streaming ``partial``;
        return the partial answer's message (None when nothing streamed)."""
        reason = " ".join(str(error).split()) or type(error).__name__
        record.output, record.finish_reason = partial, "error"
        record.usage = {**record.usage, "status": "error", "error": reason}
        if not partial:
            return None
        answer = Message(role=Role.ASSISTANT, content=partial, turn_id=run.turn_id,
                         author=Author(kind=AuthorKind.AGENT, id="assistant"),
                         refs=[Ref(evidence_id=e) for e in run.build.context.source_ids()])
        record.answer_message_id = answer.message_id
        return answer

    def _persist_failure(self, run: TurnRun, record: TurnRecord, answer: Message | None) -> None:
        store = self.ctx.store
        with store.transaction():
            if answer is not None:
                store.set_turn_answer(run.turn_id, answer)
            store.update_turn(run.turn_id, status="failed", record=record.model_dump(mode="json"))

    def _persist_answer(self, run: TurnRun, record: TurnRecord, answer: Message) -> None:
        store = self.ctx.store
        with store.transaction():
            store.set_turn_answer(run.turn_id, answer)
            if run.stream is not None and run.stream.result is not None:
                store.add_model_usage(run.session_id, run.stream.result.usage.model_copy(update={"turn_id": run.turn_id}))
            store.update_turn(run.turn_id, status="answered" if record.finish_reason != "error" else "failed",
                              record=record.model_dump(mode="json"))

    # ------------------------------------------------------------------ inspection and replay

    async def record(self, turn_id: str) -> TurnRecord:
        """The turn's record as stored (its latest revision); ``NoRecordError`` if it has none."""
        row = await self.ctx.on_store(self.ctx.store.get_turn, turn_id)
        if row is None or not row.get("record"):
            raise NoRecordError(f"no recorded turn {turn_id!r}")
        return TurnRecord.model_validate(row["record"])

    async def replay(self, turn_id: str) -> list[str]:
        """Rebuild a turn's plan and context from the stored state as it was; return differences.

        Everything is recomputed from SQLite (the session as of the turn, the profile, intent,
        plan, routing, the structured/graph/recent channels, fusion, compilation); the index
        channels (vector, full text, memory) are fed their recorded hits, since the index is an
        observation of the outside that later turns change. So are the recorded focus and LLM intent.
        """
        record = await self.record(turn_id)
        full = await self.sessions.open(record.session_id)
        mids = full.turns[turn_id].message_ids
        replayed, _ = await self.rebuild(record, full.as_of(turn_id), anchor_override=record.build.routing.get("override"),
                                         input_id=mids[0] if mids else "input")
        if "focus" not in record.build.routing:  # recorded before builds had a focus
            replayed.routing.pop("focus", None)
            replayed.routing.pop("focus_chosen", None)
        if record.build.input is None:  # recorded before the input was charged against the budget
            replayed.input = None
        return json_diff(record.build.comparable(), replayed.comparable())
