"""The engine's task state: the task stack of each session, its graph nodes, and the log that
replays it. ``TaskActions`` is mixed into ``Engine`` (as ``BranchActions`` is).

Deterministic order: every change to tasks, task nodes and their edges is one *revision* of the
session's task state. ``_commit`` numbers it (``rev``, per session, no gaps), applies it to the
in-memory graph and hands the store one transaction that writes the records and a
``task.changed`` event carrying the full records. Numbering, applying and handing over happen
without yielding to the loop, and the ``store`` executor runs writes in the order it gets them,
so the event log holds the revisions in the order they were applied, whatever the streams do in
parallel; ``replay_state`` folds those events into tasks, nodes and edges and compares the
result with the store and with the live state.

Streamed progress (tokens, steps) is shown on the task node as it comes but written only with
the next status change, so the event log is not flooded with one entry per token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.core.pipeline.record import TurnRecord
from app.core.ports import GenerationParams
from app.core.signals import Signal
from app.core.tasks.replay import TASK_EVENT, compare, fold
from app.core.tasks.stack import (
    FINAL,
    OPEN,
    LiveTask,
    StackDecision,
    TaskInputs,
    TaskStack,
    count_steps,
    summarize_result,
)
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
    utc_now,
)

if TYPE_CHECKING:
    from app.core.engine.facade import EngineConfig, EngineStore
    from app.core.runtime.executors import Executors
    from app.core.runtime.scheduler import SessionScheduler, StreamHandle, StreamRuntime
    from app.core.session.state import SessionState

log = logging.getLogger(__name__)

_STOP_CONTROLS = frozenset({"stop", "cancel"})


@dataclass(frozen=True)
class TaskChange:
    """What one revision changed: the tasks (new records), task nodes and edges it wrote."""

    session_id: str
    rev: int
    op: str
    tasks: tuple[Task, ...] = ()
    nodes: tuple[str, ...] = ()
    edges: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attachment:
    """What a stream's hook adds to a turn: writes joining the turn's transaction, and how to
    generate (``params``; ``urgent`` lets the answer cut into a running generation)."""

    persist: Callable[[], None] | None = None
    params: GenerationParams | None = None
    urgent: bool = False


@dataclass(frozen=True)
class TurnHooks:
    """How ``Engine._submit`` involves the scheduler: the task inputs of the build (called under
    the session lock, before it) and the attachment (called once the turn's node is attached)."""

    inputs: Callable[[SessionState], TaskInputs]
    attached: Callable[[SessionState, TurnRecord, Message], Attachment]


@dataclass
class TaskBook:
    """One session's task stack, its revision counter and the task streams running now."""

    stack: TaskStack
    rev: int = 0
    live: dict[str, StreamHandle] = field(default_factory=dict)
    recovered: bool = False  # streamed tasks left open by an earlier run were failed


def _node_attrs(task: Task, **more: Any) -> dict[str, Any]:
    return {"status": task.status.value, "progress": task.progress, "error": task.error, **more}


class TaskActions:
    """Task records, task nodes and their replay, mixed into ``Engine``."""

    store: EngineStore
    ex: Executors
    config: EngineConfig
    sessions: dict[str, SessionState]
    _books: dict[str, TaskBook]
    _streams: StreamRuntime
    task_updated: Signal[[Task]]

    if TYPE_CHECKING:
        async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState: ...

    def _init_tasks(self) -> None:
        """Create the task state and the stream runtime (called by ``Engine.__init__``)."""
        from app.core.runtime.scheduler import StreamRuntime

        self._books = {}
        self.task_updated = Signal("task_updated")
        self._streams = StreamRuntime(self, limit=self.config.max_streams)

    def scheduler(self, session_id: str) -> SessionScheduler:
        """The session's stream scheduler (created on first use): submit inputs, stop, reprioritise."""
        return self._streams.session(session_id)

    async def resume_inputs(self, session_id: str) -> list[StreamHandle]:
        """Queue again the inputs that were waiting when the app last stopped (see
        ``scheduler.pending_inputs``); each is withdrawn under its old stream id first."""
        from app.core.runtime.scheduler import INPUT_WITHDRAWN, pending_inputs

        events = await self.ex.run("store", self.store.list_events, session_id)
        scheduler = self.scheduler(session_id)
        handles = []
        for item in pending_inputs(events):
            await self.ex.run("store", self.store.append_event, session_id, INPUT_WITHDRAWN,
                              {"stream_id": item["stream_id"], "status": "resubmitted", "reason": "the app stopped"})
            handles.append(scheduler.submit(item["text"], anchor_override=item.get("anchor_override"),
                                            budget=item.get("budget"), priority=int(item.get("priority") or 0),
                                            parent_task_id=item.get("parent_task_id")))
        return handles

    def set_stream_limit(self, k: int) -> None:
        """Allow ``k`` concurrent streams in every session, now and for sessions opened later."""
        self._streams.limit = max(1, int(k))
        for scheduler in self._streams._sessions.values():
            scheduler.set_limit(k)

    async def _close_streams(self) -> None:
        await self._streams.close()

    # ------------------------------------------------------------------ reading

    async def task_book(self, session_id: str) -> TaskBook:
        """The session's task state, loaded from the store on first use."""
        book = self._books.get(session_id)
        if book is None:
            tasks = await self.ex.run("store", self.store.list_tasks, session_id)  # type: ignore[attr-defined]
            last = await self.ex.run("store", self.store.last_event, session_id, TASK_EVENT)  # type: ignore[attr-defined]
            book = self._books.setdefault(session_id, TaskBook(TaskStack(tasks), int(last["payload"]["rev"]) if last else 0))
        return book

    async def tasks(self, session_id: str) -> list[Task]:
        """The session's tasks in creation order (the export's ``todo_list.tasks`` mirrors them)."""
        return (await self.task_book(session_id)).stack.tasks()

    def task_inputs(self, session_id: str, *, new_task_id: str | None = None, parent_task_id: str | None = None,
                    snapshots: bool = False) -> TaskInputs:
        """What a build knows of the session's tasks now (the book must be loaded).

        ``snapshots`` gives each running stream's output so far an evidence id, so an
        interruption's context can cite it (the caller stores the ones cited).
        """
        book = self._books.get(session_id)
        if book is None:
            return TaskInputs(new_task_id=new_task_id, parent_task_id=parent_task_id)
        live = []
        for task_id, handle in book.live.items():
            live.append(LiveTask(task_id=task_id, partial=handle.output[-600:], tokens=handle.tokens,
                                 max_tokens=handle.max_tokens, steps=count_steps(handle.output),
                                 evidence_id=new_id() if snapshots and handle.tokens else ""))
        return TaskInputs(tasks=book.stack.tasks(), live=live, new_task_id=new_task_id, parent_task_id=parent_task_id)

    # ------------------------------------------------------------------ revisions

    def _commit(self, session_id: str, op: str, tasks: Sequence[Task], *, nodes: Sequence[GraphNode] = (),
                node_attrs: dict[str, dict[str, Any]] | None = None, edges: Sequence[GraphEdge] = (),
                evidences: Sequence[Evidence] = (), stream_seq: int | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Number one revision and apply it to the live graph; return it and its store write.

        ``tasks`` are records already changed in the book's stack (the last record of a task
        wins); ``nodes`` are new task nodes, ``node_attrs`` changes to existing ones. The write
        must be handed to the store executor before the caller yields to the loop.
        """
        book = self._books[session_id]
        state = self.sessions[session_id]
        book.rev += 1
        rev = book.rev
        unique = list({t.task_id: t for t in tasks}.values())
        for node in nodes:
            state.add_node(node)
        for node_id, attrs in (node_attrs or {}).items():
            state.graph.update_node(node_id, attrs=attrs)
        for edge in edges:
            state.add_edge(edge)
        touched = list(dict.fromkeys([*(n.node_id for n in nodes), *(node_attrs or {})]))
        records = [state.graph.node(n) for n in touched]

        def persist() -> None:
            with self.store.transaction():
                for evidence in evidences:
                    self.store.add_evidence(session_id, evidence)
                for task in unique:
                    if self.store.get_task(task.task_id) is None:  # type: ignore[attr-defined]
                        self.store.add_task(session_id, task)  # type: ignore[attr-defined]
                    else:
                        fields = task.model_dump(mode="python", exclude={"task_id"})
                        self.store.update_task(task.task_id, **fields)  # type: ignore[attr-defined]
                for node in records:
                    self.store.save_node(session_id, node)
                for edge in edges:
                    self.store.save_edge(session_id, edge)
                self.store.append_event(session_id, TASK_EVENT, {
                    "rev": rev, "op": op, "stream_seq": stream_seq,
                    "tasks": [t.model_dump(mode="json") for t in unique],
                    "nodes": [n.model_dump(mode="json") for n in records],
                    "edges": [e.model_dump(mode="json") for e in edges],
                })

        change = TaskChange(session_id, rev, op, tuple(unique), tuple(touched), tuple(e.edge_id for e in edges))
        return change, persist

    def _write_now(self, persist: Callable[[], None]) -> asyncio.Future[None]:
        """Hand a write to the store executor at once (keeps revisions in order); errors are logged."""
        future = asyncio.get_running_loop().run_in_executor(self.ex.pool("store"), persist)
        future.add_done_callback(lambda f: f.cancelled() or f.exception() is None
                                 or log.error("task state write failed: %s", f.exception()))
        return future

    def _announce(self, session_id: str, tasks: Sequence[Task]) -> None:
        for task in {t.task_id: t for t in tasks}.values():
            self.task_updated.emit(task)
            self._streams.session(session_id).task_updated.emit(task)

    # ------------------------------------------------------------------ task operations

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> TaskChange:
        """Push a task (a root, or a subtask of an open task) with its node, its goal evidence and
        its ``spawned`` edges (from the node of ``turn_id`` if given — e.g. the turn whose tool
        call made it — and from the parent's node); return it. ``TaskError`` if the parent popped."""
        state = await self.open_session(session_id)
        await self.task_book(session_id)
        change, persist = self._new_task(session_id, name, parent_task_id=parent_task_id, acceptance=acceptance,
                                         turn_node=state.node_of(turn_id) if turn_id else None, turn_id=turn_id)
        await self._write_now(persist)
        self._announce(session_id, change.tasks)
        return change

    def _new_task(self, session_id: str, name: str, *, parent_task_id: str | None, acceptance: str,
                  turn_node: str | None, task_id: str | None = None, turn_id: str | None = None,
                  message_id: str | None = None, handle: StreamHandle | None = None,
                  at: str | None = None) -> tuple[TaskChange, Callable[[], None]]:
        book = self._books[session_id]
        state = self.sessions[session_id]
        at = at or utc_now()
        node_id = new_id()
        task = book.stack.create(name, parent_task_id=parent_task_id, acceptance=acceptance, task_id=task_id,
                                 turn_id=turn_id, node_id=node_id, at=at)
        extra = {"stream_id": handle.stream_id} if handle is not None else {}
        node = GraphNode(node_id=node_id, kind=NodeKind.TASK, label=name[:40], ref_id=task.task_id, created_at=at,
                         attrs=_node_attrs(task, tokens=0, steps=0, **extra))
        edges = []
        if turn_node is not None:
            edges.append(GraphEdge(src=turn_node, dst=node_id, kind=EdgeKind.SPAWNED, created_at=at))
        parent = book.stack.get(parent_task_id) if parent_task_id is not None else None
        if parent is not None and parent.node_id is not None and parent.node_id in state.graph:
            edges.append(GraphEdge(src=parent.node_id, dst=node_id, kind=EdgeKind.SPAWNED, created_at=at,
                                   attrs={"subtask": True}))
        evidence = Evidence(
            evidence_id=task.task_id, type=EvidenceType.USER_INPUT if turn_id else EvidenceType.OTHER,
            source=EvidenceSource(kind=SourceKind.USER if turn_id else SourceKind.SYSTEM, name="task"),
            content=name + (f"\nDone when: {acceptance}" if acceptance else ""), valid_from=at,
            metadata={"task_id": task.task_id, "turn_id": turn_id, "message_id": message_id,
                      "parent_task_id": parent_task_id},
        )
        return self._commit(session_id, "create", [task], nodes=[node], edges=edges, evidences=[evidence],
                            stream_seq=handle.seq if handle is not None else None)

    def _apply(self, session_id: str, op: str, changed: Sequence[Task], *, evidences: Sequence[Evidence] = (),
               handle: StreamHandle | None = None, edges: Sequence[GraphEdge] = (),
               extra_attrs: dict[str, Any] | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Commit tasks the stack changed, with their nodes' attributes."""
        state = self.sessions[session_id]
        attrs: dict[str, dict[str, Any]] = {}
        for task in changed:
            if task.node_id is not None and task.node_id in state.graph:
                more = extra_attrs if handle is not None and task.task_id == handle.task_id else None
                attrs[task.node_id] = _node_attrs(task, **(more or {}))
        return self._commit(session_id, op, changed, node_attrs=attrs, edges=edges, evidences=evidences,
                            stream_seq=handle.seq if handle is not None else None)

    async def start_task(self, session_id: str, task_id: str) -> TaskChange:
        """Mark a task active; return the change."""
        book = await self.task_book(session_id)
        change, persist = self._apply(session_id, "start", book.stack.start(task_id))
        await self._write_now(persist)
        self._announce(session_id, change.tasks)
        return change

    async def block_task(self, session_id: str, task_id: str, note: str) -> TaskChange:
        """Park a task as blocked with a note saying why; return the change."""
        book = await self.task_book(session_id)
        change, persist = self._apply(session_id, "block", book.stack.block(task_id, note))
        await self._write_now(persist)
        self._announce(session_id, change.tasks)
        return change

    async def complete_task(self, session_id: str, task_id: str, result: str, *,
                            evidence: Evidence | None = None) -> TaskChange:
        """Pop a task with ``result`` as its summary (stored as its result evidence, unless one is
        given); a task with open subtasks waits for them as blocked. Return the change."""
        book = await self.task_book(session_id)
        task = book.stack.get(task_id)
        evidence = evidence or Evidence(type=EvidenceType.OTHER, source=EvidenceSource(kind=SourceKind.SYSTEM, name="task result"),
                                        content=result, metadata={"task_id": task_id, "turn_id": task.turn_id})
        changed = book.stack.complete(task_id, result, [evidence.evidence_id])
        change, persist = self._apply(session_id, "complete", changed, evidences=[evidence])
        await self._write_now(persist)
        self._announce(session_id, change.tasks)
        return change

    async def fail_task(self, session_id: str, task_id: str, reason: str) -> TaskChange:
        """Fail a task and its open subtasks (their streams are stopped); return the change."""
        book = await self.task_book(session_id)
        changed = book.stack.fail(task_id, reason)
        change, persist = self._apply(session_id, "fail", changed)
        await self._write_now(persist)
        self._stop_failed(book, changed, reason)
        self._announce(session_id, change.tasks)
        return change

    async def recover_tasks(self, session_id: str) -> TaskChange | None:
        """Fail the streamed tasks an earlier run left pending or active (the app stopped under
        them); once per session and engine, before its first stream. Return the change, if any."""
        state = await self.open_session(session_id)
        book = await self.task_book(session_id)
        if book.recovered:
            return None
        book.recovered = True
        changed: list[Task] = []
        for task in book.stack.tasks():
            node = state.graph.node(task.node_id) if task.node_id and task.node_id in state.graph else None
            streamed = node is not None and node.attrs.get("stream_id")
            if streamed and task.status in (TaskStatus.PENDING, TaskStatus.ACTIVE) and task.task_id not in book.live:
                changed += book.stack.fail(task.task_id, "interrupted: the app stopped before the task finished")
        if not changed:
            return None
        change, persist = self._apply(session_id, "recover", changed)
        await self._write_now(persist)
        self._announce(session_id, change.tasks)
        return change

    def _stop_failed(self, book: TaskBook, changed: Sequence[Task], reason: str) -> None:
        for task in changed:
            handle = book.live.get(task.task_id)
            if task.status == TaskStatus.FAILED and handle is not None:
                handle.stop(reason)

    # ------------------------------------------------------------------ streams (the scheduler's hooks)

    def stream_hooks(self, handle: StreamHandle) -> TurnHooks:
        """The hooks that make ``Engine._submit`` run ``handle``'s input as a qa, task or interruption."""
        session_id = handle.session_id

        def inputs(state: SessionState) -> TaskInputs:
            return self.task_inputs(session_id, new_task_id=new_id(), parent_task_id=handle.parent_task_id,
                                    snapshots=True)

        def attached(state: SessionState, record: TurnRecord, message: Message) -> Attachment:
            return self._attach_stream(state, record, message, handle)

        return TurnHooks(inputs, attached)

    def _attach_stream(self, state: SessionState, record: TurnRecord, message: Message,
                       handle: StreamHandle) -> Attachment:
        """Decide the stream's path from its build and write what that path adds to the graph."""
        session_id = state.session_id
        book = self._books[session_id]
        build = record.build
        decision = StackDecision.model_validate(build.task) if build.task else StackDecision()
        turn_node = record.node_id
        writes: list[Callable[[], None]] = []
        params = self.config.generation
        urgent = False
        handle.kind = decision.path
        handle.turn_id, handle.node_id = record.turn_id, turn_node
        if decision.path == "task" and decision.current is not None:
            parent = decision.parent
            while parent is not None and book.stack.get(parent).status not in OPEN:  # it popped meanwhile
                parent = book.stack.get(parent).parent_task_id
            change, persist = self._new_task(
                session_id, decision.name, parent_task_id=parent, acceptance=decision.acceptance,
                turn_node=turn_node, task_id=decision.current, turn_id=record.turn_id,
                message_id=message.message_id, handle=handle, at=message.at)
            writes.append(persist)
            handle.task_id = decision.current
            handle.max_tokens = params.max_tokens
            book.live[decision.current] = handle
            self._announce(session_id, change.tasks)
        elif decision.path == "interrupt":
            urgent = self._streams.config.cut_in
            params = params.model_copy(update={"max_tokens": min(params.max_tokens, self._streams.config.interrupt_max_tokens)})
            control = next((h.split(":", 1)[1] for h in build.intent.get("plan_hints", []) if h.startswith("control:")), None)
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
            change, persist = self._commit(session_id, "interrupt", [], edges=edges, evidences=snapshots,
                                           stream_seq=handle.seq)
            writes.append(persist)
            if stopping:
                for target in decision.targets:
                    running = book.live.get(target)
                    if running is not None:
                        running.stop(f"stopped by the user: {build.text[:80]!r}")
        elif decision.path == "qa" and book.live:  # a question beside a running task: answered now
            urgent = self._streams.config.cut_in
        if turn_node is not None:
            state.graph.update_node(turn_node, attrs={"stream": decision.path, "stream_id": handle.stream_id})
            marked = state.graph.node(turn_node)
            writes.append(lambda: self.store.save_node(session_id, marked))

        def persist_all() -> None:
            for write in writes:
                write()

        return Attachment(persist=persist_all, params=params, urgent=urgent)

    def _stream_progress(self, handle: StreamHandle) -> None:
        """Show a task stream's progress on its node (not written: the next revision carries it)."""
        state = self.sessions.get(handle.session_id)
        book = self._books.get(handle.session_id)
        if state is None or book is None or handle.task_id is None or handle.task_id not in book.stack:
            return
        task = book.stack.get(handle.task_id)
        if task.node_id is None or task.node_id not in state.graph:
            return
        if task.status == TaskStatus.PENDING:
            change, persist = self._apply(handle.session_id, "start", book.stack.start(task.task_id), handle=handle)
            self._write_now(persist)
            self._announce(handle.session_id, change.tasks)
        state.graph.update_node(task.node_id, attrs={
            "progress": round(min(1.0, handle.tokens / max(1, handle.max_tokens)), 4),
            "tokens": handle.tokens, "steps": count_steps(handle.output)})

    async def _finish_stream(self, handle: StreamHandle, record: TurnRecord | None) -> None:
        """Pop or fail the stream's task once its answer is recorded (nothing for qa/interrupt)."""
        book = self._books.get(handle.session_id)
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
        if finish in ("stop", "length") and output.strip():
            summary = summarize_result(output)
            evidence = Evidence(type=EvidenceType.LLM_OUTPUT, source=EvidenceSource(kind=SourceKind.LLM, name="task result"),
                                content=summary, metadata={"task_id": task.task_id, "turn_id": task.turn_id,
                                                           "message_id": record.answer_message_id if record else None})
            evidences.append(evidence)
            changed = book.stack.complete(task.task_id, summary, [evidence.evidence_id])
        else:
            reason = handle.stop_reason or ("stopped" if finish == "cancelled" else f"no result ({finish})")
            progress = book.stack.set_progress(task.task_id, handle.tokens / max(1, handle.max_tokens))
            changed = progress + book.stack.fail(task.task_id, reason)
            self._stop_failed(book, changed, reason)
        change, persist = self._apply(handle.session_id, "finish", changed, evidences=evidences, handle=handle,
                                      extra_attrs=attrs)
        await self._write_now(persist)
        self._announce(handle.session_id, change.tasks)

    # ------------------------------------------------------------------ replay

    async def replay_state(self, session_id: str) -> list[str]:
        """Rebuild the session's tasks, task nodes and their edges from the ``task.changed`` events
        alone and compare them with the store and the live state; return the differences
        (``app.core.tasks.replay.compare``; empty means consistent)."""
        state = await self.open_session(session_id)
        book = await self.task_book(session_id)
        events = await self.ex.run("store", self.store.list_events, session_id)
        stored = await self.ex.run("store", self.store.list_tasks, session_id)  # type: ignore[attr-defined]
        running = {h.task_id for h in book.live.values() if h.task_id is not None}
        return compare(fold(events), stored=stored, live=book.stack.tasks(), rev=book.rev, graph=state.graph,
                       running=running)
