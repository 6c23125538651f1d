"""Small building blocks the inspector tabs share: bars, sortable cells, tables, raw JSON, labels."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, QObject, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.ui import theme

_HEX_ID = re.compile(r"[0-9a-f]{16,}")
SORT_ROLE = int(Qt.ItemDataRole.UserRole) + 1
IDS_ROLE = int(Qt.ItemDataRole.UserRole) + 2  # evidence ids a row or line stands for


def short_id(value: str | None, n: int = 8) -> str:
    """An opaque hex id cut to ``n`` characters; readable ids (``profile:…``) whole; "—" for none."""
    if not value:
        return "—"
    return value[:n] if _HEX_ID.fullmatch(value) else value


def fmt_ms(value: float | None) -> str:
    """Milliseconds for people: "0.42 ms", "12.4 ms", "1.85 s"; "—" when not measured."""
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def fmt_value(value: Any) -> str:
    """A plan or intent value as one readable line (lists joined, dicts as key=value)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(fmt_value(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt_value(v)}" for k, v in value.items()) if value else "(none)"
    return str(value) if value != "" else "(empty)"


def set_role(label: QLabel, role: str) -> QLabel:
    """Mark a label as error / ok / muted / empty / section (styled by the theme, coloured here too)."""
    label.setProperty("role", role)
    colors = theme.colors_for()
    color = {"error": colors.error, "ok": colors.ok, "muted": colors.muted, "empty": colors.muted}.get(role)
    parts = [f"color: {color};"] if color else []
    if role == "empty":
        parts.append("font-style: italic; padding: 24px;")
    if role == "section":
        parts.append("font-weight: bold; padding-top: 6px;")
    label.setStyleSheet(" ".join(parts))
    return label


def restyle(root: QWidget) -> None:
    """Re-colour every role-marked label under ``root`` for the palette now in use."""
    for label in root.findChildren(QLabel):
        role = label.property("role")
        if role:
            set_role(label, str(role))


def empty_label(text: str) -> QLabel:
    """A centred, muted hint that says what to do when there is nothing to show."""
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    return set_role(label, "empty")


def section_label(text: str) -> QLabel:
    """A bold heading between the parts of a tab."""
    return set_role(QLabel(text), "section")


class SortableItem(QTableWidgetItem):
    """A table cell that sorts by a key (numbers as numbers, missing values last)."""

    def __init__(self, text: str, key: Any = None) -> None:
        super().__init__(text)
        self.setData(SORT_ROLE, text if key is None else key)
        self.setFlags(self.flags() & ~Qt.ItemFlag.ItemIsEditable)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        try:
            return bool(a < b)
        except TypeError:
            return str(a) < str(b)


def make_table(headers: Sequence[str], *, sortable: bool = False, stretch_last: bool = True) -> QTableWidget:
    """A read-only, row-selecting table with the given column headers."""
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setStretchLastSection(stretch_last)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.setWordWrap(False)
    # No sort column until the user clicks a header: rows keep the order they were filled in.
    table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
    table.setSortingEnabled(sortable)
    return table


def fill_table(table: QTableWidget, rows: Sequence[Sequence[QTableWidgetItem | str]]) -> None:
    """Replace the table's rows (strings become plain read-only cells), then fit the columns."""
    sorting = table.isSortingEnabled()
    table.setSortingEnabled(False)
    table.clearContents()
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            table.setItem(r, c, cell if isinstance(cell, QTableWidgetItem) else SortableItem(str(cell)))
    table.resizeColumnsToContents()
    for c in range(table.columnCount()):
        table.setColumnWidth(c, min(table.columnWidth(c), 420))
    table.setSortingEnabled(sorting)


def fit_height(table: QTableWidget, max_rows: int = 12) -> None:
    """Size a small table to its rows (up to ``max_rows``) so sections stack without scrolling."""
    rows = min(table.rowCount(), max_rows)
    height = table.horizontalHeader().height() + 2 * table.frameWidth() + 4
    height += sum(table.rowHeight(r) for r in range(rows)) if rows else 24
    if table.horizontalHeader().length() > table.viewport().width():  # a scroll bar would hide the last row
        height += table.horizontalScrollBar().sizeHint().height()
    table.setMinimumHeight(height)
    table.setMaximumHeight(height if table.rowCount() <= max_rows else 16777215)


class MeterWidget(QWidget):
    """A small horizontal bar: ``value`` of ``maximum`` filled in ``color``, with optional text."""

    def __init__(self, value: float = 0.0, maximum: float = 1.0, color: str = theme.BAR_COLOR,
                 text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value, self.maximum, self.color, self.text = value, maximum, color, text
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        if text:
            self.setToolTip(text)

    def fraction(self) -> float:
        """The filled share in [0, 1]."""
        if self.maximum <= 0:
            return 0.0
        return max(0.0, min(1.0, self.value / self.maximum))

    def sizeHint(self) -> QSize:
        return QSize(120, 18)

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colors = theme.colors_for()
        rect = QRectF(self.rect()).adjusted(2, 4, -2, -4)
        text_w = painter.fontMetrics().horizontalAdvance(self.text) + 8 if self.text else 0
        bar = QRectF(rect.left(), rect.top(), max(10.0, rect.width() - text_w), rect.height())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colors.track))
        painter.drawRoundedRect(bar, 3, 3)
        if self.fraction() > 0:
            painter.setBrush(QColor(self.color))
            painter.drawRoundedRect(QRectF(bar.left(), bar.top(), bar.width() * self.fraction(), bar.height()), 3, 3)
        if self.text:
            painter.setPen(self.palette().color(QPalette.ColorRole.Text))
            painter.drawText(QRectF(bar.right() + 6, self.rect().top(), text_w, self.rect().height()),
                             int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), self.text)
        painter.end()


