"""The Environment page of the settings: watched folders, feeds and JSON endpoints.

``EnvironmentSettingsWidget`` edits ``Settings.watched_folders``, ``ignore_patterns``,
``max_file_bytes``, ``coalesce_ms``, ``feeds`` and ``apis``; ``problems()`` names what cannot be
used (a folder that does not exist, a URL that is neither http(s) nor a file) so the dialog can
refuse to save, and ``values()`` returns the fields to update.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.config import ApiSource, FeedSource, Settings


def source_problem(url: str) -> str | None:
    """Why ``url`` cannot be polled (None when it can): http(s), file:// or an existing file."""
    text = url.strip()
    if not text:
        return "empty address"
    parsed = urlparse(text)
    if parsed.scheme in ("http", "https"):
        return None if parsed.netloc else f"{text}: no host"
    path = Path(parsed.path if parsed.scheme == "file" else text).expanduser()
    return None if path.is_file() else f"{text}: not an http(s) URL or an existing file"


class _SourceTable(QTableWidget):
    """Rows of (address, interval seconds[, JSON path])."""

    def __init__(self, columns: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(0, len(columns), parent)
        self.setHorizontalHeaderLabels(list(columns))
        self.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        self.setMinimumHeight(90)

    def add(self, *values: Any) -> None:
        row = self.rowCount()
        self.insertRow(row)
        for column, value in enumerate(values):
            self.setItem(row, column, QTableWidgetItem(str(value)))

    def rows(self) -> list[list[str]]:
        out = []
        for r in range(self.rowCount()):
            cells = [(self.item(r, c).text().strip() if self.item(r, c) else "") for c in range(self.columnCount())]
            if cells[0]:
                out.append(cells)
        return out

    def remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.selectedIndexes()}, reverse=True):
            self.removeRow(row)


def _interval(text: str, default: float) -> float:
    try:
        return max(1.0, float(text))
    except ValueError:
        return default


class EnvironmentSettingsWidget(QWidget):
    """Watched folders, ignore patterns, feeds and JSON endpoints."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folders = QListWidget(self)
        self.folders.addItems([str(p) for p in settings.watched_folders])
        self.folders.setMinimumHeight(70)
        add_folder = QPushButton("Add folder…", self)
        remove_folder = QPushButton("Remove", self)
        add_folder.clicked.connect(self._on_add_folder)
        remove_folder.clicked.connect(lambda: [self.folders.takeItem(self.folders.row(i)) for i in self.folders.selectedItems()])
        self.ignore = QLineEdit(", ".join(settings.ignore_patterns), self)
        self.ignore.setToolTip("Comma-separated glob patterns, relative to each watched folder")
        self.max_bytes = QSpinBox(self)
        self.max_bytes.setRange(1, 1_000_000)
        self.max_bytes.setValue(max(1, settings.max_file_bytes // 1000))
        self.max_bytes.setSuffix(" kB")
        self.max_bytes.setToolTip("Larger files (and binary files) are recorded but not read")
        self.coalesce = QSpinBox(self)
        self.coalesce.setRange(50, 60_000)
        self.coalesce.setValue(settings.coalesce_ms)
        self.coalesce.setSuffix(" ms")
        self.coalesce.setToolTip("Changes of one file within this window become one event")
        self.feeds = _SourceTable(("Feed (RSS/Atom URL or file)", "Every (s)"), self)
        for feed in settings.feeds:
            self.feeds.add(feed.url, int(feed.interval_s))
        self.apis = _SourceTable(("JSON endpoint", "Every (s)", "Value path"), self)
        for api in settings.apis:
            self.apis.add(api.url, int(api.interval_s), api.path)
        self.problem = QLabel(self)
        self.problem.setObjectName("errorLabel")
        self.problem.setStyleSheet("color: #c0392b;")
        self.problem.setWordWrap(True)
        self.problem.hide()

        form = QFormLayout()
        form.addRow("Ignore", self.ignore)
        form.addRow("Read files up to", self.max_bytes)
        form.addRow("Coalesce changes", self.coalesce)
        box = QVBoxLayout(self)
        box.addWidget(QLabel("Watched folders (edits become events routed to the tasks that mention them)", self))
        box.addWidget(self.folders)
        box.addLayout(self._buttons(add_folder, remove_folder))
        box.addLayout(form)
        box.addWidget(QLabel("Feeds", self))
        box.addWidget(self.feeds)
        box.addLayout(self._buttons(self._add_button("Add feed", lambda: self.feeds.add("https://", 300)),
                                    self._add_button("Remove", self.feeds.remove_selected)))
        box.addWidget(QLabel("JSON endpoints (an event when the value at the path changes)", self))
        box.addWidget(self.apis)
        box.addLayout(self._buttons(self._add_button("Add endpoint", lambda: self.apis.add("https://", 60, "")),
                                    self._add_button("Remove", self.apis.remove_selected)))
        box.addWidget(self.problem)
        self._dialog: QFileDialog | None = None

    def _add_button(self, text: str, slot: Any) -> QPushButton:
        button = QPushButton(text, self)
        button.clicked.connect(slot)
        return button

    @staticmethod
    def _buttons(*buttons: QPushButton) -> QHBoxLayout:
        row = QHBoxLayout()
        for b in buttons:
            row.addWidget(b)
        row.addStretch(1)
        return row

    def _on_add_folder(self) -> None:
        self._dialog = QFileDialog(self, "Watch a folder")
        self._dialog.setFileMode(QFileDialog.FileMode.Directory)
        self._dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        self._dialog.fileSelected.connect(self.add_folder)
        self._dialog.open()

    def add_folder(self, path: str) -> None:
        if path and path not in [self.folders.item(i).text() for i in range(self.folders.count())]:
            self.folders.addItem(path)

    def problems(self) -> list[str]:
        """What cannot be used as entered (shown under the tables; the dialog refuses to save)."""
        found = [f"{self.folders.item(i).text()}: not a folder" for i in range(self.folders.count())
                 if not Path(self.folders.item(i).text()).expanduser().is_dir()]
        for cells in self.feeds.rows() + self.apis.rows():
            problem = source_problem(cells[0])
            if problem:
                found.append(problem)
        self.problem.setText("\n".join(found))
        self.problem.setVisible(bool(found))
        return found

    def values(self) -> dict[str, Any]:
        """The fields of ``Settings`` this page edits."""
        return {
            "watched_folders": [Path(self.folders.item(i).text()).expanduser() for i in range(self.folders.count())],
            "ignore_patterns": [p.strip() for p in self.ignore.text().split(",") if p.strip()],
            "max_file_bytes": self.max_bytes.value() * 1000,
            "coalesce_ms": self.coalesce.value(),
            "feeds": [FeedSource(url=c[0], interval_s=_interval(c[1], 300.0)) for c in self.feeds.rows()],
            "apis": [ApiSource(url=c[0], interval_s=_interval(c[1], 60.0), path=c[2] if len(c) > 2 else "")
                     for c in self.apis.rows()],
        }
