"""The main window: the canvas in the centre, the composer below it, dockable panels around it.

The window wires widgets to the ``EngineController`` and holds no engine logic: the scene
mirrors the session graph through its signals; turn progress arrives as controller signals. What
the user does beyond typing an input is done by action objects the window holds, each made with
the widgets and the controller it needs: ``canvas_actions`` (the canvas's gestures and node menu,
through the controller; re-anchoring and injecting undoable), ``detail_actions`` (the Context
tab's detail row, collapsed nodes' summaries), ``file_actions`` (the File menu: export, import,
settings, theme) and ``attach_actions`` (attach a file). They speak to the user through the
window's ``StatusLine``; the canvas actions also ask the window which turn is selected and to
show a turn (``canvas_actions.CanvasHost``). Startup shows the window at once; the models load
in the background while the status bar says what is happening.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QUndoStack
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from app.config import Settings, layout_file
from app.core.session import versions
from app.core.types import NodeKind
from app.ui.attach_actions import AttachActions
from app.ui.canvas.cards import card_texts
from app.ui.canvas.scene import CanvasScene
from app.ui.canvas.toolbar import CanvasToolbar
from app.ui.canvas.view import CanvasView
from app.ui.canvas_actions import CanvasActions
from app.ui.composer import ComposerWidget, RoutingBanner
from app.ui.controller import EngineController
from app.ui.detail_actions import DetailActions
from app.ui.file_actions import FileActions
from app.ui.menus import build_menus
from app.ui.panels.env import EnvPanel, failure_row, history_rows, routed_rows
from app.ui.panels.inspector import UNBUILT_NOTE, InspectorPanel, history_note
from app.ui.panels.memory import MemoryPanel
from app.ui.panels.node_page import node_details
from app.ui.panels.streams import StreamsPanel
from app.ui.panels.transcript import TranscriptPanel
from app.ui.services import Services
from app.ui.sessions import SessionsPanel
from app.ui.status_line import StatusLine

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord
    from app.core.session.state import SessionState

log = logging.getLogger(__name__)


def resident_memory_mb() -> float | None:
    """This process's resident memory in MB (None where the platform does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, AttributeError):
        return None




