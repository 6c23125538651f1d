"""The window's status bar as the window and its action objects speak through it: a line for a
while (or until the next one), and a problem the user should read, held longer."""

from __future__ import annotations

from PySide6.QtWidgets import QStatusBar

ERROR_MS = 15000  # a problem stays long enough to be read


class StatusLine:
    """``say`` a line, or show an ``error`` line, in the window's status bar."""

    def __init__(self, bar: QStatusBar) -> None:
        self.bar = bar

    def say(self, line: str, ms: int = 0) -> None:
        """Show ``line`` for ``ms`` milliseconds (0: until the next line)."""
        self.bar.showMessage(line, ms)

    def error(self, message: str) -> None:
        """Show a problem in one line, for longer than a status line."""
        self.bar.showMessage(message, ERROR_MS)
