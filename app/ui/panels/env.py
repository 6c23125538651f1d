"""The Environment panel: recent environment events and the sensors' health.

Each row is one stored env event (a file edited in a watched folder, a feed item, a changed API
value): when, kind, what, the change, where it was routed (a task or branch, or the environment
lane) and whether it pushed a notice to an active task. What the event carries a note about is
said after its name: a file the confined reader refused ("refused: link out of the watched
folder"), a file with several names (hard links), hidden HTML left out. Events that could not be
stored (or were stored but not indexed) have rows of their own, "not stored" / "not indexed",
with the reason. Clicking a row emits ``selected`` with the event's canvas node. Above the table
a line per sensor says when it last worked or why it failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from app.core.text.quoting import quote_label
from app.core.types import EdgeKind, NodeKind
from app.ui.panels.widgets import make_table

COLUMNS = ("When", "Kind", "What", "Change", "Routed to", "Push")
MAX_ROWS = 500  # the panel shows the newest; everything stays in the store


@dataclass(frozen=True, slots=True)
class EnvRow:
    """What the panel shows of one event."""

    event_id: str
    node_id: str | None
    at: str
    kind: str
    title: str
    change: str
    routed_to: str  # a label, or "" for the environment lane
    pushed: bool = False
    note: str = ""  # what the user should know about it (a refusal, hard links, a failure's reason)


def event_note(payload: dict[str, Any]) -> str:
    """What an event's payload says the user should know: a refusal or why it was not read,
    hard links, hidden HTML left out."""
    notes = []
    if payload.get("message"):
        notes.append(str(payload["message"]))
    elif payload.get("skipped"):
        notes.append(f"not read: {str(payload['skipped']).replace('_', ' ')}")
    links = payload.get("hard_links")
    if isinstance(links, int) and links > 1:
        notes.append(f"{links} names (hard links); another may be outside the folder")
    if payload.get("hidden_removed"):
        notes.append(f"{payload['hidden_removed']} hidden HTML element(s) left out")
    return "; ".join(notes)


def failure_row(entry: dict[str, Any]) -> EnvRow:
    """The row of a recorded failure (an ``env.failed`` / ``env.unindexed`` entry)."""
    stored = entry.get("type") == "env.unindexed"
    return EnvRow(str(entry.get("event_id", "")), None, str(entry.get("at", "")), str(entry.get("kind", "")),
                  quote_label(str(entry.get("title") or entry.get("uri") or "")), "not indexed" if stored else "not stored",
                  "", note=str(entry.get("reason", "")))


def routed_rows(routed: list[Any], labels: dict[str, str]) -> list[EnvRow]:
    """The rows of events just stored and routed (the engine's ``EnvRouted``); ``labels`` names
    the nodes they were routed to."""
    return [EnvRow(r.event.event_id, r.node_id, r.event.at, r.event.kind, quote_label(r.event.title or r.event.uri),
                   str(r.event.payload.get("change", "")),
                   labels.get(r.target_node, "")[:40] if r.target_node else "", r.notice is not None,
                   note=event_note(r.event.payload))
            for r in routed]


def history_rows(graph: Any, events: list[Any]) -> list[EnvRow]:
    """The rows of a session's stored env events, oldest first, as they were shown when they
    arrived: each ENV node of ``graph`` with where its ``references`` edge routed it, and the
    notes of the stored event (``events``: the session's ``EnvEvent``s)."""
    payloads = {e.event_id: e.payload for e in events}
    rows = []
    for node in graph.nodes(NodeKind.ENV):
        attrs = node.attrs
        edges = graph.out_edges(node.node_id, EdgeKind.REFERENCES)
        target = graph.node(edges[-1].dst) if edges and edges[-1].dst in graph else None
        rows.append(EnvRow(node.ref_id or "", node.node_id, str(attrs.get("at") or node.created_at or ""),
                           str(attrs.get("kind", "")), node.label, str(attrs.get("change", "")),
                           target.label[:40] if target is not None else "",
                           note=event_note(payloads.get(node.ref_id or "", {}))))
    return sorted(rows, key=lambda row: row.at)


class EnvPanel(QWidget):
    """Newest environment events first, with where each was routed; sensor status on top."""

    selected = Signal(str)  # node id of the clicked event

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[EnvRow] = []
        self.status = QLabel("No sensors configured — add watched folders, feeds or endpoints in Settings (Ctrl+,).", self)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.table: QTableWidget = make_table(COLUMNS, stretch_last=False)
        header = self.table.horizontalHeader()
        # Fixed widths: ResizeToContents re-measures every row on each cell set, which made a
        # burst of file events freeze the window for seconds (quadratic in the rows shown).
        for column, width in ((0, 70), (1, 44), (3, 70), (4, 150), (5, 50)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            self.table.setColumnWidth(column, width)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.cellClicked.connect(self._on_clicked)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.status)
        box.addWidget(self.table, 1)

    def add_events(self, rows: list[EnvRow]) -> None:
        """Put ``rows`` on top (newest first), keeping at most ``MAX_ROWS``."""
        if rows:
            self._show((list(reversed(rows)) + self.rows)[:MAX_ROWS])

    def add_history(self, rows: list[EnvRow]) -> None:
        """Put ``rows`` (oldest first: stored events of an earlier run) below those shown."""
        if rows:
            self._show((self.rows + list(reversed(rows)))[:MAX_ROWS])

    def _show(self, rows: list[EnvRow]) -> None:
        self.rows = rows
        self.table.setUpdatesEnabled(False)
        self.table.setRowCount(len(self.rows))
        for r, row in enumerate(self.rows):
            what = f"{row.title} — {row.note}" if row.note else row.title
            routed = row.routed_to or ("—" if row.node_id is None else "environment lane")
            values = (row.at[11:19] or row.at, row.kind, what, row.change, routed, "pushed" if row.pushed else "")
            for c, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip("\n".join(part for part in (row.title, row.note, row.at) if part))
                self.table.setItem(r, c, item)
        self.table.setUpdatesEnabled(True)

    def clear(self) -> None:
        """No rows (another session is shown)."""
        self.rows = []
        self.table.setRowCount(0)

    def set_sensor_status(self, lines: list[str]) -> None:
        """One line per sensor (e.g. "feed https://…: ok 12:04, 31 items" or its last error)."""
        self.status.setText("\n".join(lines) if lines else
                            "No sensors configured — add watched folders, feeds or endpoints in Settings (Ctrl+,).")

    def _on_clicked(self, r: int, _column: int) -> None:
        if 0 <= r < len(self.rows) and self.rows[r].node_id:
            self.selected.emit(self.rows[r].node_id)