class MainWindow(QMainWindow):
    """Canvas, composer, inspector, streams and sessions; File/Edit/View/Turn menus."""

    closed = Signal()  # after the engine has shut down

    def __init__(self, settings: Settings, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.controller = EngineController(settings, services, self)
        self.undo = QUndoStack(self)
        self._closing = False
        self._shut = False
        self._selected_turn: str | None = None
        self._node_of_key: dict[str, str] = {}  # queue key → node id, once routed
        self.setWindowTitle("PCM Canvas")
        self.resize(1360, 860)

        self.scene = CanvasScene(self)
        self.scene.set_theme(settings.theme == "dark")  # the canvas keeps the theme across a restart
        self.view = CanvasView(self.scene, self)
        self.banner = RoutingBanner(self)
        self.composer = ComposerWidget(settings.default_budget, self)
        centre = QWidget(self)
        box = QVBoxLayout(centre)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(0)
        box.addWidget(self.view, 1)
        box.addWidget(self.banner)
        box.addWidget(self.composer)
        self.setCentralWidget(centre)

        self.inspector = InspectorPanel(self)
        self.inspector.evidence.text_lookup = self._evidence_text
        self.inspector.evidence.note_lookup = lambda i: self.controller.state.notes.get(i) if self.controller.state else None
        self.inspector.turn.label_of = self.controller.label_of
        self.inspector.turn.continue_requested.connect(self._on_continue_requested)
        self.streams = StreamsPanel(self)
        self.env = EnvPanel(self)
        self.sessions = SessionsPanel(self)
        self.transcript = TranscriptPanel(self)
        self.transcript.stored = lambda: self.controller.statuses
        self.memory = MemoryPanel(self)
        self.docks = {
            "inspector": self._dock("Inspector", self.inspector, Qt.DockWidgetArea.RightDockWidgetArea),
            "streams": self._dock("Streams", self.streams, Qt.DockWidgetArea.RightDockWidgetArea),
            "environment": self._dock("Environment", self.env, Qt.DockWidgetArea.RightDockWidgetArea),
            "sessions": self._dock("Sessions", self.sessions, Qt.DockWidgetArea.LeftDockWidgetArea),
            "conversation": self._dock("Conversation", self.transcript, Qt.DockWidgetArea.RightDockWidgetArea),
            "memory": self._dock("Memory", self.memory, Qt.DockWidgetArea.LeftDockWidgetArea),
        }
        self.tabifyDockWidget(self.docks["sessions"], self.docks["memory"])
        self.tabifyDockWidget(self.docks["streams"], self.docks["environment"])
        self.tabifyDockWidget(self.docks["inspector"], self.docks["conversation"])
        for name in ("inspector", "streams", "sessions"):
            self.docks[name].raise_()
        self.resizeDocks([self.docks["inspector"]], [460], Qt.Orientation.Horizontal)
        self.resizeDocks([self.docks["sessions"]], [200], Qt.Orientation.Horizontal)

        self._build_status_bar()
        self._build_toolbar()
        self.file_actions = FileActions(self.controller, services, self.scene, self.composer, self.status_line,
                                        parent=self, refresh_labels=self._update_status_labels)
        self.attach_actions = AttachActions(self.controller, self.composer, self.scene, self.status_line, parent=self)
        build_menus(self)
        self._connect()
        # After the window's own slots: on session_opened and turn_finished the canvas has the graph.
        self.detail_actions = DetailActions(self.controller, self.scene, self.inspector, self.status_line)
        self.canvas_actions = CanvasActions(self.controller, self.scene, self.composer, self.inspector, self.banner,
                                            self.undo, self.status_line, details=self.detail_actions, host=self)
        self._restore_layout()

    @property
    def settings(self) -> Settings:
        """The settings in use (the controller's; the File menu's settings dialog changes them)."""
        return self.controller.settings

    # ------------------------------------------------------------------ construction

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{title.lower()}")
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.status_line = StatusLine(bar)
        self.model_label = QLabel(self)
        self.memory_label = QLabel(self)
        self.budget_label = QLabel(self)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 0)  # busy: loading steps have no known length
        self.progress.setMaximumWidth(140)
        for w in (self.progress, self.model_label, self.budget_label, self.memory_label):
            bar.addPermanentWidget(w)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(2000)
        self._memory_timer.timeout.connect(self._on_memory_tick)
        self._memory_timer.start()
        self._update_status_labels()
        self._on_memory_tick()

    def _build_toolbar(self) -> None:
        self.toolbar = CanvasToolbar(self.scene, self.view, self.controller, self)  # filters, topics, zoom
        self.addToolBar(self.toolbar)
        self.search, self.kind_actions = self.toolbar.search, self.toolbar.kind_actions

    def _connect(self) -> None:
        c = self.controller
        self._connect_sessions()
        self.inspector.turn.edit_requested.connect(self._edit_again)
        self.transcript.turn_clicked.connect(  # a turn named in the conversation: select it
            lambda turn_id: self._turn_of_id(turn_id) and self.controller.spawn(self.show_turn(turn_id), "Reading"))
        c.status_changed.connect(self._on_status)
        c.ready_changed.connect(self._on_ready_changed)
        c.session_opened.connect(self._on_session_opened)
        c.turn_queued.connect(self._on_turn_queued)
        c.turn_routed.connect(self._on_turn_routed)
        c.answer_updated.connect(self._on_answer_updated)
        c.turn_finished.connect(self._on_turn_finished)
        c.turn_failed.connect(self._on_turn_failed)
        c.error.connect(self.status_line.error)
        c.env_ingested.connect(self._on_env_ingested)
        c.env_pushed.connect(self._on_env_pushed)
        c.env_failed.connect(self._on_env_failed)
        c.sensors_status.connect(self.env.set_sensor_status)
        c.turn_statuses.connect(self.scene.set_node_statuses)
        c.off_machine.connect(self.scene.mark_off_machine)
        self.env.selected.connect(self._on_env_selected)
        self.composer.submitted.connect(self._on_submitted)
        self.composer.stop_requested.connect(self.stop_all)
        c.busy_changed.connect(self.composer.set_busy)
        self.scene.node_selected.connect(self._on_node_selected)
        self.streams.stop_requested.connect(self.controller.stop)
        self.streams.pause_requested.connect(self.controller.pause_task_of)
        self.streams.priority_changed.connect(self.controller.set_priority)
        self.streams.selected.connect(self._on_stream_selected)
        hover = getattr(self.inspector, "evidence_hovered", None)
        if hover is not None:
            hover.connect(self._on_evidence_hovered)

    # ------------------------------------------------------------------ startup and shutdown

    def start(self, session_id: str | None = None) -> asyncio.Task[Any]:
        """Begin loading the models (the window is already showing)."""
        return self.controller.spawn(self.controller.load(session_id), "Loading")

    def bring_forward(self, file: Path | None = None) -> None:
        """Another start on this data folder asked for the window: show it in front, and import
        ``file`` (an exported session) once the models are ready."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()
        if file is not None:
            self.controller.spawn(self.file_actions.import_when_ready(file), "Opening")

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        # qasync cannot await after aboutToQuit: refuse the first close, shut the engine down on
        # the loop, then close for real.
        if self._shut:
            self._save_layout()
            event.accept()
            return
        event.ignore()
        if not self._closing:
            self._closing = True
            self._save_layout()
            self.hide()
            self.controller.spawn(self._shutdown(), "Shutting down")

    async def _shutdown(self) -> None:
        try:
            await self.controller.close()
        finally:
            self._shut = True
            self.close()
            self.closed.emit()

    def _layout_store(self) -> QSettings:
        """The window layout in the user config folder (``app.config.layout_file``)."""
        return QSettings(str(layout_file(self.settings.data_dir)), QSettings.Format.IniFormat)

    def _save_layout(self) -> None:
        try:
            store = self._layout_store()
            store.setValue("geometry", self.saveGeometry())
            store.setValue("state", self.saveState())
        except OSError:  # a read-only data folder must not stop the app from closing
            pass

    def _restore_layout(self) -> None:
        store = self._layout_store()
        if store.value("geometry") is not None:
            self.restoreGeometry(store.value("geometry"))
        if store.value("state") is not None:
            self.restoreState(store.value("state"))

    # ------------------------------------------------------------------ status

    def _on_status(self, line: str) -> None:
        self.status_line.say(line, 8000)

    def _on_ready_changed(self, ready: bool, reason: str) -> None:
        self.composer.set_ready(ready, reason)
        loading = not ready and reason.startswith("Loading")
        self.progress.setVisible(loading)
        self._update_status_labels()

    def _update_status_labels(self) -> None:
        engine = self.controller.engine
        model = (engine.model_name if engine is not None else None) or self.settings.chat_model
        state = "ready" if self.controller.ready else "loading"
        self.model_label.setText(f"Model: {model} ({state})")
        models = self.services.models  # what the bundled model can and cannot do, while it answers
        note = models.note(self.settings) if models is not None and model == self.settings.chat_model else ""
        self.model_label.setToolTip(note)
        self.model_label.setText(self.model_label.text() + (f" · {note}" if note else ""))
        turns = len(self.controller.state.turn_order) if self.controller.state else 0
        self.budget_label.setText(f"Budget {self.composer.budget.value()} tok · ctx {self.settings.context_size} · {turns} turns")
        self._on_memory_tick()  # "N streaming" changes with each turn, not only every tick

    def _on_memory_tick(self) -> None:
        mb = resident_memory_mb()
        self.memory_label.setText(f"Memory {mb:.0f} MB" if mb is not None else "")
        live = len(self.controller.live)
        if live:
            self.memory_label.setText(self.memory_label.text() + f" · {live} streaming")

    # ------------------------------------------------------------------ sessions

    def _on_session_opened(self, state: SessionState) -> None:
        self.scene.set_graph(state.graph)
        self.scene.set_card_texts(card_texts(state))  # titles, inputs and answers, as before a restart
        self.inspector.show_record(None)
        self._selected_turn = None
        self.undo.clear()
        self.banner.hide()
        self.composer.set_anchor(None, "")  # a node pinned in the session left behind is not in this one
        self.transcript.finishes.clear()
        self.transcript.show_branch(None, None)
        self._update_status_labels()
        QTimer.singleShot(0, self.view.fit_readable)
        self.controller.spawn(self._refresh_sessions(), "Listing sessions")
        self.env.clear()
        self.controller.spawn(self._show_env_history(state), "Reading the environment history")

    async def _show_env_history(self, state: SessionState) -> None:
        """The Environment dock shows the session's stored events (then new ones as they come)."""
        events = await self.controller.env_events()
        if self.controller.state is state:
            self.env.add_history(history_rows(state.graph, events))

    def _connect_sessions(self) -> None:
        self.sessions.bind(self.controller)
        self.memory.bind(self.controller)
        self.sessions.open_requested.connect(self._open_session)
        self.sessions.new_requested.connect(self.new_session)
        self.sessions.title_changed.connect(
            lambda title: self.setWindowTitle(f"PCM Canvas — {title}" if title else "PCM Canvas"))

    async def _refresh_sessions(self) -> None:
        await self.sessions.refresh()

    def _open_session(self, session_id: str) -> None:
        if session_id != self.controller.session_id and self.controller.engine is not None:
            self.controller.spawn(self.controller.open_session(session_id), "Opening the session")

    def new_session(self) -> None:
        if self.controller.engine is None:
            self.status_line.error("The models are still loading.")
            return
        self.controller.spawn(self.controller.open_session(None), "Creating a session")  # its first input names it

    # ------------------------------------------------------------------ turns

    def stop_all(self) -> None:
        """Stop every answer (Stop, Ctrl+.): acknowledged in this event-loop turn — Stop reads
        "Stopping…", each running row says "stopping…" and the status bar says so — before the
        answers end (a stream stops within a token; one waiting for the model when it gets it)."""
        c = self.controller
        if not c.busy():
            self.status_line.say("Nothing is answering.", 3000)
            return
        self.composer.set_stopping()
        for turn_id, live in c.live.items():
            self.streams.update_stream(turn_id, live.pieces, "stopping…")
        self.status_line.say(f"Stopping {len(c.handles)} answer(s)…")
        c.stop_all()

    def _on_submitted(self, text: str, anchor: str | None, budget: int) -> None:
        self.controller.submit(text, anchor=anchor, budget=budget)

    def _on_continue_requested(self, node: str) -> None:
        """An answer cut at its limit: ask for the rest, on that turn."""
        from app.core.engine.answer_length import CONTINUE_TEXT  # here: the window shows before the engine loads

        self._on_submitted(CONTINUE_TEXT, node, self.composer.budget.value())

    def _on_turn_queued(self, key: str, text: str) -> None:
        self.streams.add_stream(key, text[:60])
        self.streams.update_stream(key, 0, "queued")

    def _on_turn_routed(self, key: str, turn_id: str, node_id: str, record: TurnRecord) -> None:
        self._node_of_key[key] = node_id
        self.streams.rename_stream(key, turn_id)
        self.streams.update_stream(turn_id, 0, "waiting for the model")
        routing = record.build.routing
        if self.controller.state is not None:
            self.scene.set_card_texts(card_texts(self.controller.state, [node_id]))
        self.scene.set_node_status(node_id, "ambiguous" if routing.get("ambiguous") else "streaming")
        state = self.controller.state  # a regenerated turn says so, not "your choice"
        version = state is not None and bool(state.graph.node(node_id).attrs.get(versions.VERSION_OF))
        self.banner.show_routing(turn_id, routing, self.controller.labels(), version=version)
        self.view.center_on_node(node_id)
        self._select_turn(turn_id, record)
        self._update_status_labels()

    def _on_answer_updated(self, turn_id: str, text: str) -> None:
        live = self.controller.live.get(turn_id)
        if live is None:
            return
        self.scene.set_node_body(live.node_id, text, streaming=True)
        self.streams.update_stream(turn_id, live.pieces, "streaming")
        if self._selected_turn == turn_id and hasattr(self.inspector, "set_streaming_text"):
            self.inspector.set_streaming_text(text)

    def _on_turn_finished(self, turn_id: str, record: TurnRecord) -> None:
        node_id = record.node_id or ""
        status = {"stop": "answered", "length": "answered", "cancelled": "stopped", "error": "failed"}.get(record.finish_reason, "answered")
        self.scene.set_node_body(node_id, record.output, streaming=False)
        self.scene.set_node_status(node_id, status)
        self.transcript.finishes[turn_id] = record.finish_reason
        if self.transcript.node_id is not None:  # its answer may be on the branch read there
            self.transcript.show_branch(self.controller.state, self.transcript.node_id)
        self.streams.finish_stream(turn_id, status)
        if self._selected_turn == turn_id:
            self.inspector.show_record(record)
        self._update_status_labels()
        self.controller.spawn(self._refresh_sessions(), "Listing sessions")
        if status == "failed":  # the model's error, in one line (the card alone says only "failed")
            reason = " ".join(str(record.usage.get("error") or "").split()) or "the model reported an error"
            self.status_line.error(f"The answer failed: {reason}")

    def _on_turn_failed(self, key: str, message: str, text: str) -> None:
        self.streams.finish_stream(key, "failed")
        self.transcript.finishes.setdefault(key, "error")
        live_node = self._node_of_key.get(key)
        if live_node:
            self.scene.set_node_status(live_node, "failed")
        if text:  # never recorded as a turn: the input goes back to the composer, nothing is lost
            self.composer.restore(text)
            self.composer.show_notice(f"Not sent: {message}. Your text is back in the box.",
                                      "Send again, letting routing choose", self._resend_routed)
            return
        self.status_line.error(f"A turn failed: {message}")

    def _resend_routed(self) -> None:
        self.composer.set_anchor(None, "")
        self.composer.send.click()

    def _on_stream_selected(self, turn_id: str) -> None:
        live = self.controller.live.get(turn_id)
        if live is not None:
            self.view.center_on_node(live.node_id)

    # ------------------------------------------------------------------ environment

    def _on_env_ingested(self, routed: list[Any]) -> None:
        self.env.add_events(routed_rows(routed, self.controller.labels()))

    def _on_env_failed(self, entries: list[dict[str, Any]]) -> None:
        self.env.add_events([failure_row(e) for e in entries])
        self.status_line.say(f"{len(entries)} environment event(s) could not be stored or indexed: "
                             "see the Environment dock", 15000)

    def _on_env_pushed(self, notice: Any) -> None:
        title = notice.event.title or notice.event.uri
        self.status_line.say(f"Push: “{title}” changed while task “{notice.task.name}” is active", 15000)
        self.scene.highlight({notice.node_id})

    def _on_env_selected(self, node_id: str) -> None:
        self.view.center_on_node(node_id)
        self.scene.select([node_id])

    # ------------------------------------------------------------------ selection and inspection

    def _edit_again(self, text: str, anchor: str) -> None:
        """An input back in the composer, on the branch it continued, to be changed and resent."""
        self.composer.edit.setPlainText(text)
        self.composer.set_anchor(anchor or None, self.controller.labels().get(anchor, ""))
        self.composer.edit.setFocus()

    def _turn_of_id(self, turn_id: str) -> bool:
        return self.controller.state is not None and turn_id in self.controller.state.turns

    def _on_node_selected(self, node_id: str) -> None:
        turn_id = self.controller.turn_of(node_id) if node_id else None
        shown = self.inspector.record
        if turn_id is not None and shown is not None and shown.turn_id == turn_id:
            return  # already in the inspector (``_select_turn`` selected its card)
        self.scene.clear_candidates()  # the scored routing lines follow the selected turn
        if turn_id is not None:
            self.controller.spawn(self.show_turn(turn_id), "Reading the turn")
        elif node_id and self.controller.state is not None and node_id in self.controller.state.graph:
            self.controller.spawn(self._show_node(node_id), "Reading the node")

    async def _show_node(self, node_id: str) -> None:
        state = self.controller.state
        assert state is not None  # asked for a node of the open session
        node = state.graph.node(node_id)
        events = await self.controller.env_events() if node.kind in (NodeKind.ENV, NodeKind.ARTIFACT) else []
        event, self._selected_turn = next((e for e in events if e.event_id == node.ref_id), None), None
        self.inspector.show_node(*node_details(state.graph, node_id, event))

    @property
    def selected_turn(self) -> str | None:
        """The turn the inspector shows (None when it shows another node, or nothing)."""
        return self._selected_turn

    async def show_turn(self, turn_id: str) -> None:
        """Read the turn's record and show it (``_select_turn``)."""
        c = self.controller
        record = await c.record(turn_id)
        if record is None and c.engine is not None and c.session_id is not None:  # history, or no build: say which
            c.statuses.update(await c.engine.turn_statuses(c.session_id))
        self._select_turn(turn_id, record)

    def _select_turn(self, turn_id: str, record: TurnRecord | None) -> None:
        """Show the turn in the inspector and select its card: the two always show one turn."""
        self._selected_turn = turn_id
        self.inspector.show_record(record)
        node = self.controller.state.node_of(turn_id) if self.controller.state is not None else None
        if node and self.scene.selected_ids() != [node]:
            self.scene.select([node])
        routing = record.build.routing if record is not None and node else {}
        self.scene.show_candidates(node or "", [(c["node_id"], float(c["score"])) for c in routing.get("candidates", [])],
                                   routing.get("anchor_id"))  # its routing's scored lines: only for the selection
        self.canvas_actions.show_versions(node)
        self.transcript.show_branch(self.controller.state, node)
        status, state = self.controller.statuses.get(turn_id), self.controller.state
        if record is None and status == "interrupted":
            self.inspector.show_note(UNBUILT_NOTE)
        elif record is None and status == "history" and state is not None and state.turns[turn_id].message_ids:
            view = state.messages[state.turns[turn_id].message_ids[0]]
            self.inspector.show_note(history_note(view.speaker, view.text, view.at))
        live = self.controller.live.get(turn_id)
        if live is not None and live.text and hasattr(self.inspector, "set_streaming_text"):
            self.inspector.set_streaming_text(live.text)

    def _evidence_text(self, evidence_id: str) -> str | None:
        state = self.controller.state
        view = state.messages.get(evidence_id) if state is not None else None
        return f"{view.speaker}: {view.text}" if view is not None else None

    def _on_evidence_hovered(self, evidence_ids: list[str]) -> None:
        state = self.controller.state
        self.scene.highlight(state.nodes_of_evidence(evidence_ids) if state is not None else set())
