"""The engine's task state: the task stack of each session, its graph nodes, and the log that
replays it.

Deterministic order: every change to tasks, task nodes and their edges is one *revision* of the
session's task state. ``_commit`` numbers it (``rev``, per session, no gaps), applies it to the
in-memory graph and hands the store one transaction that writes the records and a
``task.changed`` event carrying the full records. Numbering, applying and handing over happen
without yielding to the loop, and the ``store`` executor runs writes in the order it gets them,
so the event log holds the revisions in the order they were applied, whatever the streams do in
parallel; ``replay_state`` folds those events into tasks, nodes and edges and compares the
result with the store and with the live state.

Every task goes through here, whoever creates it: a task stream (``app.core.engine.streams``),
the canvas, or the ``create_task``/``update_task`` tools (``TaskService.writer``).

Streamed progress (tokens, steps) is shown on the task node as it comes but written only with
the next status change, so the event log is not flooded with one entry per token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.runtime.scheduler import StreamHandle
from app.core.session import versions
from app.core.signals import Signal
from app.core.tasks.replay import TASK_EVENT, compare, fold
from app.core.tasks.stack import LiveTask, TaskError, TaskInputs, TaskRun, TaskStack, count_steps
from app.core.tasks.steering import card_line
from app.core.tools.builtin import TaskWriter
from app.core.types import (
    EdgeKind,
    Evidence,
    EvidenceSource,
    EvidenceType,
    GraphEdge,
    GraphNode,
    NodeKind,
    SourceKind,
    Task,
    TaskStatus,
    new_id,
    utc_now,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskChange:
    """What one revision changed: the tasks (new records), task nodes and edges it wrote."""

    session_id: str
    rev: int
    op: str
    tasks: tuple[Task, ...] = ()
    nodes: tuple[str, ...] = ()
    edges: tuple[str, ...] = ()


@dataclass
class TaskBook:
    """One session's task stack, its revision counter and the task streams running now."""

    stack: TaskStack
    rev: int = 0
    live: dict[str, StreamHandle] = field(default_factory=dict)
    recovered: bool = False  # streamed tasks left open by an earlier run were failed


def task_node_attrs(task: Task, **more: Any) -> dict[str, Any]:
    """The attributes a task node shows (status, progress, error, whether it is paused, the
    steering line of its card — ``steering.card_line`` — and ``more``)."""
    return {"status": task.status.value, "progress": task.progress, "error": task.error, "paused": task.paused,
            "steer": card_line(task, []), **more}


def _log_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("task state write failed: %s", future.exception())


