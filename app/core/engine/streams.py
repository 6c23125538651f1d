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
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from app.core.engine.agent import AGENT, TaskAgent
from app.core.engine.answer_length import answer_params
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.tasks import TaskBook, TaskService
from app.core.engine.turns import Attachment, TurnHooks, TurnRun, TurnService, again
from app.core.intent.decision import InputReading
from app.core.intent.model import IntentContext, RunningTask
from app.core.intent.profile import to_remember
from app.core.pipeline.record import TurnRecord
from app.core.pipeline.summary_items import Offered
from app.core.plan.model import ConcurrencyPolicy, MergeRule
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
from app.core.tasks.stack import FINAL, OPEN, LiveTask, StackDecision, TaskError, TaskInputs, TaskRun, count_steps
from app.core.tasks.steering import root_task
from app.core.types import (
    EdgeKind,
    Evidence,
    EvidenceSource,
    EvidenceType,
    GraphEdge,
    Message,
    SourceKind,
    Task,
    TaskStatus,
    new_id,
)

_STOP_CONTROLS = frozenset({"stop", "cancel"})
Write = Callable[[], None]
#: (session id, turn_id=, task_id=) → the summaries a restored checkpoint kept, or None.
KeptOffer = Callable[..., Awaitable[Offered | None]]


