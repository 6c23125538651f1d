"""The Help menu: the keyboard shortcuts (read from the window's own menus, so the list is
always the one in force), the folder of the log file, and a short About text. The windows are
non-modal."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QHeaderView,
    QLabel,
    QMainWindow,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.config import log_dir

# Keys that belong to widgets rather than menu actions.
WIDGET_KEYS = [
    ("Composer", "Send the input", "Enter"),
    ("Composer", "New line in the input", "Shift+Enter"),
    ("Canvas", "Pan (Shift: farther)", "Arrow keys, or drag the empty canvas"),
    ("Canvas", "Zoom", "Mouse wheel, + and −"),
    ("Canvas", "Fit everything that stays readable (the minimap shows the rest)", "0 or F"),
    ("Canvas", "Show everything, however small", "E"),
    ("Canvas", "Move the view to a place", "Click or drag on the minimap"),
    ("Canvas", "Actions of a card", "Right-click the card"),
]

ABOUT = (
    "<b>PCM Canvas</b> — long, branching work with a local model, fully offline.<br><br>"
    "Every input and every change in a watched folder or feed is an event. For each input the app "
    "works out what you are asking, plans the context it needs, places the input on the branch of "
    "the canvas it belongs to, and gives the model only the evidence that matters — each fact "
    "pointing back to where it came from. Everything is stored and can be replayed."
)


def _strip_mnemonic(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def shortcut_rows(window: QMainWindow) -> list[tuple[str, str, str]]:
    """(where, what, keys) for every menu action that has a shortcut, then the widgets' keys."""
    rows = []
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if not isinstance(menu, QMenu):
            continue
        for action in menu.actions():
            keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            if keys:
                rows.append((_strip_mnemonic(menu.title()), _strip_mnemonic(action.text()).rstrip("…"), keys))
    return rows + WIDGET_KEYS


class ShortcutsWindow(QDialog):
    """The table of shortcuts (non-modal: it can stay open beside the canvas)."""

    def __init__(self, rows: list[tuple[str, str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.table = QTableWidget(len(rows), 3, self)
        self.table.setHorizontalHeaderLabels(["Where", "What", "Keys"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.table.resizeColumnToContents(0)
        self.table.resizeColumnToContents(2)
        box = QVBoxLayout(self)
        box.addWidget(self.table)
        self.resize(560, 520)


class AboutWindow(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About PCM Canvas")
        text = QLabel(ABOUT, self)
        text.setWordWrap(True)
        box = QVBoxLayout(self)
        box.addWidget(text)
        self.resize(460, 200)


def open_log_folder() -> bool:
    """Show the folder of the app's log file (``app.config.log_dir``) in the file manager;
    whether the desktop accepted the request."""
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))


def add_help_menu(window: QMainWindow) -> QMenu:
    """The Help menu of ``window``: Keyboard shortcuts (F1), Open log folder and About; returns
    the menu."""
    menu = window.menuBar().addMenu("&Help")
    shown: dict[str, QDialog] = {}

    def show(name: str) -> None:
        dialog = shown.get(name)
        if dialog is None:
            dialog = shown[name] = (ShortcutsWindow(shortcut_rows(window), window) if name == "shortcuts"
                                    else AboutWindow(window))
        dialog.show()
        dialog.raise_()

    keys = menu.addAction("&Keyboard shortcuts", lambda: show("shortcuts"))
    keys.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
    menu.addAction("Open &log folder", open_log_folder)
    menu.addAction("&About PCM Canvas", lambda: show("about"))
    window.help_windows = shown  # type: ignore[attr-defined]  # tests look at what was opened
    return menu
