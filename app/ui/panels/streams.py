"""The Streams panel: the answers being generated right now, each with a Stop button.

The controller adds a row when a turn starts streaming, updates it as tokens arrive and finishes
it with the finish reason; a finished row stays, marked done, for ``linger_ms`` and then goes.
Stop asks (``stop_requested``) — the engine stops the stream within one token and the controller
then calls ``finish_stream``. A row's context menu also offers "Pause its task" (``pause_requested``:
the task the stream works on pauses, its work so far kept; resume it from its card). Clicking a row
emits ``selected`` with its turn id.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHeaderView,
    QMenu,
    QPushButton,
    QSpinBox,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.ui import theme
from app.ui.panels.widgets import empty_label, make_table, restyle

EMPTY_HINT = "No answers running. Answers appear here while they stream; Stop ends one within a token."
COLUMNS = ("Turn", "Status", "Tokens", "Elapsed", "Priority", "")
BUTTON = 5  # the Stop button's column
PRIORITY = 4  # the priority spin box's column
STOPPED = frozenset({"cancelled", "canceled", "stopped"})
FAILED = frozenset({"error", "failed"})


@dataclass(slots=True)
class StreamRow:
    """What the panel knows of one stream."""

    turn_id: str
    label: str
    status: str = "starting"
    tokens: int = 0
    started: float = 0.0
    finished: float | None = None
    priority: int = 0
    generation: int = 0  # bumps when the id is re-added, so an old removal timer does not fire on it

    def elapsed(self, now: float) -> float:
        """Seconds from start to finish (or to ``now`` while running)."""
        return (self.finished if self.finished is not None else now) - self.started


def fmt_elapsed(seconds: float) -> str:
    """"4.2 s" under a minute, "m:ss" above."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


