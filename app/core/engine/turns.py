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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.context.retrieval import TopicSearch
from app.core.engine.answer_length import answer_params
from app.core.engine.context import EngineContext
from app.core.engine.recovery import AnswerCheckpointer
from app.core.engine.sources import LiveServices, LiveSources, RecordedSources
from app.core.engine.tool_artifacts import tool_artifacts
from app.core.errors import NoRecordError
from app.core.intent.decision import InputReading
from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.detail import Detail
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord
from app.core.pipeline.sources import BuildRequest, BuildSources
from app.core.pipeline.summary_items import Offered
from app.core.ports import ChatMessage, ChatResult, GenerationParams
from app.core.runtime.background import spawn
from app.core.runtime.executors import ChatStream
from app.core.session import versions
from app.core.session.evidence import message_evidence, note_evidence
from app.core.session.graph import NoNodeError
from app.core.session.membership import routed_attrs
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
)

if TYPE_CHECKING:
    from app.core.engine.sessions import SessionService
    from app.core.engine.tasks import TaskService
    from app.core.engine.tools import ToolService


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
    reply: str | None = None  # an answer the app wrote (no model call)
    render: Callable[[ChatResult], str] | None = None  # the answer made from the model's output

    def stop(self) -> None:
        if self.stream is not None:
            self.stream.stop()


@dataclass(frozen=True)
class Attachment:
    """What a stream's hook adds to a turn: writes joining the turn's transaction, and how to
    generate (``params``; ``urgent`` lets the answer cut into a running generation). A hook may
    also ask the model something else than the build's prompt (``messages``, constrained by
    ``json_schema``) and make the answer from its output (``render``: the pieces are not shown,
    the rendered answer is), or answer itself (``reply``: no model call)."""

    persist: Callable[[], None] | None = None
    params: GenerationParams | None = None
    urgent: bool = False
    messages: list[ChatMessage] | None = None
    json_schema: dict[str, Any] | None = None
    render: Callable[[ChatResult], str] | None = None
    reply: str | None = None


