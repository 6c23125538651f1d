"""The bridge between the engine (asyncio coroutines on the Qt loop) and the widgets (Qt signals).

``EngineController`` owns the engine of the open data folder. It loads the models off the UI
thread and says what it is doing, opens sessions, runs turns (at most
``Settings.max_concurrent_streams`` at once; later inputs wait in order), batches streamed tokens
into at most one ``answer_updated`` per turn per frame, and forwards the canvas's branch actions
to the engine. Everything runs on the one loop (qasync drives asyncio from Qt's event loop), so
signals are emitted on the UI thread; blocking work happens on the engine's executors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.config import Settings
from app.core.session import SessionState
from app.core.trace import TurnRecord
from app.ui.services import Services

log = logging.getLogger(__name__)

#: Streamed text reaches the widgets at most this often (ms): one repaint per frame, not per token.
FLUSH_MS = 33


@dataclass
class PendingTurn:
    """An input waiting for a free stream slot."""

    text: str
    anchor: str | None
    budget: int | None
    queued_at: float


@dataclass
class LiveTurn:
    """A turn whose answer is streaming: its text so far and how many pieces arrived."""

    turn_id: str
    node_id: str
    label: str
    run: Any
    text: str = ""
    pieces: int = 0
    started: float = 0.0
    first_token_at: float | None = None


class EngineController(QObject):
    """Engine facade for the widgets: coroutines in, Qt signals out."""

    status_changed = Signal(str)  # a short line for the status bar (loading steps, errors)
    ready_changed = Signal(bool, str)  # can inputs be submitted? else why not
    session_opened = Signal(object)  # SessionState of the open session
    turn_queued = Signal(str, str)  # (queue key, text) an input waits for a free stream
    turn_routed = Signal(str, str, str, object)  # (queue key, turn_id, node_id, TurnRecord without answer)
    answer_updated = Signal(str, str)  # (turn_id, answer text so far)
    turn_finished = Signal(str, object)  # (turn_id, TurnRecord)
    turn_failed = Signal(str, str)  # (turn_id or queue key, message)
    reanchored = Signal(object)  # the engine's Reanchored result
    error = Signal(str)  # something the user should read (one line)

    def __init__(self, settings: Settings, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.services = services
        self.engine: Any = None
        self.state: SessionState | None = None
        self.ready = False
        self.closed = False
        self.live: dict[str, LiveTurn] = {}
        self._pending: deque[tuple[str, PendingTurn]] = deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._dirty: set[str] = set()
        self._flush = QTimer(self)
        self._flush.setInterval(FLUSH_MS)
        self._flush.timeout.connect(self._on_flush)
        self._queue_seq = 0
        self._starting = 0  # turns past the queue whose build has not returned yet

    # ------------------------------------------------------------------ plumbing

    def spawn(self, coro: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        """Run ``coro`` on the loop; a failure becomes an ``error`` line, never a lost exception."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                log.error("%s failed", what, exc_info=exc)
                self.error.emit(f"{what} failed: {exc}")

        task.add_done_callback(done)
        return task

    @property
    def session_id(self) -> str | None:
        return self.state.session_id if self.state is not None else None

    # ------------------------------------------------------------------ loading and sessions

    async def load(self, session_id: str | None = None) -> bool:
        """Load the models off the UI thread, open a session; True when inputs can be submitted."""
        loop = asyncio.get_running_loop()
        self.ready_changed.emit(False, "Loading models…")

        def progress(line: str) -> None:  # called on the loading thread
            loop.call_soon_threadsafe(self._on_progress, line)

        started = time.perf_counter()
        try:
            self.engine = await loop.run_in_executor(None, self.services.build_engine, self.settings, progress)
            self.status_changed.emit("preparing intent prototypes")
            await self.engine.start()
            if session_id is None:
                sessions = await self.engine.ex.run("store", self.services.list_sessions, self.engine.store)
                session_id = sessions[-1]["session_id"] if sessions else None
            await self.open_session(session_id)
        except Exception as exc:  # noqa: BLE001 - shown to the user, who can pick another model
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.error("loading failed", exc_info=exc)
            self.status_changed.emit(f"Could not load: {message}")
            self.ready_changed.emit(False, f"Models did not load: {message}. Choose another in Settings (Ctrl+,).")
            return False
        self.ready = True
        took = time.perf_counter() - started
        log.info("ready in %.1f s: chat model %s, session %s", took,
                 getattr(self.engine.chat, "name", None) or self.settings.chat_model, self.session_id)
        self.status_changed.emit(f"Ready in {took:.1f} s")
        self.ready_changed.emit(True, "")
        return True

    def _on_progress(self, line: str) -> None:
        if not self.closed:
            self.status_changed.emit(line[:1].upper() + line[1:] + "…")
            self.ready_changed.emit(False, f"Loading: {line}…")

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        """Open (or create) a session and announce it; the canvas rebuilds from its graph."""
        self.state = await self.engine.open_session(session_id, title=title)
        self.session_opened.emit(self.state)
        return self.state

    async def sessions(self) -> list[dict[str, Any]]:
        return await self.engine.ex.run("store", self.services.list_sessions, self.engine.store)

    async def record(self, turn_id: str) -> TurnRecord | None:
        """The stored trace of a turn (None for history turns without a build)."""
        try:
            return await self.engine.turn_record(turn_id)
        except KeyError:
            return None

    # ------------------------------------------------------------------ turns

    def submit(self, text: str, *, anchor: str | None = None, budget: int | None = None) -> str | None:
        """Queue an input; returns its queue key (shown until it gets a turn id), None if refused."""
        text = text.strip()
        if not text:
            return None
        if not self.ready or self.state is None:
            self.error.emit("The models are still loading; your input was kept in the composer.")
            return None
        self._queue_seq += 1
        key = f"queued-{self._queue_seq}"
        self._pending.append((key, PendingTurn(text, anchor, budget, time.perf_counter())))
        self.turn_queued.emit(key, text)
        self._pump()
        return key

    def _pump(self) -> None:
        limit = max(1, int(self.settings.max_concurrent_streams))
        while self._pending and len(self.live) + self._starting < limit and not self.closed:
            key, pending = self._pending.popleft()
            self._starting += 1
            self.spawn(self._run_turn(key, pending), "the turn")

    async def _run_turn(self, key: str, pending: PendingTurn) -> None:
        holder: dict[str, str] = {}
        try:
            run = await self.engine.submit(
                self.session_id, pending.text, budget=pending.budget, anchor_override=pending.anchor,
                on_token=lambda piece: self._on_token(holder["turn_id"], piece),
            )
        except Exception as exc:  # noqa: BLE001 - the input is stored; the build failed
            self._starting -= 1
            self.turn_failed.emit(key, f"could not build a context: {exc}")
            self._pump()
            return
        holder["turn_id"] = run.turn_id
        self._starting -= 1
        live = LiveTurn(run.turn_id, run.node_id, pending.text[:60], run, started=time.perf_counter())
        self.live[run.turn_id] = live
        record = TurnRecord(turn_id=run.turn_id, session_id=run.session_id, node_id=run.node_id,
                            build=run.build, timing=run.timing)
        self.turn_routed.emit(key, run.turn_id, run.node_id, record)
        try:
            final = await run.done
        except Exception as exc:  # noqa: BLE001
            self.live.pop(run.turn_id, None)
            self.turn_failed.emit(run.turn_id, str(exc) or type(exc).__name__)
        else:
            self._on_flush()
            self.live.pop(run.turn_id, None)
            self.turn_finished.emit(run.turn_id, final)
        self._pump()

    def _on_token(self, turn_id: str, piece: str) -> None:
        live = self.live.get(turn_id)
        if live is None:
            return
        if live.first_token_at is None:
            live.first_token_at = time.perf_counter()
        live.text += piece
        live.pieces += 1
        self._dirty.add(turn_id)
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

    def stop(self, turn_id: str) -> None:
        """Stop one answer (within one token); a queued input is withdrawn instead."""
        live = self.live.get(turn_id)
        if live is not None:
            live.run.stop()
            return
        for item in list(self._pending):
            if item[0] == turn_id:
                self._pending.remove(item)
                self.turn_failed.emit(turn_id, "withdrawn before it started")

    def stop_all(self) -> None:
        for key, _ in list(self._pending):
            self.stop(key)
        for turn_id in list(self.live):
            self.stop(turn_id)

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
        return self.call("Re-anchoring", self.engine.reanchor, turn_id, anchor, then=self.reanchored.emit)

    def undo_reanchor(self, turn_id: str) -> asyncio.Task[Any] | None:
        return self.call("Undoing the re-anchor", self.engine.undo_reanchor, turn_id, then=self.reanchored.emit)

    # ------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        """Stop every answer, let the engine finish its bookkeeping, release the executors."""
        self.closed = True
        self._pending.clear()
        for live in list(self.live.values()):
            live.run.stop()
        me = asyncio.current_task()
        pending = [t for t in self._tasks if not t.done() and t is not me]
        if pending:
            await asyncio.wait(pending, timeout=10)
        self._flush.stop()
        if self.engine is not None:
            await self.engine.close()
