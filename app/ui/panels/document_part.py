"""A document's part in the Evidence tab: where it is (file, page or section, heading path), its
text, and a button that opens the file there with the desktop's default viewer.

A PDF is opened as ``file:///…/report.pdf#page=12`` (viewers that read the fragment — browsers,
Okular, SumatraPDF — open that page; others open the file); a spreadsheet is opened as it is, and
the button and label name the sheet and range to go to. ``open_url`` is what the button calls
(``QDesktopServices.openUrl``; tests replace it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.core.session.documents import unfenced
from app.core.session.selectors import describe, first_page, parse, sheet_parts

if TYPE_CHECKING:
    from app.core.session.state import NoteView


def part_url(uri: str, selector: str) -> QUrl:
    """The file of a part as a URL, at its page for a PDF (``#page=12``)."""
    url = QUrl.fromLocalFile(uri)
    page = first_page(selector)
    if page is not None and uri.lower().endswith(".pdf"):
        url.setFragment(f"page={page}")
    return url


def open_label(uri: str, selector: str) -> str:
    """"Open report.pdf at page 12" / "Open book.xlsx (sheet Q3, A1:F20)" / "Open notes.md"."""
    name = Path(uri).name
    page = first_page(selector)
    if page is not None:
        return f"Open {name} at page {page}"
    for parts in parse(selector):
        if parts and parts[0].kind == "sheet":
            sheet, cells = sheet_parts(parts[0].value)
            return f"Open {name} (sheet {sheet}, {cells})"
    where = describe(selector)
    return f"Open {name}" + (f" ({where})" if where else "")


class DocumentPartView(QWidget):
    """The selected candidate when it is a document's part (hidden otherwise)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        self.snippet = QPlainTextEdit(self)
        self.snippet.setReadOnly(True)
        self.snippet.setMaximumHeight(160)
        self.open_button = QPushButton(self)
        self.open_button.clicked.connect(self._on_open_clicked)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        for widget in (self.title, self.snippet, self.open_button):
            box.addWidget(widget)
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl
        self.note: NoteView | None = None
        self.hide()

    def show_part(self, note: NoteView | None) -> None:
        """Show ``note`` when it is a document's part; hide for anything else."""
        self.note = note if note is not None and note.selector and note.uri else None
        if self.note is None:
            self.hide()
            return
        label, body = unfenced(self.note.text)
        self.title.setText(label or f"{Path(self.note.uri).name}, {describe(self.note.selector)}")
        self.title.setToolTip(f"{self.note.uri}\n{self.note.selector}")
        self.snippet.setPlainText(body)
        self.open_button.setText(open_label(self.note.uri, self.note.selector))
        self.show()

    def _on_open_clicked(self) -> None:
        if self.note is not None:
            self.open_url(part_url(self.note.uri, self.note.selector))
