"""The Sessions dock: find a session, open it with one click, rename it, archive it with undo.

Renaming, archiving and searching go to the engine through the controller (``bind``); opening
and creating a session are the window's (``open_requested``, ``new_requested``), which then
calls ``refresh``. Nothing is deleted from here: archiving hides a session, and the bar that says
so offers Undo.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

UNTITLED = "New session"
UNDO_MS = 15000  # how long the "Archived … Undo" bar stays


def row_text(row: dict[str, Any]) -> str:
    """Two lines: the title, then turns and when it was last opened (or created)."""
    turns = int(row.get("turn_count") or 0)
    when = str(row.get("opened_at") or row.get("created_at") or "")[:16].replace("T", " ")
    archived = " · archived" if row.get("archived_at") else ""
    return f"{row.get('title') or UNTITLED}\n{turns} turn{'s' if turns != 1 else ''} · {when}{archived}"


class SessionsPanel(QWidget):
    """Search box, New session, the list (newest first), an in-place rename box, the undo bar."""

    open_requested = Signal(str)
    new_requested = Signal()
    rename_requested = Signal(str, str)  # session id, new title
    archive_requested = Signal(str, bool)  # session id, archived (False: undo / unarchive)
    search_changed = Signal(str)  # the search text, after typing pauses ("" = show all)
    title_changed = Signal(str)  # the open session's title, as listed ("" when none is open)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        self._renaming: str | None = None
        self._undo_id: str | None = None

        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search titles and messages")
        self.search.setClearButtonEnabled(True)
        self._debounce = QTimer(self, singleShot=True, interval=250)
        self._debounce.timeout.connect(lambda: self.search_changed.emit(self.search.text().strip()))
        self.search.textChanged.connect(lambda _text: self._debounce.start())
        self.new_button = QPushButton("New session", self)
        self.new_button.clicked.connect(self.new_requested.emit)
        self.archived_box = QCheckBox("Show archived", self)
        self.controller: Any = None

        self.list = QListWidget(self)
        self.list.setWordWrap(True)
        self.list.itemClicked.connect(self._clicked)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.empty = QLabel("No session matches.", self)
        self.empty.setVisible(False)

        self.rename_box = QLineEdit(self)
        self.rename_box.setPlaceholderText("New title — Enter to keep, Esc to cancel")
        self.rename_box.setVisible(False)
        self.rename_box.returnPressed.connect(self._rename_done)
        self.rename_box.editingFinished.connect(lambda: QTimer.singleShot(0, self._rename_cancel))  # after Enter

        self.undo_label = QLabel(self)
        self.undo_label.setWordWrap(True)
        self.undo_button = QPushButton("Undo", self)
        self.undo_button.clicked.connect(self._undo)
        self._undo_timer = QTimer(self, singleShot=True, interval=UNDO_MS)
        self._undo_timer.timeout.connect(self._hide_undo)
        undo_bar = QHBoxLayout()
        undo_bar.addWidget(self.undo_label, 1)
        undo_bar.addWidget(self.undo_button)
        self._hide_undo()

        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self.new_button)
        box.addWidget(self.search)
        box.addWidget(self.list, 1)
        box.addWidget(self.empty)
        box.addWidget(self.rename_box)
        box.addLayout(undo_bar)
        box.addWidget(self.archived_box)

    # ------------------------------------------------------------------ the engine side

    def bind(self, controller: Any) -> None:
        """Carry out renames, archiving and searches through ``controller`` (an
        ``EngineController``), refreshing the list after each."""
        self.controller = controller
        self.rename_requested.connect(lambda sid, title: self._change(
            controller.rename_session(sid, title), "Renaming the session"))
        self.archive_requested.connect(lambda sid, archived: self._change(
            controller.archive_session(sid, archived),
            "Archiving the session" if archived else "Bringing the session back"))
        self.search_changed.connect(lambda _text: self._change(None, "Searching sessions"))
        self.archived_box.toggled.connect(lambda _on: self._change(None, "Listing sessions"))

    def _change(self, change: Any, what: str) -> None:
        async def run() -> None:
            if change is not None:
                await change
            await self.refresh()

        self.controller.spawn(run(), what)

    async def refresh(self) -> None:
        """List the sessions as stored (archived ones too when asked), filtered by the search."""
        c, archived = self.controller, self.archived_box.isChecked()
        rows = await c.sessions(archived=archived)
        text = self.search.text().strip()
        matches = set(await c.search_sessions(text, archived=archived)) if text else None
        self.show_rows(rows, c.session_id, matches)
        current = self.rows.get(c.session_id or "")
        self.title_changed.emit((current.get("title") or UNTITLED) if current else "")

    # ------------------------------------------------------------------ showing

    def show_rows(self, rows: list[dict[str, Any]], current: str | None, matches: set[str] | None = None) -> None:
        """List ``rows`` (as the store lists them, oldest first) newest first; only ``matches``
        when a search is on. The open session ``current`` is selected."""
        self.rows = {row["session_id"]: row for row in rows}
        self.current = current
        self.list.clear()
        for row in reversed(rows):
            if matches is not None and row["session_id"] not in matches:
                continue
            item = QListWidgetItem(row_text(row))
            item.setData(Qt.ItemDataRole.UserRole, row["session_id"])
            item.setToolTip(f"{row.get('title') or UNTITLED} · id {row['session_id'][:8]}")
            self.list.addItem(item)
            if row["session_id"] == current:
                item.setSelected(True)
        self.empty.setVisible(self.list.count() == 0 and matches is not None)

    def session_ids(self) -> list[str]:
        """The ids listed, top to bottom (tests, and keyboard users through the list)."""
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())]

    # ------------------------------------------------------------------ actions

    def _clicked(self, item: QListWidgetItem) -> None:
        session_id = item.data(Qt.ItemDataRole.UserRole)
        if session_id != self.current:
            self.open_requested.emit(session_id)

    def _menu(self, at: QPoint) -> None:
        item = self.list.itemAt(at)
        if item is None:
            return
        session_id = item.data(Qt.ItemDataRole.UserRole)
        menu = QMenu(self)
        menu.addAction("Open", lambda: self.open_requested.emit(session_id))
        menu.addAction("Rename…", lambda: self.start_rename(session_id))
        if self.rows.get(session_id, {}).get("archived_at"):
            menu.addAction("Unarchive", lambda: self.archive_requested.emit(session_id, False))
        else:
            menu.addAction("Archive", lambda: self.archive(session_id))
        menu.popup(self.list.viewport().mapToGlobal(at))

    def start_rename(self, session_id: str) -> None:
        """Show the rename box under the list, filled with the current title, focused."""
        self._renaming = session_id
        self.rename_box.setText(self.rows.get(session_id, {}).get("title") or "")
        self.rename_box.setVisible(True)
        self.rename_box.selectAll()
        self.rename_box.setFocus()

    def _rename_done(self) -> None:
        session_id, title = self._renaming, " ".join(self.rename_box.text().split())
        self._rename_cancel()
        if session_id is not None and title and title != self.rows.get(session_id, {}).get("title"):
            self.rename_requested.emit(session_id, title)

    def _rename_cancel(self) -> None:
        self._renaming = None
        self.rename_box.setVisible(False)

    def keyPressEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        if event.key() == Qt.Key.Key_Escape and self.rename_box.isVisible():
            self._rename_cancel()
            return
        super().keyPressEvent(event)

    def archive(self, session_id: str) -> None:
        """Ask to archive the session, and offer Undo for a while."""
        self.archive_requested.emit(session_id, True)
        title = self.rows.get(session_id, {}).get("title") or UNTITLED
        self._undo_id = session_id
        self.undo_label.setText(f"Archived “{title}”. It is kept; Show archived lists it.")
        self.undo_label.setVisible(True)
        self.undo_button.setVisible(True)
        self._undo_timer.start()

    def _undo(self) -> None:
        if self._undo_id is not None:
            self.archive_requested.emit(self._undo_id, False)
        self._hide_undo()

    def _hide_undo(self) -> None:
        self._undo_id = None
        self.undo_label.setVisible(False)
        self.undo_button.setVisible(False)
