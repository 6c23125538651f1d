"""The bridge between the engine (asyncio coroutines on the Qt loop) and the widgets (Qt signals).

``EngineController`` owns the engine of the open data folder. It loads the models off the UI
thread and says what it is doing, opens sessions, hands inputs to the session's stream scheduler
(``app.core.runtime.scheduler``: at most ``Settings.max_concurrent_streams`` at once, Q&A, task
and interruption paths) and mirrors its signals (its ``StreamHandle`` and ``TurnRun``, typed
through the facade's names), batches streamed tokens into at most one ``answer_updated`` per turn
per frame, runs the environment sensors into ``engine.ingest_env``, forwards the canvas's branch
actions to the engine, and answers what the widgets ask of the open session's nodes (labels,
the turn a node stands for). Everything runs on the one loop (qasync drives asyncio from Qt's
event loop), so signals are emitted on the UI thread; blocking work happens on the engine's
executors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from app.config import Settings
from app.core.errors import CoreError, NoRecordError, user_line
from app.core.runtime.intake import EnvIntake
from app.core.signals import Signal as CoreSignal
from app.core.types import NodeKind
from app.ui.services import Services
from app.ui.tool_approval import ToolApprovalPrompt

if TYPE_CHECKING:
    from app.core.engine.facade import Engine, StreamHandle, TurnRun
    from app.core.pipeline.record import TurnRecord
    from app.core.session.state import SessionState

log = logging.getLogger(__name__)

#: Streamed text reaches the widgets at most this often (ms): one repaint per frame, not per token.
FLUSH_MS = 33
#: Stored turn statuses badged on the canvas when a session opens (the badges it showed before).
SHOWN_STATUSES = frozenset({"answered", "interrupted", "failed"})


@dataclass
class LiveTurn:
    """A turn whose answer is streaming: its text so far and how many pieces arrived; ``run`` is
    the scheduler's handle of its stream."""

    turn_id: str
    node_id: str
    label: str
    run: StreamHandle
    text: str = ""
    pieces: int = 0
    started: float = 0.0
    first_token_at: float | None = None


