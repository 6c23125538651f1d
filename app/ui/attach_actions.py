"""File › Attach file… (Ctrl+Shift+A, and the composer's paperclip): a local text file becomes
part of the open session — evidence the answers can use and an artifact node on the canvas
(``Engine.attach_file``).

``AttachActions`` is an object the main window holds (over the controller, the composer, the
scene, the status line and the window as the dialog's parent). The file dialog is opened with
``open()``, never ``exec()``: the app runs on a qasync loop, where a nested modal loop inside a
coroutine fails. The dialog's ``fileSelected`` calls ``attach_path`` (tests call it with a path
instead of a dialog), which spawns the engine call through the controller. The
status bar says what is happening and what came of it ("Attached notes.txt (v2)"); a file that
cannot be attached is said in one plain line, in the status bar and above the input box.
While a document is read and indexed, the status bar shows its progress with a Cancel button
(``AttachProgressWidget``); cancelled, nothing is recorded and the status bar says so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QFileDialog, QWidget

from app.core.errors import AttachCancelled, user_line
from app.ui.attach_progress import AttachProgressWidget
from app.ui.canvas.scene import CanvasScene
from app.ui.composer import ComposerWidget
from app.ui.controller import EngineController, report
from app.ui.status_line import StatusLine

if TYPE_CHECKING:
    from app.core.engine.attachments import Attached

FILTERS = ("Documents and text (*.pdf *.docx *.odt *.xlsx *.txt *.md *.markdown *.rst *.csv *.tsv *.json *.yaml *.yml "
           "*.toml *.ini *.log *.py *.js *.ts *.java *.c *.cpp *.go *.rs *.html *.htm);;All files (*)")


def attached_line(attached: Attached) -> str:
    """The status line for what ``attach_file`` did."""
    if not attached.changed:
        return f"{attached.name} is unchanged since v{attached.version}: nothing new was attached"
    if attached.parts:
        pages = f", {attached.pages} pages" if attached.pages else ""
        return f"Attached {attached.name} (v{attached.version}{pages}, {attached.parts} parts)"
    return f"Attached {attached.name} (v{attached.version})"


class AttachActions:
    """The window's attach action (see the module doc)."""

    def __init__(self, controller: EngineController, composer: ComposerWidget, scene: CanvasScene,
                 status: StatusLine, parent: QWidget) -> None:
        self.controller, self.composer, self.scene = controller, composer, scene
        self.status, self.parent = status, parent
        self.dialog: QFileDialog | None = None  # the dialog last opened (tests reach it)
        self.progress: AttachProgressWidget | None = None  # in the status bar while a document is attached
        self._folder = ""  # where the last attached file was: the next dialog starts there

    def _progress_widget(self) -> AttachProgressWidget:
        """The status bar's attach progress (made on first use)."""
        if self.progress is None:
            self.progress = AttachProgressWidget(self.parent)
            self.status.bar.addPermanentWidget(self.progress)
        return self.progress

    def ask(self) -> None:
        """Choose a file to attach (a non-modal dialog; nothing happens until one is chosen)."""
        if self.controller.engine is None or self.controller.session_id is None:
            self.status.error("Files can be attached once the models have loaded.")
            return
        dialog = QFileDialog(self.parent, "Attach a file to this session", self._folder or str(Path.home()), FILTERS)
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(self.attach_path)
        dialog.open()
        self.dialog = dialog

    def attach_path(self, path: str) -> asyncio.Task[Any] | None:
        """Attach the file at ``path`` to the open session (in the background); None when no
        session is open yet."""
        name = Path(path).name or path
        if self.controller.engine is None or self.controller.session_id is None:
            self.status.error(f"Could not attach {name}: the models are still loading.")
            return None
        self._folder = str(Path(path).parent)
        self.status.say(f"Attaching {name}…")
        return self.controller.spawn(self.attach_file(path), f"Attaching {name}")

    async def attach_file(self, path: str) -> Attached | None:
        """Attach ``path`` and say how it went; the new artifact node is selected, so the
        inspector shows it. None when it could not be attached (the reason is shown)."""
        engine, session_id = self.controller.engine, self.controller.session_id
        assert engine is not None and session_id is not None
        progress = self._progress_widget()
        cancel = progress.begin(Path(path).name or path)
        try:
            attached = await engine.attach_file(session_id, path, on_progress=progress.update_progress, cancel=cancel)
        except AttachCancelled as exc:
            self.status.say(str(exc), 10000)
            return None
        except Exception as exc:  # noqa: BLE001 - shown to the user; a bug is also logged
            report(exc, f"attaching {path}")
            line = user_line(exc)
            self.status.error(f"Could not attach: {line}")
            self.composer.show_notice(f"Not attached: {line}")
            return None
        finally:
            progress.end()
        self.status.say(attached_line(attached), 10000)
        if self.controller.session_id == attached.session_id:
            self.scene.select([attached.node_id])
        return attached