class TaskService:
    """Task records, task nodes and their replay. ``task_updated`` is emitted for every task a
    revision changed (on the loop, after the revision is handed to the store)."""

    def __init__(self, ctx: EngineContext, sessions: SessionService) -> None:
        self.ctx, self.sessions = ctx, sessions
        self.books: dict[str, TaskBook] = {}
        self.task_updated: Signal[[str, Task]] = Signal("task_updated")  # (session_id, task)

    # ------------------------------------------------------------------ reading

    async def book(self, session_id: str) -> TaskBook:
        """The session's task state, loaded from the store on first use."""
        book = self.books.get(session_id)
        if book is None:
            tasks = await self.ctx.on_store(self.ctx.store.list_tasks, session_id)
            last = await self.ctx.on_store(self.ctx.store.last_event, session_id, TASK_EVENT)
            book = self.books.setdefault(session_id, TaskBook(TaskStack(tasks), int(last["payload"]["rev"]) if last else 0))
        return book

    async def tasks(self, session_id: str) -> list[Task]:
        """The session's tasks in creation order (the export's ``todo_list.tasks`` mirrors them)."""
        return (await self.book(session_id)).stack.tasks()

    def inputs(self, session_id: str, *, new_task_id: str | None = None, parent_task_id: str | None = None,
               snapshots: bool = False, run: TaskRun | None = None) -> TaskInputs:
        """What a build knows of the session's tasks now (the book must be loaded).

        ``snapshots`` gives each running stream's output so far an evidence id, so an
        interruption's context can cite it (the caller stores the ones cited).
        """
        book = self.books.get(session_id)
        if book is None:
            return TaskInputs(new_task_id=new_task_id, parent_task_id=parent_task_id)
        live = []
        for task_id, handle in book.live.items():
            live.append(LiveTask(task_id=task_id, partial=handle.output[-600:], tokens=handle.tokens,
                                 max_tokens=handle.max_tokens, steps=count_steps(handle.output),
                                 evidence_id=new_id() if snapshots and handle.tokens else ""))
        return TaskInputs(tasks=book.stack.tasks(), live=live, new_task_id=new_task_id, parent_task_id=parent_task_id,
                          run=run)

    # ------------------------------------------------------------------ revisions

    def commit(self, session_id: str, op: str, tasks: Sequence[Task], *, nodes: Sequence[GraphNode] = (),
                node_attrs: dict[str, dict[str, Any]] | None = None, edges: Sequence[GraphEdge] = (),
                evidences: Sequence[Evidence] = (), stream_seq: int | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Number one revision and apply it to the live graph; return it and its store write.

        ``tasks`` are records already changed in the book's stack (the last record of a task
        wins); ``nodes`` are new task nodes, ``node_attrs`` changes to existing ones. The write
        must be handed to the store executor before the caller yields to the loop.
        """
        book = self.books[session_id]
        state = self.ctx.sessions[session_id]
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
        store = self.ctx.store

        def persist() -> None:
            with store.transaction():
                for evidence in evidences:
                    store.add_evidence(session_id, evidence)
                for task in unique:
                    if store.get_task(task.task_id) is None:
                        store.add_task(session_id, task)
                    else:
                        fields = task.model_dump(mode="python", exclude={"task_id"})
                        store.update_task(task.task_id, **fields)
                for node in records:
                    store.save_node(session_id, node)
                for edge in edges:
                    store.save_edge(session_id, edge)
                store.append_event(session_id, TASK_EVENT, {
                    "rev": rev, "op": op, "stream_seq": stream_seq,
                    "tasks": [t.model_dump(mode="json") for t in unique],
                    "nodes": [n.model_dump(mode="json") for n in records],
                    "edges": [e.model_dump(mode="json") for e in edges],
                })

        change = TaskChange(session_id, rev, op, tuple(unique), tuple(touched), tuple(e.edge_id for e in edges))
        return change, persist

    def write_now(self, persist: Callable[[], None]) -> asyncio.Future[None]:
        """Hand a write to the store executor at once (keeps revisions in order); errors are logged."""
        future = asyncio.get_running_loop().run_in_executor(self.ctx.ex.pool("store"), persist)
        future.add_done_callback(_log_failure)
        return future

    def announce(self, session_id: str, tasks: Sequence[Task]) -> None:
        for task in {t.task_id: t for t in tasks}.values():
            self.task_updated.emit(session_id, task)

    # ------------------------------------------------------------------ task operations

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> TaskChange:
        """Push a task (a root, or a subtask of an open task) with its node, its goal evidence and
        its ``spawned`` edges (from the node of ``turn_id`` if given — e.g. the turn whose tool
        call made it — and from the parent's node); return it. ``TaskError`` if the parent popped."""
        state = await self.sessions.open(session_id)
        await self.book(session_id)
        change, persist = self.new_task(session_id, name, parent_task_id=parent_task_id, acceptance=acceptance,
                                         turn_node=state.node_of(turn_id) if turn_id else None, turn_id=turn_id)
        await self.write_now(persist)
        self.announce(session_id, change.tasks)
        return change

    def new_task(self, session_id: str, name: str, *, parent_task_id: str | None, acceptance: str,
                  turn_node: str | None, task_id: str | None = None, turn_id: str | None = None,
                  message_id: str | None = None, handle: StreamHandle | None = None,
                  at: str | None = None, version_of: str | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Create a task with its node (``version_of``: the first node of the task it is a new
        version of, ``app.core.session.versions``), its ``spawned`` edges and goal evidence, as one
        revision; return the change and its write."""
        book = self.books[session_id]
        task = book.stack.create(name, parent_task_id=parent_task_id, acceptance=acceptance, task_id=task_id,
                                 turn_id=turn_id, node_id=new_id(), at=at or utc_now())
        extra: dict[str, Any] = {"stream_id": handle.stream_id} if handle is not None else {}
        if version_of is not None:
            extra[versions.VERSION_OF] = version_of
        node, edges, evidence = self.frame_records(session_id, task, turn_node, message_id, extra)
        return self.commit(session_id, "create", [task], nodes=[node], edges=edges, evidences=[evidence],
                            stream_seq=handle.seq if handle is not None else None)

    def frame_records(self, session_id: str, task: Task, turn_node: str | None, message_id: str | None,
                       extra: dict[str, Any]) -> tuple[GraphNode, list[GraphEdge], Evidence]:
        """A new task's node, its ``spawned`` edges (from ``turn_node`` and from its parent's node)
        and its goal evidence (same id as the task)."""
        state, book, at = self.ctx.sessions[session_id], self.books[session_id], task.created_at
        assert task.node_id is not None
        node = GraphNode(node_id=task.node_id, kind=NodeKind.TASK, label=task.name[:40], ref_id=task.task_id,
                         created_at=at, attrs=task_node_attrs(task, tokens=0, steps=0, **extra))
        edges = []
        if turn_node is not None:
            edges.append(GraphEdge(src=turn_node, dst=task.node_id, kind=EdgeKind.SPAWNED, created_at=at))
        parent = book.stack.get(task.parent_task_id) if task.parent_task_id is not None else None
        if parent is not None and parent.node_id is not None and parent.node_id in state.graph:
            edges.append(GraphEdge(src=parent.node_id, dst=task.node_id, kind=EdgeKind.SPAWNED, created_at=at,
                                   attrs={"subtask": True, **({"step": task.step} if task.step else {})}))
        by_user = task.turn_id is not None
        evidence = Evidence(
            evidence_id=task.task_id, type=EvidenceType.USER_INPUT if by_user else EvidenceType.OTHER,
            source=EvidenceSource(kind=SourceKind.USER if by_user else SourceKind.SYSTEM,
                                  name="task step" if task.step else "task"),
            content=task.name + (f"\nDone when: {task.acceptance}" if task.acceptance else ""), valid_from=at,
            metadata={"task_id": task.task_id, "turn_id": task.turn_id, "message_id": message_id,
                      "parent_task_id": task.parent_task_id, **({"step": task.step} if task.step else {})},
        )
        return node, edges, evidence

    def add_steps(self, session_id: str, parent_id: str, steps: Sequence[tuple[str, str, Sequence[int | str]]], *,
                  op: str = "plan", more: Sequence[Task] = (),
                  stream_seq: int | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Add steps (name, acceptance, what each depends on: a number is a step of this batch,
        1-based; a string the id of a step the plan has) to a task's plan after its steps so far,
        with their nodes, ``spawned`` edges from the task's node and goal evidences, as one
        revision (``more``: other records the stack changed with them)."""
        book, at = self.books[session_id], utc_now()
        first = 1 + max((t.step for t in book.stack.steps(parent_id)), default=0)
        tasks: list[Task] = []
        nodes, edges, evidences = [], [], []
        for n, (name, acceptance, needs) in enumerate(steps):
            depends_on = [tasks[d - 1].task_id if isinstance(d, int) else d for d in needs]
            task = book.stack.create(name, parent_task_id=parent_id, acceptance=acceptance, node_id=new_id(),
                                     at=at, step=first + n, depends_on=depends_on)
            node, spawned, evidence = self.frame_records(session_id, task, None, None, {})
            tasks.append(task)
            nodes.append(node)
            edges += spawned
            evidences.append(evidence)
        return self.commit(session_id, op, [*more, *tasks], nodes=nodes, edges=edges, evidences=evidences,
                           stream_seq=stream_seq)

    def apply(self, session_id: str, op: str, changed: Sequence[Task], *, evidences: Sequence[Evidence] = (),
               handle: StreamHandle | None = None, edges: Sequence[GraphEdge] = (), nodes: Sequence[GraphNode] = (),
               extra_attrs: dict[str, Any] | None = None) -> tuple[TaskChange, Callable[[], None]]:
        """Commit tasks the stack changed, with their nodes' attributes (and new ``nodes``: a result's artifact)."""
        state = self.ctx.sessions[session_id]
        attrs: dict[str, dict[str, Any]] = {}
        for task in changed:
            if task.node_id is not None and task.node_id in state.graph:
                more = extra_attrs if handle is not None and task.task_id == handle.task_id else None
                attrs[task.node_id] = task_node_attrs(task, **(more or {}))
        return self.commit(session_id, op, changed, nodes=nodes, node_attrs=attrs, edges=edges, evidences=evidences,
                            stream_seq=handle.seq if handle is not None else None)

    async def _change(self, session_id: str, op: str, changed: Sequence[Task], *,
                      evidences: Sequence[Evidence] = ()) -> TaskChange:
        """Commit what the stack changed as one revision, write it, announce it; return it."""
        change, persist = self.apply(session_id, op, changed, evidences=evidences)
        await self.write_now(persist)
        self.announce(session_id, change.tasks)
        return change

    async def start_task(self, session_id: str, task_id: str) -> TaskChange:
        """Mark a task active; return the change."""
        book = await self.book(session_id)
        return await self._change(session_id, "start", book.stack.start(task_id))

    async def note_task(self, session_id: str, task_id: str, note: str) -> TaskChange:
        """Add a note to a task without changing its status; return the change."""
        book = await self.book(session_id)
        return await self._change(session_id, "note", book.stack.note(task_id, note))

    async def block_task(self, session_id: str, task_id: str, note: str) -> TaskChange:
        """Park a task as blocked with a note saying why; return the change."""
        book = await self.book(session_id)
        return await self._change(session_id, "block", book.stack.block(task_id, note))

    async def complete_task(self, session_id: str, task_id: str, result: str, *,
                            evidence: Evidence | None = None) -> TaskChange:
        """Pop a task with ``result`` as its summary (stored as its result evidence, unless one is
        given); a task with open subtasks waits for them as blocked. Return the change."""
        book = await self.book(session_id)
        task = book.stack.get(task_id)
        evidence = evidence or Evidence(type=EvidenceType.OTHER, source=EvidenceSource(kind=SourceKind.SYSTEM, name="task result"),
                                        content=result, metadata={"task_id": task_id, "turn_id": task.turn_id})
        changed = book.stack.complete(task_id, result, [evidence.evidence_id])
        return await self._change(session_id, "complete", changed, evidences=[evidence])

    async def fail_task(self, session_id: str, task_id: str, reason: str) -> TaskChange:
        """Fail a task and its open subtasks (their streams are stopped); return the change."""
        book = await self.book(session_id)
        changed = book.stack.fail(task_id, reason)
        change, persist = self.apply(session_id, "fail", changed)
        await self.write_now(persist)
        self.stop_failed(book, changed, reason)
        self.announce(session_id, change.tasks)
        return change

    async def recover_tasks(self, session_id: str) -> TaskChange | None:
        """Fail the streamed tasks an earlier run left pending or active (the app stopped under
        them); once per session and engine, before its first stream. Return the change, if any."""
        state = await self.sessions.open(session_id)
        book = await self.book(session_id)
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
        change, persist = self.apply(session_id, "recover", changed)
        await self.write_now(persist)
        self.announce(session_id, change.tasks)
        return change

    def stop_failed(self, book: TaskBook, changed: Sequence[Task], reason: str) -> None:
        for task in changed:
            handle = book.live.get(task.task_id)
            if task.status == TaskStatus.FAILED and handle is not None:
                handle.stop(reason)

    # ------------------------------------------------------------------ the tools' writer

    def writer(self) -> TaskWriter:
        """The ``TaskWriter`` of the ``create_task``/``update_task`` tools: this service."""
        return _ToolWriter(self)

    def link_turn(self, session_id: str, turn_id: str, turn_node: str) -> Callable[[], None] | None:
        """Add ``spawned`` edges from a turn's node to the tasks its tool calls created (they ran
        during its build, before the node existed), as one revision; return its write, which must
        join the turn's transaction before the caller yields. None when there is nothing to link."""
        book = self.books.get(session_id)
        state = self.ctx.sessions[session_id]
        if book is None:
            return None
        linked = {e.dst for e in state.graph.out_edges(turn_node, EdgeKind.SPAWNED)}
        edges = [GraphEdge(src=turn_node, dst=t.node_id, kind=EdgeKind.SPAWNED, created_at=t.created_at)
                 for t in book.stack.tasks()
                 if t.turn_id == turn_id and t.node_id and t.node_id in state.graph and t.node_id not in linked]
        if not edges:
            return None
        _, persist = self.commit(session_id, "link", [], edges=edges)
        return persist

    # ------------------------------------------------------------------ replay

    async def replay_state(self, session_id: str) -> list[str]:
        """Rebuild the session's tasks, task nodes and their edges from the ``task.changed`` events
        alone and compare them with the store and the live state; return the differences
        (``app.core.tasks.replay.compare``; empty means consistent)."""
        state = await self.sessions.open(session_id)
        book = await self.book(session_id)
        events = await self.ctx.on_store(self.ctx.store.list_events, session_id)
        stored = await self.ctx.on_store(self.ctx.store.list_tasks, session_id)
        running = {h.task_id for h in book.live.values() if h.task_id is not None}
        return compare(fold(events), stored=stored, live=book.stack.tasks(), rev=book.rev, graph=state.graph,
                       running=running)


class _ToolWriter:
    """``TaskWriter`` over the task service: tools create and change tasks through the stack."""

    def __init__(self, service: TaskService) -> None:
        self.service = service

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> Task:
        change = await self.service.create_task(session_id, name, parent_task_id=parent_task_id,
                                                acceptance=acceptance, turn_id=turn_id)
        return change.tasks[0]

    async def update_task(self, session_id: str, task_id: str, *, status: TaskStatus | None = None,
                          result_summary: str | None = None) -> Task:
        service, note = self.service, result_summary or ""
        if status == TaskStatus.COMPLETE:
            await service.complete_task(session_id, task_id, note or "done")
        elif status == TaskStatus.FAILED:
            await service.fail_task(session_id, task_id, note or "marked failed")
        elif status == TaskStatus.BLOCKED:
            await service.block_task(session_id, task_id, note or "blocked")
        elif status == TaskStatus.ACTIVE:
            await service.start_task(session_id, task_id)
        elif status == TaskStatus.PENDING:
            raise TaskError("a task that has started cannot go back to pending")
        if note and status in (None, TaskStatus.ACTIVE):
            await service.note_task(session_id, task_id, note)
        return (await service.book(session_id)).stack.get(task_id)

    async def list_tasks(self, session_id: str) -> list[Task]:
        return await self.service.tasks(session_id)