class EngineController(QObject):
    """Engine facade for the widgets: coroutines in, Qt signals out."""

    status_changed = Signal(str)  # a short line for the status bar (loading steps, errors)
    ready_changed = Signal(bool, str)  # can inputs be submitted? else why not
    session_opened = Signal(object)  # SessionState of the open session
    turn_queued = Signal(str, str)  # (stream id, text) an input waits for a free stream
    turn_routed = Signal(str, str, str, object)  # (stream id, turn_id, node_id, TurnRecord without answer)
    answer_updated = Signal(str, str)  # (turn_id, answer text so far)
    turn_finished = Signal(str, object)  # (turn_id, TurnRecord)
    busy_changed = Signal(bool)  # whether any input of the open session is queued, building or streaming
    turn_failed = Signal(str, str, str)  # (turn_id or queue key, message, the input's text if it was never recorded)
    reanchored = Signal(object)  # the engine's Reanchored result
    env_ingested = Signal(object)  # list of the engine's EnvRouted: stored, on the canvas, routed
    env_pushed = Signal(object)  # the engine's PushNotice: an event touched an active task
    env_failed = Signal(object)  # env events that could not be stored or indexed: env_failures() entries
    sensors_status = Signal(list)  # one line per watched source
    turn_statuses = Signal(dict)  # node id → stored status of the open session's turns that did not answer
    off_machine = Signal(list)  # node ids of turns answered off this machine (marked on their cards)
    error = Signal(str)  # something the user should read (one line)

    def __init__(self, settings: Settings, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.services = services
        self.engine: Engine | None = None
        self.state: SessionState | None = None
        self.ready = False
        self.closed = False
        self.load_error: str | None = None  # why the last load failed, in one line
        self.live: dict[str, LiveTurn] = {}  # turn id → a routed turn whose answer streams
        self.statuses: dict[str, str] = {}  # turn id → stored status, of the open session
        self.handles: dict[str, StreamHandle] = {}  # stream id → the scheduler's handle, until finished
        self._branch_detail: dict[str, str] = {}  # anchor → the turn whose detail a branch restored there starts with
        self._scheduler_slots: list[tuple[CoreSignal[Any], Callable[..., None]]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._dirty: set[str] = set()
        self._flush = QTimer(self)
        self._flush.setInterval(FLUSH_MS)
        self._flush.timeout.connect(self._on_flush)
        self.sensors: Any = None
        # Tools that change things ask here first (non-modal, over the window).
        self.tool_approver = ToolApprovalPrompt(lambda: parent if isinstance(parent, QWidget) else None)
        self.mcp_task: asyncio.Task[None] | None = None  # the MCP server, when Settings names a port
        self.intake: EnvIntake | None = None
        self._sensor_timer = QTimer(self)
        self._sensor_timer.setInterval(3000)
        self._sensor_timer.timeout.connect(self._on_sensor_tick)

    # ------------------------------------------------------------------ plumbing

    def spawn(self, coro: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        """Run ``coro`` on the loop; a failure becomes an ``error`` line, never a lost exception."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                assert exc is not None
                report(exc, what)
                self.error.emit(f"{what} failed: {user_line(exc)}")

        task.add_done_callback(done)
        return task

    @property
    def session_id(self) -> str | None:
        return self.state.session_id if self.state is not None else None

    # ------------------------------------------------------------------ the open session's nodes

    def labels(self) -> dict[str, str]:
        """node id → label of every node of the open session ({} when none is open)."""
        state = self.state
        return {n.node_id: n.label for n in state.graph.nodes()} if state else {}

    def label_of(self, node_id: str) -> str:
        """The label of a node of the open session ("" when there is no such node)."""
        state = self.state
        return state.graph.node(node_id).label if state is not None and node_id in state.graph else ""

    def turn_of(self, node_id: str) -> str | None:
        """The id of the turn a node of the open session stands for (None for other nodes)."""
        state = self.state
        if state is None or node_id not in state.graph:
            return None
        node = state.graph.node(node_id)
        return node.ref_id if node.kind == NodeKind.TURN else None

    # ------------------------------------------------------------------ loading and sessions

    async def load(self, session_id: str | None = None) -> bool:
        """Load the models off the UI thread, open a session; True when inputs can be submitted."""
        loop = asyncio.get_running_loop()
        self.ready_changed.emit(False, "Loading models…")

        def progress(line: str) -> None:  # called on the loading thread
            loop.call_soon_threadsafe(self._on_progress, line)

        started = time.perf_counter()
        try:
            engine = await loop.run_in_executor(None, self.services.build_engine, self.settings, progress)
            self.engine = engine
            self.status_changed.emit("preparing intent prototypes")
            engine.index_progress.connect(self._on_index_progress)
            await engine.start()
            engine.set_tool_approver(self.tool_approver)
            engine.env_pushed.connect(self.env_pushed.emit)
            engine.env_failed.connect(self._on_env_failed)
            if session_id is None:  # the session used last (a new one on the first start)
                session_id = await engine.last_used_session()
            await self.open_session(session_id)
        except Exception as exc:  # noqa: BLE001 - shown to the user, who can pick another model
            report(exc, "loading")
            message = self.load_error = user_line(exc)
            self.status_changed.emit(f"Could not load: {message}")
            self.ready_changed.emit(False, f"Models did not load: {message}. Choose another in Settings (Ctrl+,).")
            return False
        self.ready = True
        self.load_error = None
        took = time.perf_counter() - started
        log.info("ready in %.1f s: chat model %s, session %s", took,
                 engine.model_name or self.settings.chat_model, self.session_id)
        self.status_changed.emit(f"Ready in {took:.1f} s{self._repaired()}")
        self.ready_changed.emit(True, "")
        await self.start_sensors()
        await self.start_mcp()
        return True

    def _on_index_progress(self, what: str, done: int, total: int) -> None:
        """The index catching up (in the background) or finishing a rebuild, in the status bar
        (the last line repeats what the start repaired, which the progress lines replaced)."""
        if not self.closed and total:
            line = f"{what[:1].upper()}{what[1:]}: {done}/{total}"
            self.status_changed.emit(line + "…" if done < total else line + " done" + self._repaired())

    def _repaired(self) -> str:
        """What the engine's start repaired after a crash, as "; "-led lines for the status bar."""
        report = self.engine.recovery_report() if self.engine is not None else None
        return "".join(f"; {line}" for line in report.lines()) if report is not None else ""

    def _on_progress(self, line: str) -> None:
        if not self.closed:
            self.status_changed.emit(line[:1].upper() + line[1:] + "…")
            self.ready_changed.emit(False, f"Loading: {line}…")

    def _engine(self) -> Engine:
        """The loaded engine (callers run only once loading has set it)."""
        if self.engine is None:
            raise CoreError("The models are still loading.")
        return self.engine

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        """Open (or create) a session and announce it; the canvas rebuilds from its graph."""
        engine = self._engine()
        self.state = await engine.open_session(session_id, title=title)
        self._watch_scheduler(self.state.session_id)
        self.session_opened.emit(self.state)
        failures = await engine.env_failures(self.state.session_id)
        if failures:  # recorded in an earlier run: still worth seeing
            self.env_failed.emit(failures)
        self.statuses = await engine.turn_statuses(self.state.session_id)
        turns = self.state.turns
        self.turn_statuses.emit({turns[t].node_id: status for t, status in self.statuses.items()
                                 if status in SHOWN_STATUSES and t in turns and turns[t].node_id})
        far = await engine.off_machine_turns(self.state.session_id)
        self.off_machine.emit([turns[t].node_id for t in far if t in turns and turns[t].node_id])
        resumed = await engine.resume_inputs(self.state.session_id)
        if resumed:
            self.status_changed.emit(f"Queued again {len(resumed)} input(s) that were waiting when the app stopped")
        return self.state

    async def sessions(self, *, archived: bool = False) -> list[dict[str, Any]]:
        return await self._engine().list_sessions(archived=archived)

    async def search_sessions(self, text: str, *, archived: bool = False) -> list[str]:
        return await self._engine().search_sessions(text, archived=archived)

    async def rename_session(self, session_id: str, title: str) -> None:
        await self._engine().rename_session(session_id, title)

    async def archive_session(self, session_id: str, archived: bool) -> None:
        await self._engine().archive_session(session_id, archived)

    async def export_session(self) -> dict[str, Any]:
        """The open session as a structured context model document."""
        if self.session_id is None:
            raise CoreError("No session is open yet.")
        return await self._engine().export_session(self.session_id)

    async def import_session(self, data: dict[str, Any]) -> str:
        """Validate ``data`` and store it as a new session; returns its id (nothing is opened)."""
        return await self._engine().import_session(data)

    async def record(self, turn_id: str) -> TurnRecord | None:
        """The stored trace of a turn (None for history turns without a build)."""
        try:
            return await self._engine().turn_record(turn_id)
        except NoRecordError:
            return None

    # ------------------------------------------------------------------ turns

    def submit(self, text: str, *, anchor: str | None = None, budget: int | None = None,
               priority: int = 0, version_of: str | None = None) -> str | None:
        """Queue an input on the session's stream scheduler; returns its stream id (shown until
        it has a turn id), None if refused (models not loaded yet: the text stays in the composer).
        ``version_of`` (a turn's node, ``text`` its input) answers that turn again as a new version."""
        text = text.strip()
        if not text:
            return None
        if not self.ready or self.state is None or self.engine is None:
            self.error.emit("The models are still loading; your input was kept in the composer.")
            return None
        scheduler = self.engine.scheduler(self.state.session_id)
        scheduler.set_limit(max(1, int(self.settings.max_concurrent_streams)))
        handle = scheduler.submit(text, anchor_override=anchor, budget=budget, priority=priority,
                                  version_of=version_of, detail_from=self._branch_detail.pop(anchor or "", None))
        return handle.stream_id

    def start_branch(self, anchor: str, detail_from: str | None) -> None:
        """The next input sent from ``anchor`` starts a branch restored from a checkpoint there,
        with the detail settings of the turn ``detail_from`` (``Engine.restore_checkpoint``)."""
        if detail_from:
            self._branch_detail[anchor] = detail_from

    def busy(self) -> bool:
        """True while any input of the open session is queued, building or streaming (its
        handle is known from submission until the scheduler reports it finished)."""
        return bool(self.handles)

    def _watch_scheduler(self, session_id: str) -> None:
        """Mirror the session scheduler's signals (core signals, emitted on this loop) as Qt ones."""
        for signal, slot in self._scheduler_slots:
            signal.disconnect(slot)
        scheduler = self._engine().scheduler(session_id)
        self._scheduler_slots = [(scheduler.stream_queued, self._on_stream_queued),
                                 (scheduler.stream_routed, self._on_stream_routed),
                                 (scheduler.stream_finished, self._on_stream_finished)]
        for signal, slot in self._scheduler_slots:
            signal.connect(slot)

    def _on_stream_queued(self, handle: StreamHandle) -> None:
        self.handles[handle.stream_id] = handle
        self.busy_changed.emit(True)
        if handle.on_token is None:  # read per token, so setting it now is in time
            handle.on_token = lambda piece, h=handle: self._on_token(h, piece)
        self.turn_queued.emit(handle.stream_id, handle.text)

    def _on_stream_routed(self, handle: StreamHandle, run: TurnRun) -> None:
        from app.core.pipeline.record import TurnRecord  # here: the window shows before the engine loads

        live = LiveTurn(run.turn_id, run.node_id, handle.text[:60], handle, started=time.perf_counter())
        self.live[run.turn_id] = live
        record = TurnRecord(turn_id=run.turn_id, session_id=run.session_id, node_id=run.node_id,
                            build=run.build, timing=run.timing)
        self.turn_routed.emit(handle.stream_id, run.turn_id, run.node_id, record)

    def _on_stream_finished(self, handle: StreamHandle, outcome: TurnRecord | BaseException | None) -> None:
        from app.core.pipeline.record import TurnRecord  # here: the window shows before the engine loads

        self.handles.pop(handle.stream_id, None)
        if not self.handles:
            self.busy_changed.emit(False)
        turn_id = handle.turn_id
        if turn_id is not None and turn_id in self.live:
            self._on_flush()
            self.live.pop(turn_id, None)
        if isinstance(outcome, TurnRecord):
            if outcome.usage.get("off_machine") and outcome.node_id:
                self.off_machine.emit([outcome.node_id])
            self.turn_finished.emit(outcome.turn_id, outcome)
            return
        reason = handle.stop_reason
        if not reason and isinstance(outcome, BaseException):
            report(outcome, "a turn")
            reason = user_line(outcome)
        unrecorded = handle.text if turn_id is None and not handle.stop_reason else ""
        self.turn_failed.emit(turn_id or handle.stream_id, reason or (str(outcome) if outcome is not None else "") or "failed",
                              unrecorded)

    def _on_token(self, handle: StreamHandle, piece: str) -> None:
        live = self.live.get(handle.turn_id or "")
        if live is None:
            return
        if live.first_token_at is None:
            live.first_token_at = time.perf_counter()
        live.text += piece
        live.pieces += 1
        self._dirty.add(live.turn_id)
        if not self._flush.isActive():
            self._flush.start()

    def _on_flush(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for turn_id in dirty:
            live = self.live.get(turn_id)
            if live is not None:
                self.answer_updated.emit(turn_id, live.text)
        if not self._dirty:
            self._flush.stop()

    def _handle(self, key: str) -> StreamHandle | None:
        live = self.live.get(key)
        return live.run if live is not None else self.handles.get(key)

    def stop(self, key: str) -> None:
        """Stop a stream by turn id or stream id: a queued one never runs, a running one stops
        within one token."""
        handle = self._handle(key)
        if handle is not None:
            handle.stop("stopped by the user")

    def pause_task_of(self, key: str) -> None:
        """Pause the task a stream (by turn id or stream id) works on: its streams stop within one
        token, their work kept as checkpoints; says so in the status line."""
        handle = self._handle(key)
        if handle is None or self.engine is None or self.session_id is None:
            return
        if handle.task_id is None:
            self.error.emit("This answer is not a task's: Stop ends it.")
            return
        self.call("Pausing the task", self.engine.pause_task, self.session_id, handle.task_id,
                  then=lambda steered: self.status_changed.emit(steered.line))

    def set_priority(self, key: str, priority: int) -> None:
        """Reorder a queued input (a running stream keeps its place)."""
        handle = self._handle(key)
        if handle is not None:
            handle.set_priority(priority)

    def stop_all(self) -> None:
        for handle in list(self.handles.values()):
            handle.stop("stopped by the user")

    # ------------------------------------------------------------------ branch actions

    def call(self, what: str, fn: Callable[..., Awaitable[Any]], *args: Any,
             then: Callable[[Any], None] | None = None) -> asyncio.Task[Any] | None:
        """Run an engine coroutine for a user action; ``then`` gets its result on success."""
        if self.engine is None or self.state is None:
            self.error.emit("The models are still loading.")
            return None

        async def go() -> None:
            result = await fn(*args)
            if then is not None:
                then(result)

        return self.spawn(go(), what)

    def reanchor(self, turn_id: str, anchor: str | None) -> asyncio.Task[Any] | None:
        if self.engine is None:
            self.error.emit("The models are still loading.")
            return None
        return self.call("Re-anchoring", self.engine.reanchor, turn_id, anchor, then=self.reanchored.emit)

    def undo_reanchor(self, turn_id: str) -> asyncio.Task[Any] | None:
        if self.engine is None:
            self.error.emit("The models are still loading.")
            return None
        return self.call("Undoing the re-anchor", self.engine.undo_reanchor, turn_id, then=self.reanchored.emit)

    # ------------------------------------------------------------------ environment sensors

    async def start_sensors(self) -> None:
        """(Re)start the sensors the settings configure; their events go to the open session.

        Sensor threads only enqueue into the intake; it coalesces on this loop and hands batches
        to ``engine.ingest_env`` (stored, embedded, on the canvas, routed).
        """
        await self.stop_sensors()
        s = self.settings
        if self.engine is None or self.services.build_sensors is None:
            return
        self.engine.set_watched_folders(list(s.watched_folders))  # read_file is confined to these
        if not (s.watched_folders or s.feeds or s.apis):
            self.sensors_status.emit([])
            return
        prepare = self.services.file_preparer(s) if self.services.file_preparer is not None else None
        self.intake = EnvIntake(self._ingest, coalesce_ms=s.coalesce_ms, prepare=prepare)
        self.intake.start()
        loop = asyncio.get_running_loop()
        history = await self._env_history()
        sensors = await loop.run_in_executor(None, self.services.build_sensors, s, self.intake.put, history)
        await loop.run_in_executor(None, sensors.start)  # a recursive watch may take a moment
        self.sensors = sensors
        self._sensor_timer.start()
        self._on_sensor_tick()

    async def env_events(self) -> list[Any]:
        """The open session's stored env events (oldest first)."""
        return [] if self.state is None else await self._engine().env_events(self.state.session_id)

    async def _env_history(self) -> list[Any]:
        """The session's stored env events, which feeds and API sources resume from (nothing
        is needed when neither is configured)."""
        if self.state is None or not (self.settings.feeds or self.settings.apis):
            return []
        return await self._engine().env_events(self.state.session_id)

    def _on_env_failed(self, session_id: str, failures: list[Any]) -> None:
        if self.state is not None and session_id == self.state.session_id:
            self.env_failed.emit([f.entry() for f in failures])

    async def _ingest(self, events: list[Any]) -> None:
        if self.engine is None or self.state is None or self.closed:
            return
        routed = await self.engine.ingest_env(self.state.session_id, events)
        self.env_ingested.emit(routed)

    async def stop_sensors(self) -> None:
        """Stop the sensors, then flush what the intake still holds."""
        self._sensor_timer.stop()
        sensors, self.sensors = self.sensors, None
        if sensors is not None:
            await asyncio.get_running_loop().run_in_executor(None, sensors.stop)
        intake, self.intake = self.intake, None
        if intake is not None:
            await intake.stop()

    def _on_sensor_tick(self) -> None:
        if self.sensors is None:
            return
        lines = []
        for st in self.sensors.status():
            if st.last_error:
                state = f"error: {st.last_error}"
            else:
                state = f"ok {str(st.last_ok or '')[11:19]}" if st.last_ok else ("watching" if st.running else "stopped")
            counts = ", ".join(f"{v} {k}" for k, v in st.counts.items() if v)
            skipped = st.detail.get("skipped") or []
            if skipped:  # a feed entry left out, and why (the latest)
                last = skipped[-1]
                state += f"; skipped {last.get('title') or last.get('entry_id')}: {last.get('reason')}"
            lines.append(f"{st.sensor} {st.source}: {state}" + (f" ({counts})" if counts else ""))
        if self.intake is not None:
            stats = self.intake.stats()
            lines.append(f"intake: {stats.raw} changes → {stats.events} events in {stats.batches} batches"
                         + (f", {stats.lost} lost (see the log)" if stats.lost else ""))
        self.sensors_status.emit(lines)

    # ------------------------------------------------------------------ the MCP server

    async def start_mcp(self) -> None:
        """Serve the sessions to MCP clients when Settings names a port (again when it changes)."""
        await self.stop_mcp()
        port, serve = self.settings.mcp_port, self.services.serve_mcp
        if not port or serve is None or self.engine is None or self.closed:
            return
        self.mcp_task = asyncio.create_task(serve(self.engine, self.settings.data_dir, port), name="mcp server")
        self.mcp_task.add_done_callback(self._mcp_ended)
        self.status_changed.emit(f"Serving MCP clients on 127.0.0.1:{port}")

    def _mcp_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            report(task.exception(), "the MCP server")  # type: ignore[arg-type]
            self.error.emit(f"MCP server stopped: {user_line(task.exception())}")  # type: ignore[arg-type]

    async def stop_mcp(self) -> None:
        task, self.mcp_task = self.mcp_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=10)

    # ------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        """Stop every answer, let the engine finish its bookkeeping, release the executors."""
        self.closed = True
        self.stop_all()
        me = asyncio.current_task()
        pending = [t for t in self._tasks if not t.done() and t is not me]
        if pending:
            await asyncio.wait(pending, timeout=10)
        self._flush.stop()
        await self.stop_mcp()
        await self.stop_sensors()
        if self.engine is not None:
            await self.engine.close()


def report(exc: BaseException, what: str) -> None:
    """Log an engine failure: a ``CoreError`` (the user's to fix) as its line, anything else
    (a bug) with its traceback."""
    if isinstance(exc, CoreError):
        log.warning("%s: %s", what, exc)
    else:
        log.error("%s failed", what, exc_info=exc)