@dataclass(frozen=True)
class TurnHooks:
    """How a scheduler stream takes part in ``TurnService.submit_locked``: the task inputs of the
    build (called under the session lock, before it), the attachment (called once the turn's
    node is attached), and what the intent rules read of the text when it was queued."""

    inputs: Callable[[SessionState], TaskInputs]
    attached: Callable[[SessionState, TurnRecord, Message], Attachment]
    reading: InputReading | None = None


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

    def __init__(self, ctx: EngineContext, sessions: SessionService, tasks: TaskService, tools: ToolService, *,
                 topics: TopicSearch, offer: Callable[[str], Offered]) -> None:
        """``topics``: the topic channel's search; ``offer``: the branch summaries a build is offered
        (``MemoryService.topic_search``, ``SummaryService.offer``)."""
        self.ctx, self.sessions, self.tasks, self.tools = ctx, sessions, tasks, tools
        self.reads = LiveServices(ctx, sessions, tasks, tools, topics, offer)  # what live builds read
        self.running: dict[str, TurnRun] = {}  # turns whose answer is not recorded yet

    # ------------------------------------------------------------------ build (no generation)

    def live(self, *, turn: tuple[str, str] | None = None, tasks: TaskInputs | None = None,
             detail: Detail | None = None, kept: Offered | None = None) -> LiveSources:
        """What a build reads now (``engine/sources.py``): a turn's (``turn``: session id, turn id —
        its tools run and its model calls are recorded), with a stream's task stack (``tasks``),
        the detail the user set (``detail``) and the summaries a restored checkpoint kept (``kept``)."""
        return LiveSources(self.reads, turn=turn, given_tasks=tasks, detail=detail, kept=kept)

    def recorded(self, build: BuildRecord, *, summaries: Offered | None = None,
                 detail: Detail | None = None) -> RecordedSources:
        """What a rebuild of ``build`` reads: its observations as recorded, the rest recomputed;
        ``summaries``/``detail`` replace the recorded ones."""
        return RecordedSources(build, self.reads, summaries=summaries, detail=detail)

    async def build(self, state: SessionState, request: BuildRequest,
                    sources: BuildSources | None = None) -> tuple[BuildRecord, StageTiming]:
        """Build the context for ``request`` on ``state`` without generating (turns, evaluation and
        replay use it), reading the rest from ``sources``: the live ones by default (outside a
        turn: no tool runs). The other sessions' messages its recall read become notes of
        ``state`` once the build is done (later builds, and the evidence its context cites, see
        them; a replay's state as of the turn gets them the same way)."""
        record, timing, outside = await self.ctx.builder.build(state, request, sources or self.live())
        for note in outside:
            state.add_note(note)
        return record, timing

    async def rebuild(self, record: TurnRecord, past: SessionState, *, anchor_override: str | None,
                      input_id: str, sources: RecordedSources | None = None) -> tuple[BuildRecord, StageTiming]:
        """A recorded turn's build again on ``past`` (the session as of the turn): its text, time,
        budget, excluded ids and focus as recorded, and what it read from ``sources`` — its own
        record's by default (a detail change passes one with another detail)."""
        b = record.build
        request = BuildRequest(text=b.text, at=b.at, budget=b.budget, input_id=input_id, anchor_override=anchor_override,
                               focus_node=b.routing.get("focus"), focus_chosen=bool(b.routing.get("focus_chosen")),
                               exclude_ids=tuple(b.excluded))
        return await self.build(past, request, sources or self.recorded(b))

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
                            version: Version | None = None, detail: Detail | None = None,
                            author: Author | None = None, kept: Offered | None = None) -> TurnRun:
        """``submit`` for a caller that holds the session lock (the scheduler's streams; ``author``:
        who wrote the input when not the user — the agent running a task's step; ``kept``: the
        branch summaries a restored checkpoint kept, for an input on the branch restored from it).

        An ``anchor_override`` that is no node of this session (one pinned in another session,
        or removed) raises ``NoNodeError`` before anything is recorded, so the input is not lost:
        the caller still has its text."""
        ctx, session_id = self.ctx, state.session_id
        if anchor_override and anchor_override != NEW_ROOT and anchor_override not in state.graph:
            raise NoNodeError("the node to reply from is not in this session: send again to let routing "
                              "choose, or pick a node of this session")
        turn_id, message = await ctx.on_store(lambda: ctx.store.record_user_input(session_id, text, author=author))
        if not state.messages:  # the first input names a session that has no title yet
            await ctx.on_store(ctx.store.title_untitled_session, session_id, title_from(text))
        try:
            request = BuildRequest(
                text, at=message.at, budget=budget or ctx.config.default_budget, input_id=message.message_id,
                anchor_override=anchor_override, focus_node=state.focus_node(), focus_chosen=state.focus_chosen(),
                exclude_ids=tuple(version.excluded if version is not None else versions.put_away_messages(state)),
                reading=hooks.reading if hooks is not None else None)
            sources = self.live(turn=(session_id, turn_id), tasks=hooks.inputs(state) if hooks is not None else None,
                                detail=detail, kept=kept)
            build, timing = await self.build(state, request, sources)
        except Exception:
            await self._build_failed(state, turn_id, message)
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
        run = TurnRun(turn_id, session_id, build, timing, node.node_id, stream, done,
                      reply=attached.reply if attached else None, render=attached.render if attached else None)
        self.running[turn_id] = run
        spawn(self._finish(run, record, message, on_token), name=f"answer {turn_id}")
        if ctx.index is not None:  # before the lock is released: later builds see its vector
            await ctx.ex.run("embed", ctx.index.index_messages, session_id, [message])
        return run

    def _answer_stream(self, state: SessionState, build: BuildRecord, attached: Attachment | None) -> ChatStream | None:
        """The answer's stream: a stream hook's parameters and urgency, else the session's with the
        plan's answer reserve as its length (``answer_length``); None without a model."""
        ctx = self.ctx
        if ctx.chat is None or (attached is not None and attached.reply is not None):
            return None
        params = attached.params if attached and attached.params else answer_params(state, build, ctx.config.generation)
        messages = attached.messages if attached is not None and attached.messages is not None else build.prompt
        return ChatStream(ctx.ex, ctx.chat, messages, stage="answer", params=params,
                          urgent=bool(attached and attached.urgent),
                          json_schema=attached.json_schema if attached is not None else None)

    async def _build_failed(self, state: SessionState, turn_id: str, message: Message) -> None:
        """The input stays recorded; its turn says it failed (never "recorded" forever). It is part
        of the session like any input: in the live state (as a reopened one has it) and in the
        index (as later builds and their replay must both see it)."""
        ctx = self.ctx
        await ctx.on_store(ctx.store.update_turn, turn_id, status="failed")
        state.add_message(message)
        if ctx.index is not None:
            await ctx.ex.run("embed", ctx.index.index_messages, state.session_id, [message])

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
        if run.reply is not None:
            answer_text, finish = run.reply, "stop"
            saver.add(run.reply)
            await saver.finish()
        elif run.stream is not None:
            try:
                async for piece in run.stream:
                    if run.render is None:
                        saver.add(piece)
                if run.render is not None and run.stream.result is not None:
                    saver.add(run.render(run.stream.result))
            finally:
                await saver.finish()
            result = run.stream.result
            assert result is not None
            answer_text, finish = saver.text if run.render is not None else result.text, result.finish_reason
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
