"""The status bar's progress of a document being attached: what it is doing, a bar, and Cancel.

Shown while ``Engine.attach_file`` reads a document ("Reading report.pdf: page 120 of 300") and
embeds its parts ("Indexing report.pdf: 300 of 612 parts"); Cancel sets the attach's cancel
token, which stops the reading process or the indexing before anything is recorded. The engine
calls ``update`` on the event loop (Qt's thread), so the widgets are touched on their own thread.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.core.ports import CancelToken


def progress_text(name: str, progress: dict[str, Any]) -> str:
    """"Reading report.pdf: 120 of 300 pages" / "Indexing report.pdf: 300 of 612 parts"."""
    what = "Reading" if progress.get("stage") == "reading" else "Indexing"
    done, total, unit = int(progress.get("done", 0)), int(progress.get("total", 0)), str(progress.get("unit", ""))
    return f"{what} {name}: {done} of {total} {unit}".rstrip()


class AttachProgressWidget(QWidget):
    """A label, a progress bar and a Cancel button for one attach at a time."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel(self)
        self.bar = QProgressBar(self)
        self.bar.setMaximumWidth(160)
        self.bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop attaching this file; nothing is recorded")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        for widget in (self.label, self.bar, self.cancel_button):
            layout.addWidget(widget)
        self.token: CancelToken | None = None
        self.name = ""
        self.hide()

    def begin(self, name: str) -> CancelToken:
        """Show it for attaching ``name``; the token its Cancel button sets."""
        self.name, self.token = name, CancelToken()
        self.label.setText(f"Attaching {name}…")
        self.bar.setRange(0, 0)  # busy until the first progress
        self.cancel_button.setEnabled(True)
        self.show()
        return self.token

    def update_progress(self, progress: dict[str, Any]) -> None:
        total = int(progress.get("total", 0))
        self.label.setText(progress_text(self.name, progress))
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(min(total, int(progress.get("done", 0))))

    def end(self) -> None:
        self.token = None
        self.hide()

    def _on_cancel_clicked(self) -> None:
        if self.token is not None:
            self.token.cancel()
            self.cancel_button.setEnabled(False)
            self.label.setText(f"Cancelling {self.name}…")
