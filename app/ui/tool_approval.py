"""The desktop's confirmation of a tool that changes things: a non-modal question per call.

``ToolApprovalPrompt`` is the engine's ``ToolApprover`` in the desktop (set by the controller).
A tool server's tool without ``readOnlyHint`` asks before it runs — once per tool and session, or
at every call (Settings → Tools). The question box is shown with ``show()``, never ``exec()``: a
nested modal loop inside a coroutine fails under qasync; the coroutine awaits a future that the
box's buttons resolve, so the app stays responsive while it waits. Closing the box refuses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QPushButton, QWidget

if TYPE_CHECKING:
    from app.core.tools.governance import ApprovalRequest



class ToolApprovalPrompt:
    """Asks the user about one tool call at a time (module doc); ``boxes`` are the open questions."""

    def __init__(self, parent: Callable[[], QWidget | None] = lambda: None) -> None:
        self._parent = parent
        self.boxes: list[tuple[QMessageBox, QPushButton]] = []

    async def __call__(self, request: ApprovalRequest) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        box = QMessageBox(self._parent())
        box.setWindowTitle("Allow a tool to run?")
        box.setIcon(QMessageBox.Icon.Question)
        box.setText(request.question())
        arguments = json.dumps(request.arguments, ensure_ascii=False, indent=1)
        box.setInformativeText(f"{request.description}\n\nArguments:\n{arguments[:1500]}")
        box.setTextFormat(Qt.TextFormat.PlainText)  # the server's words and the arguments: never markup
        allow = box.addButton("Allow", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Don't allow", QMessageBox.ButtonRole.RejectRole)
        box.setModal(False)
        box.setWindowModality(Qt.WindowModality.NonModal)

        def settle(value: bool) -> None:
            if not answer.done():
                answer.set_result(value)

        box.buttonClicked.connect(lambda button: settle(button is allow))
        box.finished.connect(lambda _code: settle(False))
        self.boxes.append((box, allow))
        box.show()
        try:
            return await answer
        finally:
            self.boxes = [(b, a) for b, a in self.boxes if b is not box]
            box.close()
            box.deleteLater()
