"""The engine's side of the stream scheduler: ``EngineStreams`` is the ``StreamHost`` the
scheduler (``app.core.runtime.scheduler``) runs its streams on.

A stream's input is recorded and built like any turn (``TurnService.submit_locked``) with hooks
that add the task stack to its build and, once the build has chosen the path, write what the
path adds: a task frame with its node and ``spawned`` edges (``task``), ``references``/``resolves``
edges to the running tasks and snapshots of their output (``interrupt``), or nothing (``qa``).
Task streams show progress on their node and pop (or fail) their task when the answer ends.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from app.core.engine.answer_length import answer_params
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.tasks import TaskBook, TaskService
from app.core.engine.turns import Attachment, TurnHooks, TurnRun, TurnService, again
from app.core.intent.decision import InputReading
from app.core.intent.model import IntentContext, RunningTask
from app.core.pipeline.record import TurnRecord
from app.core.runtime.background import spawn
from app.core.runtime.scheduler import (
    INPUT_WITHDRAWN,
    SessionScheduler,
    StreamConfig,
    StreamHandle,
    StreamRuntime,
    StreamStopped,
    pending_inputs,
)
from app.core.session import versions
from app.core.session.state import SessionState
from app.core.tasks.stack import FINAL, OPEN, StackDecision, TaskInputs, count_steps, summarize_result
from app.core.text.quoting import quote_label
from app.core.types import (
    EdgeKind,
    Evidence,
    EvidenceSource,
    EvidenceType,
    GraphEdge,
    GraphNode,
    Message,
    NodeKind,
    SourceKind,
    Task,
    TaskStatus,
    new_id,
)

_STOP_CONTROLS = frozenset({"stop", "cancel"})
Write = Callable[[], None]


class EngineStreams:
    """Runs the scheduler's streams as turns; owns the ``StreamRuntime``."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, turns: TurnService, tasks: TaskService,
                 config: StreamConfig | None = None) -> None:
        self.ctx, self.sessions, self.turns, self.tasks = ctx, sessions, turns, tasks
        self.runtime = StreamRuntime(self, limit=ctx.config.max_streams, config=config)
        # What the intent rules read of each queued input (``predict_kind``), for its build.
        self._readings: weakref.WeakKeyDictionary[StreamHandle, InputReading] = weakref.WeakKeyDictionary()
        tasks.task_updated.connect(self._on_task_updated)

    def _on_task_updated(self, session_id: str, task: Task) -> None:
        self.runtime.session(session_id).task_updated.emit(task)

    def scheduler(self, session_id: str) -> SessionScheduler:
        """The session's stream scheduler (created on first use): submit inputs, stop, reprioritise."""
        return self.runtime.session(session_id)

    async def resume_inputs(self, session_id: str) -> list[StreamHandle]:
        """Queue again the inputs that were waiting when the app last stopped (see
        ``scheduler.pending_inputs``); each is withdrawn under its old stream id first."""
        ctx = self.ctx
        events = await ctx.on_store(ctx.store.list_events, session_id)
        scheduler = self.scheduler(session_id)
        handles = []
        for item in pending_inputs(events):
            await ctx.on_store(ctx.store.append_event, session_id, INPUT_WITHDRAWN,
                               {"stream_id": item["stream_id"], "status": "resubmitted", "reason": "the app stopped"})
            handles.append(scheduler.submit(item["text"], anchor_override=item.get("anchor_override"),
                                            budget=item.get("budget"), priority=int(item.get("priority") or 0),
                                            parent_task_id=item.get("parent_task_id"),
                                            version_of=item.get("version_of")))
        return handles

    async def close(self) -> None:
        await self.runtime.close()

    # ------------------------------------------------------------------ StreamHost

    def running_tasks(self, session_id: str) -> list[Task]:
        """The session's tasks whose streams are live now."""
        book = self.tasks.books.get(session_id)
        return [] if book is None else [book.stack.get(t) for t in book.live if t in book.stack]

    def has_running_tasks(self, session_id: str) -> bool:
        return bool(self.running_tasks(session_id))

    def predict_kind(self, handle: StreamHandle) -> str:
        """The path an input will probably take, from the fast intent rules and the running tasks
        (no embedding, no model): "interrupt", "task" or "qa". Only orders the queue. What the rules
        read of the text is kept for the stream's build, which reads it no more."""
        running = [RunningTask(task_id=t.task_id, name=t.name, status=t.status.value)
                   for t in self.running_tasks(handle.session_id)]
        intents = self.ctx.builder.intents
        self._readings[handle] = reading = intents.read(handle.text)
        mode = intents.infer(reading, IntentContext(running_tasks=running)).mode.value
        return mode if mode in ("interrupt", "task") else "qa"

    def log_input(self, session_id: str, type: str, payload: dict[str, Any]) -> None:
        ctx = self.ctx
        spawn(ctx.on_store(ctx.store.append_event, session_id, type, payload), name=f"log {type}")

    async def start_stream(self, handle: StreamHandle, on_token: Callable[[str], None]) -> TurnRun:
        state = await self.sessions.open(handle.session_id)
        await self.tasks.recover_tasks(handle.session_id)  # (loads the task book the first time)
        async with self.ctx.lock(handle.session_id):
            if handle.stop_reason:
                raise StreamStopped(handle.stop_reason)
            text, anchor, version, detail = handle.text, handle.anchor_override, None, None
            if handle.version_of:  # regenerate: the turn's input again, where the turn is, with its detail
                text, anchor, version = again(state, handle.version_of)
                detail = await self.turns.detail_of(state.graph.node(handle.version_of).ref_id)
            reading = self._readings.pop(handle, None)
            return await self.turns.submit_locked(
                state, text, handle.budget, anchor, on_token, version=version, detail=detail,
                hooks=self._hooks(handle, reading if reading is not None and text == handle.text else None))

    def _hooks(self, handle: StreamHandle, reading: InputReading | None) -> TurnHooks:
        """The hooks that make the turn run ``handle``'s input as a qa, task or interruption
        (``reading``: what the intent rules read of its text when it was queued)."""
        session_id = handle.session_id

        def inputs(_state: SessionState) -> TaskInputs:
            return self.tasks.inputs(session_id, new_task_id=new_id(), parent_task_id=handle.parent_task_id,
                                     snapshots=True)

        def attached(state: SessionState, record: TurnRecord, message: Message) -> Attachment:
            return self._attach(state, record, message, handle)

        return TurnHooks(inputs, attached, reading)

    # ------------------------------------------------------------------ the stream's path

    def _attach(self, state: SessionState, record: TurnRecord, message: Message, handle: StreamHandle) -> Attachment:
        """Decide the stream's path from its build and write what that path adds to the graph."""
        session_id = state.session_id
        book = self.tasks.books[session_id]
        build = record.build
        decision = StackDecision.model_validate(build.task) if build.task else StackDecision()
        turn_node = record.node_id
        writes: list[Write] = []
        params = answer_params(state, build, self.ctx.config.generation)
        urgent = False
        cut_in = self.runtime.config.cut_in
        handle.kind = decision.path
        handle.turn_id, handle.node_id = record.turn_id, turn_node
        if decision.path == "task" and decision.current is not None:
            handle.max_tokens = params.max_tokens
            writes.append(self._attach_task(state, book, decision, record, message, handle))
        elif decision.path == "interrupt":
            urgent = cut_in
            params = params.model_copy(update={
                "max_tokens": min(params.max_tokens, self.runtime.config.interrupt_max_tokens)})
            writes.append(self._attach_interrupt(book, decision, record, message, handle))
        elif decision.path == "qa" and book.live:  # a question beside a running task: answered now
            urgent = cut_in
        if turn_node is not None:
            state.graph.update_node(turn_node, attrs={"stream": decision.path, "stream_id": handle.stream_id})
            marked, store = state.graph.node(turn_node), self.ctx.store

            def mark() -> None:
                store.save_node(session_id, marked)

            writes.append(mark)

        def persist_all() -> None:
            for write in writes:
                write()

        return Attachment(persist=persist_all, params=params, urgent=urgent)

    def _attach_task(self, state: SessionState, book: TaskBook, decision: StackDecision, record: TurnRecord,
                     message: Message, handle: StreamHandle) -> Write:
        """Push the stream's task frame (record, goal evidence, node, ``spawned`` edges)."""
        assert decision.current is not None
        parent = decision.parent
        while parent is not None and book.stack.get(parent).status not in OPEN:  # it popped meanwhile
            parent = book.stack.get(parent).parent_task_id
        change, persist = self.tasks.new_task(
            state.session_id, decision.name, parent_task_id=parent, acceptance=decision.acceptance,
            turn_node=record.node_id, task_id=decision.current, turn_id=record.turn_id,
            message_id=message.message_id, handle=handle, at=message.at,
            version_of=versions.task_version_of(state.graph, record.node_id) if record.node_id else None)
        handle.task_id = decision.current
        book.live[decision.current] = handle
        self.tasks.announce(state.session_id, change.tasks)
        return persist

    def _attach_interrupt(self, book: TaskBook, decision: StackDecision, record: TurnRecord, message: Message,
                          handle: StreamHandle) -> Write:
        """Link the interruption to the tasks it addresses (``resolves`` when it stops them, else
        ``references``), store the output snapshots its context cites, and stop what it stops."""
        build, turn_node = record.build, record.node_id
        control = next((h.split(":", 1)[1] for h in build.intent.get("plan_hints", []) if h.startswith("control:")),
                       None)
        stopping = control in _STOP_CONTROLS
        edges = []
        for target in decision.targets:
            task = book.stack.get(target) if target in book.stack else None
            if task is None or task.node_id is None or turn_node is None:
                continue
            edges.append(GraphEdge(src=turn_node, dst=task.node_id, created_at=message.at,
                                   kind=EdgeKind.RESOLVES if stopping else EdgeKind.REFERENCES))
        cited = {r.evidence_id for b in build.context.blocks for r in b.refs}
        seen = TaskInputs.model_validate(build.tasks) if build.tasks else TaskInputs()
        snapshots = [Evidence(evidence_id=lt.evidence_id, type=EvidenceType.LLM_OUTPUT, valid_from=message.at,
                              source=EvidenceSource(kind=SourceKind.LLM, name="task output so far"),
                              content=lt.partial, metadata={"task_id": lt.task_id, "tokens": lt.tokens, "partial": True})
                     for lt in seen.live if lt.evidence_id and lt.evidence_id in cited]
        _, persist = self.tasks.commit(handle.session_id, "interrupt", [], edges=edges, evidences=snapshots,
                                       stream_seq=handle.seq)
        if stopping:
            for target in decision.targets:
                running = book.live.get(target)
                if running is not None:
                    running.stop(f"stopped by the user: {build.text[:80]!r}")
        return persist

    def _artifact(self, session_id: str, task: Task, result: Evidence) -> tuple[list[GraphNode], list[GraphEdge]]:
        """A completed task's result as an artifact node (``derived_from`` the task's node, bound to
        the result's evidence); a task completed again, or a new version of the task, makes the next
        version."""
        state = self.ctx.sessions[session_id]
        if task.node_id is None or task.node_id not in state.graph:
            return [], []
        version = 1 + versions.results_before(state.graph, task.node_id)
        at = result.valid_from
        node = GraphNode(kind=NodeKind.ARTIFACT, label=quote_label(f"Result v{version}: {task.name}", 60),
                         ref_id=result.evidence_id, created_at=at, attrs={"task_id": task.task_id, "version": version})
        return [node], [GraphEdge(src=node.node_id, dst=task.node_id, kind=EdgeKind.DERIVED_FROM, created_at=at)]

    def stream_progress(self, handle: StreamHandle) -> None:
        """Show a task stream's progress on its node (not written: the next revision carries it)."""
        state = self.ctx.sessions.get(handle.session_id)
        book = self.tasks.books.get(handle.session_id)
        if state is None or book is None or handle.task_id is None or handle.task_id not in book.stack:
            return
        task = book.stack.get(handle.task_id)
        if task.node_id is None or task.node_id not in state.graph:
            return
        if task.status == TaskStatus.PENDING:
            change, persist = self.tasks.apply(handle.session_id, "start", book.stack.start(task.task_id),
                                               handle=handle)
            self.tasks.write_now(persist)
            self.tasks.announce(handle.session_id, change.tasks)
        state.graph.update_node(task.node_id, attrs={
            "progress": round(min(1.0, handle.tokens / max(1, handle.max_tokens)), 4),
            "tokens": handle.tokens, "steps": count_steps(handle.output)})

    async def finish_stream(self, handle: StreamHandle, record: Any | None) -> None:
        """Pop or fail the stream's task once its answer is recorded (nothing for qa/interrupt)."""
        tasks = self.tasks
        book = tasks.books.get(handle.session_id)
        if book is None or handle.task_id is None:
            return
        book.live.pop(handle.task_id, None)
        task = book.stack.get(handle.task_id)
        if task.status in FINAL:  # failed with its parent meanwhile
            return
        finish = record.finish_reason if record is not None else "error"
        output = record.output if record is not None else ""
        attrs = {"tokens": handle.tokens, "steps": count_steps(output)}
        evidences: list[Evidence] = []
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []
        if finish in ("stop", "length") and output.strip():
            summary = summarize_result(output)
            evidence = Evidence(type=EvidenceType.LLM_OUTPUT, source=EvidenceSource(kind=SourceKind.LLM, name="task result"),
                                content=summary, metadata={"task_id": task.task_id, "turn_id": task.turn_id,
                                                           "message_id": record.answer_message_id if record else None})
            evidences.append(evidence)
            changed = book.stack.complete(task.task_id, summary, [evidence.evidence_id])
            nodes, edges = self._artifact(handle.session_id, task, evidence)
        else:
            reason = handle.stop_reason or ("stopped" if finish == "cancelled" else f"no result ({finish})")
            progress = book.stack.set_progress(task.task_id, handle.tokens / max(1, handle.max_tokens))
            changed = progress + book.stack.fail(task.task_id, reason)
            tasks.stop_failed(book, changed, reason)
        change, persist = tasks.apply(handle.session_id, "finish", changed, evidences=evidences, handle=handle,
                                      nodes=nodes, edges=edges, extra_attrs=attrs)
        await tasks.write_now(persist)
        tasks.announce(handle.session_id, change.tasks)