class StreamsPanel(QWidget):
    """A list of running answers: label, status, tokens so far, elapsed time and Stop."""

    stop_requested = Signal(str)
    pause_requested = Signal(str)  # (id): pause the task the stream works on
    selected = Signal(str)
    priority_changed = Signal(str, int)  # (id, priority): a waiting input moves up or down the queue

    def __init__(self, parent: QWidget | None = None, *, linger_ms: int = 4000, tick_ms: int = 500) -> None:
        super().__init__(parent)
        self.linger_ms = linger_ms
        self._rows: dict[str, StreamRow] = {}
        self._order: list[str] = []
        self._generation = 0
        self.table: QTableWidget = make_table(COLUMNS, stretch_last=False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(PRIORITY, QHeaderView.ResizeMode.Fixed)
        self.table.setColumnWidth(PRIORITY, 64)
        header.setSectionResizeMode(BUTTON, QHeaderView.ResizeMode.Fixed)
        self.table.setColumnWidth(BUTTON, 72)
        self.empty = empty_label(EMPTY_HINT)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack)
        self._timer = QTimer(self)
        self._timer.setInterval(tick_ms)
        self._timer.timeout.connect(self._on_tick)
        self.table.cellClicked.connect(self._on_cell_clicked)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_menu)

    # ------------------------------------------------------------------ public API

    def add_stream(self, turn_id: str, label: str) -> None:
        """Show a new running answer (an id already shown is restarted in its row)."""
        self._generation += 1
        row = self._rows.get(turn_id)
        if row is None:
            row = self._rows[turn_id] = StreamRow(turn_id, label)
            self._order.append(turn_id)
            self._insert_row(len(self._order) - 1, row)
        else:
            item = self.table.item(self._order.index(turn_id), 0)
            item.setText(label)
            item.setToolTip(f"{label}\nturn {turn_id}")
        row.label, row.status, row.tokens, row.finished = label, "starting", 0, None
        row.started, row.generation = time.monotonic(), self._generation
        self._refresh(turn_id)
        self.stack.setCurrentWidget(self.table)
        if not self._timer.isActive():
            self._timer.start()

    def update_stream(self, turn_id: str, tokens: int, status: str) -> None:
        """Set the tokens so far and the status of a running answer (unknown ids are added)."""
        if turn_id not in self._rows:
            self.add_stream(turn_id, turn_id[:8])
        row = self._rows[turn_id]
        if row.finished is not None:
            return
        row.tokens = tokens
        if row.status != "stopping…":  # a stop was asked: keep saying so until the row finishes
            row.status = status
        self._refresh(turn_id)

    def finish_stream(self, turn_id: str, status: str) -> None:
        """Mark an answer done with ``status`` (e.g. "stop", "length", "cancelled", "error"); the
        row stays for ``linger_ms`` and is then removed."""
        row = self._rows.get(turn_id)
        if row is None:
            return
        row.status, row.finished = status, time.monotonic()
        self._refresh(turn_id)
        generation = row.generation
        QTimer.singleShot(self.linger_ms, self, lambda: self._remove(turn_id, generation))

    def rename_stream(self, old: str, new: str) -> None:
        """Give a row a new id in place (a queued input that became a turn keeps its row)."""
        row = self._rows.pop(old, None)
        if row is None or new in self._rows:
            return
        row.turn_id = new
        self._rows[new] = row
        r = self._order.index(old)
        self._order[r] = new
        self.table.item(r, 0).setToolTip(f"{row.label}\nturn {new}")

    def stream_ids(self) -> list[str]:
        """The turn ids shown, top to bottom."""
        return list(self._order)

    def stream(self, turn_id: str) -> StreamRow | None:
        """What the panel shows for ``turn_id``, or None."""
        return self._rows.get(turn_id)

    def stop_button(self, turn_id: str) -> QPushButton | None:
        """The Stop button of a row (None when the id is not shown)."""
        if turn_id not in self._order:
            return None
        widget = self.table.cellWidget(self._order.index(turn_id), BUTTON)
        return widget if isinstance(widget, QPushButton) else None

    def priority_box(self, turn_id: str) -> QSpinBox | None:
        """The priority spin box of a row (None when the id is not shown)."""
        if turn_id not in self._order:
            return None
        widget = self.table.cellWidget(self._order.index(turn_id), PRIORITY)
        return widget if isinstance(widget, QSpinBox) else None

    def changeEvent(self, event: QEvent) -> None:
        """On a theme switch, colour the rows again for the new palette."""
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange) and hasattr(self, "_timer"):
            restyle(self)
            for turn_id in self._order:
                self._refresh(turn_id)

    # ------------------------------------------------------------------ rows

    def _insert_row(self, r: int, row: StreamRow) -> None:
        """Add the table row for ``row``. Its widgets call back with ``row.turn_id`` at click
        time, so a rename needs no new widgets; rows are only ever removed from a timer, never
        from inside one of their own widgets' signals."""
        self.table.insertRow(r)
        label = QTableWidgetItem(row.label)
        label.setToolTip(f"{row.label}\nturn {row.turn_id}")
        self.table.setItem(r, 0, label)
        for c in (1, 2, 3):
            self.table.setItem(r, c, QTableWidgetItem(""))
        button = QPushButton("Stop")
        button.setToolTip("Stop this answer (it keeps what was generated so far)")
        button.clicked.connect(lambda _checked=False: self._on_stop(row.turn_id))
        self.table.setCellWidget(r, BUTTON, button)
        priority = QSpinBox()
        priority.setRange(-10, 10)
        priority.setValue(row.priority)
        priority.setToolTip("Higher runs sooner while the input waits for a free stream")
        priority.valueChanged.connect(lambda value: self._on_priority(row.turn_id, value))
        self.table.setCellWidget(r, PRIORITY, priority)

    def _refresh(self, turn_id: str) -> None:
        """Redraw one row's status, tokens, elapsed time and button."""
        if turn_id not in self._order:
            return
        r = self._order.index(turn_id)
        row = self._rows[turn_id]
        now = time.monotonic()
        colors = theme.colors_for()
        done = row.finished is not None
        status = self.table.item(r, 1)
        status.setText(f"done · {row.status}" if done else row.status)
        text = self.table.palette().text().color()
        if row.status in FAILED:
            status.setForeground(QColor(colors.error))
        elif row.status in STOPPED or row.status == "stopping…":
            status.setForeground(QColor(colors.warn))
        else:
            status.setForeground(QColor(colors.ok) if done else text)
        seconds = row.elapsed(now)
        rate = f" ({row.tokens / seconds:.1f}/s)" if row.tokens and seconds >= 0.5 else ""
        self.table.item(r, 2).setText(f"{row.tokens}{rate}")
        self.table.item(r, 3).setText(fmt_elapsed(seconds))
        priority = self.table.cellWidget(r, PRIORITY)
        if isinstance(priority, QSpinBox):
            priority.setEnabled(not done)
        button = self.table.cellWidget(r, BUTTON)
        if isinstance(button, QPushButton):
            button.setEnabled(not done and row.status != "stopping…")
            button.setText("Done" if done else "Stop")
        for c in (0, 2, 3):  # a restarted row comes back from muted
            self.table.item(r, c).setForeground(QColor(colors.muted) if done else text)

    def _remove(self, turn_id: str, generation: int) -> None:
        row = self._rows.get(turn_id)
        if row is None or row.generation != generation:
            return
        del self._rows[turn_id]
        r = self._order.index(turn_id)
        del self._order[r]
        self.table.removeRow(r)
        if not self._order:
            self.stack.setCurrentWidget(self.empty)

    def _on_tick(self) -> None:
        running = [t for t, row in self._rows.items() if row.finished is None]
        for turn_id in running:
            self._refresh(turn_id)
        if not running:
            self._timer.stop()

    def _on_stop(self, turn_id: str) -> None:
        row = self._rows.get(turn_id)
        if row is None or row.finished is not None:
            return
        row.status = "stopping…"
        self._refresh(turn_id)
        self.stop_requested.emit(turn_id)

    def row_menu(self, turn_id: str) -> QMenu | None:
        """The context menu of a running row: Pause its task, Stop (None: no such running row)."""
        row = self._rows.get(turn_id)
        if row is None or row.finished is not None:
            return None
        menu = QMenu(self)
        pause = menu.addAction("Pause its task (keeps the work)")
        pause.triggered.connect(lambda _checked=False: self.pause_requested.emit(turn_id))
        stop = menu.addAction("Stop")
        stop.triggered.connect(lambda _checked=False: self._on_stop(turn_id))
        return menu

    def _on_menu(self, at: QPoint) -> None:
        r = self.table.rowAt(at.y())
        menu = self.row_menu(self._order[r]) if 0 <= r < len(self._order) else None
        if menu is not None:
            menu.popup(self.table.viewport().mapToGlobal(at))  # non-modal, as every menu here

    def _on_priority(self, turn_id: str, value: int) -> None:
        row = self._rows.get(turn_id)
        if row is not None and row.finished is None:
            row.priority = value
            self.priority_changed.emit(turn_id, value)

    def _on_cell_clicked(self, r: int, _column: int) -> None:
        if 0 <= r < len(self._order):
            self.selected.emit(self._order[r])
