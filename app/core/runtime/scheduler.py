"""The stream scheduler: inputs in one queue, a bounded pool of k streams
per session, and three paths — Q&A, task and interruption — chosen from each input's build.

``engine.scheduler(session_id).submit(text)`` returns a ``StreamHandle`` at once. The handle
goes through the engine's one ``asyncio.Queue`` to its session's scheduler, waits there in
priority order (highest first, then submission order; the priority can change while it waits)
and runs once one of the session's ``limit`` slots is free. Running means: record the input,
build its context with the task stack (``app.core.tasks.stack``), attach its turn node and, from the
build's decision, either

- ``qa``: stream the answer (what ``Engine.submit`` does); a question beside a running task that
  is not about it (the intent decides) is such a stream of its own, and cuts in like an
  interruption so it is answered while the task goes on;
- ``task``: push a task frame (record, goal evidence, task node, ``spawned`` edges), stream its
  steps — the task goes active at the first token, its node shows progress — and pop it with
  the first sentence(s) of the output as its result, or fail it when stopped;
- ``interrupt``: answer about the running tasks from a context stating their status, progress
  and output so far, in a stream of its own that cuts into the running generation (see
  ``executors.UrgentLane``) and is linked to the tasks (``references``); "stop"/"cancel" stops
  the addressed task (``resolves``) and it fails with the reason.

What "k concurrent streams" means with one local model: builds (embedding, recall, store
writes) of different streams overlap with generation, but the model generates one reply at a
time, in the order the builds finished; only prompt inputs cut in. An input is prompt when it
looks like an interruption, or like a question while a task of the session streams (the fast
intent rules, with the running tasks; ``SessionScheduler.is_prompt``, asked again whenever the
queue is ordered). It is queued
``interrupt_boost`` above its priority and may use ``interrupt_reserve`` slots beyond the limit,
so a question is not queued behind a long task.

Signals (``app.core.signals.Signal``, on the loop): ``stream_queued(handle)``,
``stream_started(handle)``, ``stream_routed(handle, run)`` once the build is attached (``run`` is
the ``TurnRun``), ``stream_finished(handle, record_or_error)`` and ``task_updated(task)``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from app.core.runtime.background import spawn
from app.core.signals import Signal
from app.core.types import Task, new_id

StreamKind = Literal["qa", "task", "interrupt"]
INPUT_QUEUED, INPUT_STARTED, INPUT_WITHDRAWN = "input.queued", "input.started", "input.withdrawn"


def pending_inputs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inputs queued but neither recorded as a turn nor withdrawn (the app stopped while they
    waited), oldest first, from a session's event log entries: their ``input.queued`` payloads."""
    queued: dict[str, dict[str, Any]] = {}
    for event in events:
        payload = event.get("payload") or {}
        if event["type"] == INPUT_QUEUED:
            queued[payload["stream_id"]] = payload
        elif event["type"] in (INPUT_STARTED, INPUT_WITHDRAWN):
            queued.pop(payload.get("stream_id", ""), None)
    return list(queued.values())
StreamStatus = Literal["queued", "building", "streaming", "done", "stopped", "failed"]
FINISHED: frozenset[str] = frozenset({"done", "stopped", "failed"})


class StreamStopped(Exception):
    """The stream was stopped before it had a turn record (it was still queued or building)."""


