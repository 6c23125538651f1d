"""File › Attach file… in the window: the dialog is opened without a nested modal loop, the
chosen path is attached in the background, the status bar says "Attached notes.txt (v1)", the
artifact appears on the canvas and in the inspector; a file that cannot be attached is said in
one plain line."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from app.config import Settings
from app.core.types import NodeKind
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


def test_attaching_a_file_shows_its_artifact_and_says_so(qtbot, aloop, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("owner: Dana\nThe spare key is in the blue toolbox.\n", encoding="utf-8")
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    window = MainWindow(Settings.load(tmp_path / "data"), fake_services())
    qtbot.addWidget(window)
    window.show()
    status = window.statusBar()

    window.attach_actions.ask()  # before the models load: said, no dialog
    assert window.attach_actions.dialog is None and "once the models have loaded" in status.currentMessage()
    assert drive(aloop, window.controller.load())
    shortcut = next(a for m in window.menuBar().actions() for a in m.menu().actions() if a.text() == "&Attach file…")
    assert shortcut.shortcut().toString() == "Ctrl+Shift+A"

    window.composer.attach.click()  # the paperclip runs the File menu's action; open() returned at once
    dialog = window.attach_actions.dialog
    assert isinstance(dialog, QFileDialog) and dialog.isVisible()
    dialog.fileSelected.emit(str(notes))  # as if the user chose notes.txt
    dialog.close()
    drive(aloop, until(lambda: "Attached notes.txt (v1)" in status.currentMessage(), 60, "the attached status"))
    state = window.controller.state
    [artifact] = [n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("attached")]
    assert artifact.label == "Attached: notes.txt v1" and artifact.node_id in window.scene._items
    drive(aloop, until(lambda: window.inspector.node_page.heading.text() == "Artifact: Attached: notes.txt v1",
                       30, "the artifact in the inspector"))
    assert ("Version", "1") in window.inspector.node_page.lines()
    assert "blue toolbox" in window.inspector.node_page.content.toPlainText()

    drive(aloop, window.attach_actions.attach_path(str(notes)))  # the same text again: no new version
    assert status.currentMessage() == "notes.txt is unchanged since v1: nothing new was attached"
    drive(aloop, window.attach_actions.attach_path(str(photo)))
    assert status.currentMessage() == "Could not attach: photo.png is a binary file; only text files can be attached"
    assert window.composer.notice.text().startswith("Not attached: photo.png is a binary file")
    assert len(state.graph.nodes(NodeKind.ARTIFACT)) == 1

    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