class RawJsonWidget(QWidget):
    """A collapsed "Raw JSON" section: a toggle button over a read-only monospace view."""

    def __init__(self, title: str = "Raw JSON", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setText(title)
        self.toggle.setAutoRaise(True)
        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setFont(theme.monospace_font())
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setVisible(False)
        self.view.setMinimumHeight(160)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.toggle)
        layout.addWidget(self.view)
        self.toggle.toggled.connect(self._on_toggled)

    def set_data(self, data: Any) -> None:
        """Show ``data`` as indented JSON (kept collapsed until the user opens it)."""
        self.view.setPlainText(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def _on_toggled(self, checked: bool) -> None:
        self.view.setVisible(checked)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if checked else Qt.ArrowType.RightArrow)


def scroll_page(parent: QWidget | None = None) -> tuple[QWidget, QVBoxLayout]:
    """A vertically scrolling page; returns the scroll area and the layout to add sections to."""
    area = QScrollArea(parent)
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    body = QWidget()
    layout = QVBoxLayout(body)
    layout.setContentsMargins(8, 8, 8, 8)
    area.setWidget(body)
    return area, layout


class ScrollTab(QWidget):
    """A tab page whose sections scroll in one column (``self.column``); it starts with a
    word-wrapped ``summary`` line, which the subclass places where it wants."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        page, self.column = scroll_page(self)
        outer.addWidget(page)
        self.summary = QLabel()
        self.summary.setWordWrap(True)


class HoverTracker(QObject):
    """Reports the evidence ids (``IDS_ROLE`` of any cell in the row) under the mouse of a view.

    ``hovered`` fires with the ids when the mouse moves onto a row that has some, and with ``[]``
    when it moves off them or leaves the view; repeated positions on one row do not re-fire.
    """

    hovered = Signal(list)

    def __init__(self, view: QAbstractItemView) -> None:
        super().__init__(view)
        self.view = view
        self._last: list[str] = []
        view.setMouseTracking(True)
        view.viewport().setMouseTracking(True)
        view.viewport().installEventFilter(self)

    def ids_at_row(self, row: int) -> list[str]:
        """The evidence ids a row stands for (the first cell that has any)."""
        model = self.view.model()
        column = 0
        # hasIndex, not columnCount(): a list model's columnCount is private and crashes when called
        while model.hasIndex(row, column):
            data = model.index(row, column).data(IDS_ROLE)
            if data:
                return [str(i) for i in data]
            column += 1
        return []

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.MouseMove and isinstance(event, QMouseEvent):
            index = self.view.indexAt(event.position().toPoint())
            self._emit(self.ids_at_row(index.row()) if index.isValid() else [])
        elif kind == QEvent.Type.Leave:
            self._emit([])
        return False

    def _emit(self, ids: list[str]) -> None:
        if ids != self._last:
            self._last = ids
            self.hovered.emit(ids)