@dataclass
class StreamConfig:
    """Scheduling policy (strategy as data)."""

    interrupt_max_tokens: int = 128  # an interruption answers briefly: the task waits meanwhile
    interrupt_boost: int = 10  # queue priority added to prompt inputs (SessionScheduler.is_prompt)
    interrupt_reserve: int = 1  # slots beyond the limit that only prompt inputs may take
    progress_every: int = 8  # tokens between progress updates of a task node
    cut_in: bool = True  # prompt inputs cut into a running task's generation (False: they queue for the model)


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen (nobody may await a stopped stream's futures)."""
    if not future.cancelled():
        future.exception()


class StreamRun(Protocol):
    """A stream's turn once built (the engine's ``TurnRun``): its answer resolves ``done``."""

    turn_id: str

    @property
    def done(self) -> asyncio.Future[Any]: ...

    def stop(self) -> None: ...


class StreamHost(Protocol):
    """What the scheduler needs of the engine (``app.core.engine.streams.EngineStreams``)."""

    def predict_kind(self, handle: StreamHandle) -> str:
        """The path the handle's input will probably take ("interrupt", "task" or "qa"); orders
        the queue (the host may keep what it read of the input for the stream's build)."""
        ...

    def has_running_tasks(self, session_id: str) -> bool:
        """Whether a task stream of the session is live now."""
        ...

    def log_input(self, session_id: str, type: str, payload: dict[str, Any]) -> None:
        """Append an ``input.*`` entry to the session's event log, in call order."""
        ...

    async def start_stream(self, handle: StreamHandle, on_token: Callable[[str], None]) -> StreamRun:
        """Record the handle's input, build and attach its turn and start the answer; raise
        ``StreamStopped`` when the handle was stopped before its turn was recorded."""
        ...

    async def finish_stream(self, handle: StreamHandle, record: Any | None) -> None:
        """Settle what the stream's path owns (its task) once the answer is recorded (or failed)."""
        ...

    def stream_progress(self, handle: StreamHandle) -> None:
        """Show a task stream's progress (called every few tokens)."""
        ...


@dataclass(eq=False)
class StreamHandle:
    """One input on its way through the scheduler.

    ``kind`` is the path the build chose (``predicted`` is the guess made at submission, which
    orders the queue); ``turn_id``/``node_id``/``task_id`` are set once known; ``built`` resolves
    with the ``TurnRun`` when the context is built and the answer starts, ``done`` with the
    ``TurnRecord`` (or ``StreamStopped`` for a stream stopped before its build).
    """

    stream_id: str
    seq: int
    session_id: str
    text: str
    priority: int
    built: asyncio.Future[Any]
    done: asyncio.Future[Any]
    kind: str = "qa"
    predicted: str = "qa"
    status: str = "queued"
    turn_id: str | None = None
    node_id: str | None = None
    task_id: str | None = None
    budget: int | None = None
    anchor_override: str | None = None
    version_of: str | None = None  # answer this turn node's input again, as a new version of it
    detail_from: str | None = None  # the turn whose detail settings the build starts with (a restored checkpoint's)
    parent_task_id: str | None = None
    # The existing task the stream runs (a step of a task's plan, or a task resumed), and the
    # checkpoint evidence whose text it continues; ``steer`` says why it was stopped, when it was
    # not to end it ("pause": kept as a checkpoint; "restart": run again from it).
    run_task_id: str | None = None
    resume_from: str | None = None
    steer: str = ""
    by_agent: bool = False  # the agent's input (a proactive answer), not the user's
    answer_cap: int = 0  # at most this many answer tokens (0: the answer length rules alone)
    on_token: Callable[[str], None] | None = None
    max_tokens: int = 0
    tokens: int = 0
    stop_reason: str = ""
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    first_token_at: float | None = None
    stop_asked_at: float | None = None
    finished_at: float | None = None
    pieces: list[str] = field(default_factory=list)
    run: StreamRun | None = None
    scheduler: SessionScheduler | None = None

    @property
    def output(self) -> str:
        """The text streamed so far."""
        return "".join(self.pieces)

    @property
    def first_token_ms(self) -> float | None:
        """Milliseconds from submission to the first token (None before it)."""
        return None if self.first_token_at is None else (self.first_token_at - self.queued_at) * 1000

    @property
    def total_ms(self) -> float | None:
        """Milliseconds from submission to the end (None while running)."""
        return None if self.finished_at is None else (self.finished_at - self.queued_at) * 1000

    def stop(self, reason: str = "stopped") -> None:
        """Stop the stream: a queued one never runs; a running one stops within one token."""
        if self.scheduler is not None:
            self.scheduler._stop(self, reason)

    def set_priority(self, priority: int) -> None:
        """Change the priority (reorders the queue while the stream waits; recorded otherwise)."""
        if self.scheduler is not None:
            self.scheduler._reprioritize(self, priority)


class SessionScheduler:
    """The bounded pool of one session's streams (see the module doc)."""

    def __init__(self, runtime: StreamRuntime, session_id: str, limit: int) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self._limit = max(1, int(limit))
        self._seq = 0
        self._pending: list[StreamHandle] = []
        self._running: dict[str, StreamHandle] = {}
        self.stream_queued: Signal[[StreamHandle]] = Signal("stream_queued")
        self.stream_started: Signal[[StreamHandle]] = Signal("stream_started")
        self.stream_routed: Signal[[StreamHandle, Any]] = Signal("stream_routed")
        self.stream_finished: Signal[[StreamHandle, Any]] = Signal("stream_finished")
        self.task_updated: Signal[[Task]] = Signal("task_updated")

    @property
    def host(self) -> StreamHost:
        return self.runtime.host

    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, k: int) -> None:
        """Allow ``k`` (at least 1) concurrent streams from now on; waiting ones start if they fit."""
        self._limit = max(1, int(k))
        self._pump()

    def running(self) -> list[StreamHandle]:
        """Streams holding a slot (building or streaming), in start order."""
        return list(self._running.values())

    def queued(self) -> list[StreamHandle]:
        """Streams waiting for a slot, in the order they would start."""
        return sorted(self._pending, key=self._rank)

    # ------------------------------------------------------------------ submitting

    def _new_handle(self, text: str, priority: int) -> StreamHandle:
        # The engine's loop, also from a plain (Qt) callback that runs while it is not iterating.
        loop = asyncio.get_event_loop()
        self._seq += 1
        built: asyncio.Future[Any] = loop.create_future()
        done: asyncio.Future[Any] = loop.create_future()
        built.add_done_callback(_consume)
        done.add_done_callback(_consume)
        return StreamHandle(stream_id=new_id(), seq=self._seq, session_id=self.session_id, text=text,
                            priority=int(priority), built=built, done=done, scheduler=self)

    def submit(self, text: str, *, anchor_override: str | None = None, budget: int | None = None,
               priority: int = 0, on_token: Callable[[str], None] | None = None,
               parent_task_id: str | None = None, version_of: str | None = None,
               run_task_id: str | None = None, resume_from: str | None = None, by_agent: bool = False,
               answer_cap: int = 0, detail_from: str | None = None) -> StreamHandle:
        """Queue an input; return its handle at once (call on the engine's loop).

        ``parent_task_id`` makes the input, if it turns out to be a task, a subtask of that task
        (by default the anchor's branch decides). ``on_token`` hears each streamed piece.
        ``version_of`` (a turn's node; ``text`` is its input) answers that input again as a new
        version of the turn, where the turn is (the anchor is then ignored). ``run_task_id``: the
        input is the agent's, running that existing task (a step, a resumed task) from the
        checkpoint evidence ``resume_from`` if given. ``by_agent``: the input is the agent's (a
        proactive answer), ``answer_cap`` its most answer tokens. ``detail_from``: a turn whose
        detail settings (expand, collapse, focus) the build starts with (a restored checkpoint's).
        """
        handle = self._new_handle(text, priority)
        handle.anchor_override, handle.budget, handle.on_token = anchor_override, budget, on_token
        handle.parent_task_id, handle.version_of = parent_task_id, version_of
        handle.run_task_id, handle.resume_from = run_task_id, resume_from
        handle.by_agent, handle.answer_cap, handle.detail_from = by_agent, answer_cap, detail_from
        handle.predicted = handle.kind = "task" if run_task_id else self.host.predict_kind(handle)
        # Durable from submission: until its turn is recorded, the event log holds the input,
        # and ``pending_inputs`` gives it back after a crash (the store thread keeps the order).
        self._log(INPUT_QUEUED, {"stream_id": handle.stream_id, "text": text, "anchor_override": anchor_override,
                                 "budget": budget, "priority": int(priority), "parent_task_id": parent_task_id,
                                 "version_of": version_of, "run_task_id": run_task_id, "resume_from": resume_from,
                                 **({"detail_from": detail_from} if detail_from else {})})
        self.runtime.enqueue(handle)
        self.stream_queued.emit(handle)
        return handle

    def _log(self, type: str, payload: dict[str, Any]) -> None:
        self.host.log_input(self.session_id, type, payload)

    # ------------------------------------------------------------------ scheduling

    def _rank(self, handle: StreamHandle) -> tuple[int, int]:
        boost = self.runtime.config.interrupt_boost if self.is_prompt(handle) else 0
        return (-(handle.priority + boost), handle.seq)

    def is_prompt(self, handle: StreamHandle) -> bool:
        """Whether an input should be answered while a task streams, not after it: one that looks
        like an interruption, or like a question while a task of the session streams (its own
        Q&A stream). Prompt inputs jump the queue, may use the reserve slots and cut into the
        task's generation. Asked again whenever the queue is ordered: tasks start and end."""
        return handle.predicted == "interrupt" or (
            handle.predicted == "qa" and self.host.has_running_tasks(self.session_id))

    def _admit(self, handle: StreamHandle) -> None:
        if handle.status == "queued":
            self._pending.append(handle)
            self._pump()

    def _pump(self) -> None:
        reserve = self.runtime.config.interrupt_reserve
        for handle in self.queued():
            fits = len(self._running) < self._limit
            if not fits and self.is_prompt(handle):
                fits = len(self._running) < self._limit + reserve
            if fits:
                self._pending.remove(handle)
                self._running[handle.stream_id] = handle
                handle.status = "building"
                handle.started_at = time.perf_counter()
                self.stream_started.emit(handle)
                spawn(self._run(handle), name=f"stream {handle.stream_id}")

    def _reprioritize(self, handle: StreamHandle, priority: int) -> None:
        handle.priority = int(priority)
        if handle in self._pending:
            self._pump()

    def _stop(self, handle: StreamHandle, reason: str) -> None:
        if handle.status in FINISHED:
            return
        handle.stop_reason = handle.stop_reason or reason
        if handle.stop_asked_at is None:
            handle.stop_asked_at = time.perf_counter()
        if handle.status == "queued":
            if handle in self._pending:
                self._pending.remove(handle)
            self._settle(handle, "stopped", StreamStopped(reason))
        elif handle.run is not None:
            handle.run.stop()
        # building: _run stops it as soon as the build is attached

    def _settle(self, handle: StreamHandle, status: str, outcome: Any) -> None:
        if handle.turn_id is None:  # never recorded as a turn: withdrawn
            self._log(INPUT_WITHDRAWN, {"stream_id": handle.stream_id, "status": status,
                                        "reason": handle.stop_reason or str(outcome)[:200]})
        handle.status = status
        handle.finished_at = time.perf_counter()
        for future in (handle.built, handle.done):
            if not future.done():
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
        self.stream_finished.emit(handle, outcome)

    # ------------------------------------------------------------------ running

    def _on_token(self, handle: StreamHandle) -> Callable[[str], None]:
        host, every = self.host, self.runtime.config.progress_every

        def on_token(piece: str) -> None:
            handle.tokens += 1
            handle.pieces.append(piece)
            if handle.first_token_at is None:
                handle.first_token_at = time.perf_counter()
            if handle.task_id is not None and (handle.tokens == 1 or handle.tokens % every == 0 or "\n" in piece):
                host.stream_progress(handle)
            if handle.on_token is not None:
                handle.on_token(piece)

        return on_token

    async def _run(self, handle: StreamHandle) -> None:
        host = self.host
        try:
            run = await host.start_stream(handle, self._on_token(handle))
            handle.run = run
            self._log(INPUT_STARTED, {"stream_id": handle.stream_id, "turn_id": run.turn_id})
            handle.status = "streaming"
            if handle.stop_reason:
                run.stop()
            handle.built.set_result(run)
            self.stream_routed.emit(handle, run)
            record: Any | None = None
            try:
                record = await run.done
            finally:
                await host.finish_stream(handle, record)
            status = {"cancelled": "stopped", "error": "failed"}.get(getattr(record, "finish_reason", ""), "done")
            self._settle(handle, status, record)
        except StreamStopped as exc:
            self._settle(handle, "stopped", exc)
        except Exception as exc:  # the stream fails alone; the scheduler goes on
            self._settle(handle, "failed", exc)
        finally:
            self._running.pop(handle.stream_id, None)
            self._pump()