class EngineStreams:
    """Runs the scheduler's streams as turns; owns the ``StreamRuntime``."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, turns: TurnService, tasks: TaskService,
                 kept_offer: KeptOffer, config: StreamConfig | None = None) -> None:
        self.ctx, self.sessions, self.turns, self.tasks = ctx, sessions, turns, tasks
        self.kept_offer = kept_offer  # the summaries a restored checkpoint kept (``CheckpointService.kept_offer``)
        self.runtime = StreamRuntime(self, limit=ctx.config.max_streams, config=config)
        self.agent = TaskAgent(ctx, sessions, tasks, self.scheduler)  # plans, steps, steering
        # What the intent rules read of each queued input (``predict_kind``), for its build.
        self._readings: weakref.WeakKeyDictionary[StreamHandle, InputReading] = weakref.WeakKeyDictionary()
        self._forced: weakref.WeakSet[StreamHandle] = weakref.WeakSet()  # inputs made tasks whatever their intent
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
                                            version_of=item.get("version_of"), run_task_id=item.get("run_task_id"),
                                            resume_from=item.get("resume_from"), detail_from=item.get("detail_from")))
        return handles

    async def close(self) -> None:
        """Pause the tasks at work (the next run can resume them), then stop every stream."""
        self.agent.close()
        await self.runtime.close()

    # ------------------------------------------------------------------ StreamHost

    def running_tasks(self, session_id: str) -> list[Task]:
        """The session's tasks whose streams are live now."""
        book = self.tasks.books.get(session_id)
        return [] if book is None else [book.stack.get(t) for t in book.live if t in book.stack]

    def has_running_tasks(self, session_id: str) -> bool:
        return bool(self.running_tasks(session_id))

    def addressable(self, session_id: str) -> list[Task]:
        """The tasks an input may address: worked on by a live stream (itself or a step), or paused
        (``TaskInputs.running``)."""
        book = self.tasks.books.get(session_id)
        if book is None:
            return []
        return TaskInputs(tasks=book.stack.tasks(), live=[LiveTask(task_id=t) for t in book.live]).running()

    def predict_kind(self, handle: StreamHandle) -> str:
        """The path an input will probably take, from the fast intent rules and the running tasks
        (no embedding, no model): "interrupt", "task" or "qa". Only orders the queue. What the rules
        read of the text is kept for the stream's build, which reads it no more."""
        self._readings[handle] = reading = self.ctx.builder.intents.read(handle.text)
        return self._kind(handle.session_id, reading)

    def kind_of(self, session_id: str, text: str) -> str:
        """``predict_kind`` for a text not queued (``Engine.input_kind``); a task that only states
        something to remember is not planned into steps (``TaskAgent.plan_attachment``): "qa"."""
        kind = self._kind(session_id, self.ctx.builder.intents.read(text))
        return "qa" if kind == "task" and to_remember(text) else kind

    def _kind(self, session_id: str, reading: InputReading) -> str:
        running = [RunningTask(task_id=t.task_id, name=t.name, status="paused" if t.paused else t.status.value)
                   for t in self.addressable(session_id)]
        mode = self.ctx.builder.intents.infer(reading, IntentContext(running_tasks=running)).mode.value
        return mode if mode in ("interrupt", "task") else "qa"

    def log_input(self, session_id: str, type: str, payload: dict[str, Any]) -> None:
        ctx = self.ctx
        spawn(ctx.on_store(ctx.store.append_event, session_id, type, payload), name=f"log {type}")

    async def start_stream(self, handle: StreamHandle, on_token: Callable[[str], None]) -> TurnRun:
        state = await self.sessions.open(handle.session_id)
        await self.tasks.recover_tasks(handle.session_id)  # (loads the task book the first time)
        await self.agent.load([handle.resume_from])  # the work a continuation takes up
        async with self.ctx.lock(handle.session_id):
            if handle.stop_reason:
                raise StreamStopped(handle.stop_reason)
            text, anchor, version, detail = handle.text, handle.anchor_override, None, None
            if handle.version_of:  # regenerate: the turn's input again, where the turn is, with its detail
                text, anchor, version = again(state, handle.version_of)
                detail = await self.turns.detail_of(state.graph.node(handle.version_of).ref_id)
            elif handle.detail_from:  # a branch started from a restored checkpoint: its detail settings
                detail = await self.turns.detail_of(handle.detail_from)
            # on a branch restored from a checkpoint (an input from there, a restored task's run): its summaries
            kept = await self.kept_offer(handle.session_id, turn_id=handle.detail_from, task_id=handle.run_task_id) \
                if handle.detail_from or handle.run_task_id else None
            reading = self._readings.pop(handle, None)
            return await self.turns.submit_locked(
                state, text, handle.budget, anchor, on_token, version=version, detail=detail,
                hooks=self._hooks(handle, reading if reading is not None and text == handle.text else None),
                author=AGENT if handle.run_task_id or handle.by_agent else None, kept=kept)

    def _hooks(self, handle: StreamHandle, reading: InputReading | None) -> TurnHooks:
        """The hooks that make the turn run ``handle``'s input as a qa, task or interruption
        (``reading``: what the intent rules read of its text when it was queued)."""
        session_id = handle.session_id

        def inputs(state: SessionState) -> TaskInputs:
            run = self._run_of(state, handle)
            inputs = self.tasks.inputs(session_id, new_task_id=None if run else new_id(),
                                       parent_task_id=handle.parent_task_id, snapshots=True, run=run)
            return inputs.model_copy(update={"force_task": True}) if handle in self._forced else inputs

        def attached(state: SessionState, record: TurnRecord, message: Message) -> Attachment:
            return self._attach(state, record, message, handle)

        return TurnHooks(inputs, attached, reading)

    def submit_task(self, session_id: str, text: str, *, hold: bool = False, budget: int | None = None,
                    on_token: Callable[[str], None] | None = None) -> StreamHandle:
        """Queue ``text`` as a new task whatever its intent says (``Engine.run_task``)."""
        handle = self.scheduler(session_id).submit(text, budget=budget, on_token=on_token)
        self._forced.add(handle)
        if hold:
            self.agent.hold(handle)
        return handle

    def _run_of(self, state: SessionState, handle: StreamHandle) -> TaskRun | None:
        """What a stream that runs an existing task gives its build: the work kept at its checkpoint
        and the env events that reached the task (the latest three, as their fenced notes)."""
        book = self.tasks.books.get(state.session_id)
        if handle.run_task_id is None or book is None or handle.run_task_id not in book.stack:
            return None
        task = book.stack.get(handle.run_task_id)
        root = root_task(book.stack, task.task_id)
        events = list(dict.fromkeys([*root.events, *task.events]))[-3:]
        return TaskRun(task_id=task.task_id, checkpoint_id=handle.resume_from or "",
                       checkpoint=self.agent.checkpoint_text(handle.resume_from),
                       events=[(e, state.notes[e].text) for e in events if e in state.notes])

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
        if handle.answer_cap:
            params = params.model_copy(update={"max_tokens": min(params.max_tokens, handle.answer_cap)})
        urgent = False
        cut_in = self.runtime.config.cut_in
        handle.kind = decision.path
        handle.turn_id, handle.node_id = record.turn_id, turn_node
        concurrency = ConcurrencyPolicy.model_validate(build.plan.get("concurrency") or {})
        beside = concurrency.merge_rule == MergeRule.NEW_BRANCH and concurrency.allow_interrupt
        answer: Attachment | None = None
        if decision.path == "task" and decision.run:
            handle.max_tokens = params.max_tokens
            writes.append(self._attach_run(book, decision, record, handle))
        elif decision.path == "task" and decision.current is not None:
            handle.max_tokens = params.max_tokens
            writes.append(self._attach_task(state, book, decision, record, message, handle))
            answer = self.agent.plan_attachment(handle, book.stack.get(decision.current), message.content,
                                                build.prompt, params, concurrency.allow_concurrent)
        elif decision.path == "interrupt":
            urgent = cut_in and beside
            params = params.model_copy(update={
                "max_tokens": min(params.max_tokens, self.runtime.config.interrupt_max_tokens)})
            reply, write = self._attach_interrupt(book, decision, record, message, handle, concurrency)
            answer = Attachment(reply=reply) if reply is not None else None
            writes.append(write)
        elif decision.path == "qa" and book.live:  # a question beside a running task: answered now
            urgent = cut_in and beside
        if turn_node is not None:
            state.graph.update_node(turn_node, attrs={"stream": decision.path, "stream_id": handle.stream_id})
            marked, store = state.graph.node(turn_node), self.ctx.store

            def mark() -> None:
                store.save_node(session_id, marked)

            writes.append(mark)

        def persist_all() -> None:
            for write in writes:
                write()

        if answer is not None:
            return replace(answer, persist=persist_all, params=answer.params or params, urgent=urgent)
        return Attachment(persist=persist_all, params=params, urgent=urgent)

    def _attach_run(self, book: TaskBook, decision: StackDecision, record: TurnRecord, handle: StreamHandle) -> Write:
        """A stream runs an existing task (a step, a task resumed): it counts one more run of the
        task, a ``spawned`` edge goes from the run's turn to the task's node."""
        assert decision.current is not None
        sid, task = handle.session_id, book.stack.get(decision.current)
        edges = []
        if record.node_id is not None and task.node_id is not None:
            edges.append(GraphEdge(src=record.node_id, dst=task.node_id, kind=EdgeKind.SPAWNED,
                                   created_at=record.build.at, attrs={"run": task.attempts + 1}))
        change, persist = self.tasks.apply(sid, "run", book.stack.run(task.task_id, record.turn_id), edges=edges,
                                           handle=handle)
        handle.task_id = task.task_id
        book.live[task.task_id] = handle
        self.agent.attached(handle)
        self.tasks.announce(sid, change.tasks)
        return persist

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
                          handle: StreamHandle, concurrency: ConcurrencyPolicy) -> tuple[str | None, Write]:
        """Carry out the plan's concurrency fields on the tasks the interruption addresses — control
        (pause, resume, stop, cancel) or fold the amendment into them (both only with
        ``allow_interrupt``) — link it to them (``resolves`` when it ends them, else ``references``),
        store the output snapshots its context cites; return the answer the app writes for a
        control or an amendment (None: the model answers) and the write."""
        build, turn_node = record.build, record.node_id
        reply = self._steer(handle.session_id, decision, concurrency, build.text)
        stopping = concurrency.merge_rule == MergeRule.CONTROL and concurrency.control in _STOP_CONTROLS
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
        return reply, persist

    def _steer(self, session_id: str, decision: StackDecision, concurrency: ConcurrencyPolicy, text: str) -> str | None:
        """Apply the plan's control or amendment to each addressed task (``TaskAgent``; its
        revisions are numbered and handed to the store before the interruption's own); return what
        the app answers (None: nothing to apply, the model answers)."""
        if not concurrency.allow_interrupt or concurrency.merge_rule not in (MergeRule.CONTROL, MergeRule.FOLD_INTO_TASK):
            return None
        targets = [concurrency.target_task] if concurrency.target_task in decision.targets else decision.targets
        lines = []
        for target in targets:
            try:
                if concurrency.merge_rule == MergeRule.FOLD_INTO_TASK:
                    lines.append(self.agent.amend_now(session_id, target, text).line)
                elif concurrency.control == "pause":
                    lines.append(self.agent.pause_now(session_id, target).line)
                elif concurrency.control == "resume":
                    spawn(self.agent.resume(session_id, target), name=f"resume {target}")
                    lines.append(f"Resuming \u201c{self.tasks.books[session_id].stack.get(target).name}\u201d.")
                elif concurrency.control in _STOP_CONTROLS:
                    lines.append(self.agent.cancel_now(session_id, target, f"stopped by the user: {text[:80]!r}").line)
            except TaskError as exc:
                lines.append(str(exc))
        return " ".join(lines) or None

    def stream_progress(self, handle: StreamHandle) -> None:
        """Show a task stream's progress on its node (not written: the next revision carries it)."""
        state = self.ctx.sessions.get(handle.session_id)
        book = self.tasks.books.get(handle.session_id)
        if state is None or book is None or handle.task_id is None or handle.task_id not in book.stack:
            return
        task = book.stack.get(handle.task_id)
        if task.node_id is None or task.node_id not in state.graph or task.status in FINAL or task.paused:
            return  # (a stream stopping after its task ended or paused: its node shows what was recorded)
        if task.status == TaskStatus.PENDING:
            change, persist = self.tasks.apply(handle.session_id, "start", book.stack.start(task.task_id),
                                               handle=handle)
            self.tasks.write_now(persist)
            self.tasks.announce(handle.session_id, change.tasks)
        state.graph.update_node(task.node_id, attrs={
            "progress": round(min(1.0, handle.tokens / max(1, handle.max_tokens)), 4),
            "tokens": handle.tokens, "steps": count_steps(handle.output)})

    async def finish_stream(self, handle: StreamHandle, record: Any | None) -> None:
        """Settle the stream's task once its answer is recorded (nothing for qa/interrupt): a
        planning turn's steps join the task, a run completes, keeps or fails it (``TaskAgent``)."""
        book = self.tasks.books.get(handle.session_id)
        if book is None or handle.task_id is None:
            return
        book.live.pop(handle.task_id, None)
        task = book.stack.get(handle.task_id)
        if task.status in FINAL:  # failed with its parent meanwhile
            self.agent.forget(handle)
            self.agent.advance(handle.session_id, root_task(book.stack, task.task_id).task_id)
            return
        if self.agent.planning(handle):
            await self.agent.plan_done(handle, record)
        else:
            await self.agent.run_done(handle, record)