class StreamRuntime:
    """The engine's one queue for inputs, and its sessions' schedulers (over a ``StreamHost``)."""

    def __init__(self, host: StreamHost, *, limit: int = 2, config: StreamConfig | None = None) -> None:
        self.host = host
        self._limit = max(1, int(limit))
        self.config = config or StreamConfig()
        self._sessions: dict[str, SessionScheduler] = {}
        self._queue: asyncio.Queue[StreamHandle] | None = None
        self._dispatcher: asyncio.Task[None] | None = None

    def session(self, session_id: str) -> SessionScheduler:
        """The scheduler of ``session_id`` (created with the engine's limit on first use)."""
        scheduler = self._sessions.get(session_id)
        if scheduler is None:
            scheduler = self._sessions[session_id] = SessionScheduler(self, session_id, self._limit)
        return scheduler

    def set_limit(self, k: int) -> None:
        """Allow ``k`` (at least 1) concurrent streams in every session, now and for later ones."""
        self._limit = max(1, int(k))
        for scheduler in self._sessions.values():
            scheduler.set_limit(k)

    def sessions(self) -> list[SessionScheduler]:
        """The schedulers created so far."""
        return list(self._sessions.values())

    def enqueue(self, handle: StreamHandle) -> None:
        """Put a handle on the queue (on the loop; a sensor thread uses call_soon_threadsafe)."""
        if self._queue is None or self._dispatcher is None or self._dispatcher.done():
            self._queue = asyncio.Queue()
            self._dispatcher = asyncio.ensure_future(self._dispatch(self._queue))
        self._queue.put_nowait(handle)

    async def _dispatch(self, queue: asyncio.Queue[StreamHandle]) -> None:
        while True:
            handle = await queue.get()
            self.session(handle.session_id)._admit(handle)

    async def close(self) -> None:
        """Stop every stream (queued ones never run), wait for their bookkeeping, stop the queue."""
        waiting = []
        while self._queue is not None and not self._queue.empty():  # submitted, not admitted yet
            handle = self._queue.get_nowait()
            handle.stop("the engine is closing")
        for scheduler in self._sessions.values():
            for handle in [*scheduler._pending, *scheduler._running.values()]:
                handle.stop("the engine is closing")
                waiting.append(handle.done)
        if waiting:
            await asyncio.wait(waiting, timeout=30)
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            try:
                await self._dispatcher
            except (asyncio.CancelledError, Exception):
                pass
            self._dispatcher = None
