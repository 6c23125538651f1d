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


def test_a_document_attaches_with_progress_cancel_and_its_part_opens_at_its_page(qtbot, aloop, tmp_path: Path) -> None:
    from PySide6.QtCore import QUrl

    from app.core.session.state import NoteView
    from app.ui.attach_progress import progress_text
    from tests.sensors.pdfs import text_pdf

    ledger = tmp_path / "ledger.pdf"
    ledger.write_bytes(text_pdf([f"Page {n}: shelf {n} holds {n * 7} crates of apples. " * 6 for n in range(1, 31)]))
    window = MainWindow(Settings.load(tmp_path / "data"), fake_services())
    qtbot.addWidget(window)
    window.show()
    status = window.statusBar()
    assert drive(aloop, window.controller.load())

    seen: list[str] = []
    task = window.attach_actions.attach_path(str(ledger))
    drive(aloop, until(lambda: window.attach_actions.progress is not None and window.attach_actions.progress.isVisible(), 30, "shown"))
    progress = window.attach_actions.progress
    assert progress is not None  # shown at once, busy until the first report
    drive(aloop, until(lambda: seen.append(progress.label.text()) or "Indexing" in progress.label.text()
                       or not progress.isVisible(), 90, "progress"))
    drive(aloop, task)
    assert any(text.startswith("Reading ledger.pdf: ") for text in seen), seen
    assert not progress.isVisible() and status.currentMessage() == "Attached ledger.pdf (v1, 30 pages, 30 parts)"
    assert progress_text("a.pdf", {"stage": "indexing", "done": 3, "total": 9, "unit": "parts"}) == \
        "Indexing a.pdf: 3 of 9 parts"

    ledger.write_bytes(text_pdf([f"Page {n}: shelf {n} now holds plums. " * 8 for n in range(1, 31)]))
    task = window.attach_actions.attach_path(str(ledger))
    drive(aloop, until(lambda: progress.token is not None, 30, "begun"))
    progress.cancel_button.click()  # Cancel at once: the reading child is stopped, nothing recorded
    drive(aloop, task)
    assert "attaching ledger.pdf was cancelled; nothing was recorded" in status.currentMessage()
    state = window.controller.state
    assert len([n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("attached")]) == 1

    part = next(n for n in state.notes.values() if n.selector == "page:12")
    assert isinstance(part, NoteView) and part.uri == str(ledger.resolve())
    opened: list[QUrl] = []
    view = window.inspector.evidence.part
    view.open_url = opened.append
    view.show_part(part)
    assert view.title.text() == "ledger.pdf, page 12" and "shelf 12 holds 84 crates" in view.snippet.toPlainText()
    assert view.open_button.text() == "Open ledger.pdf at page 12"
    view.open_button.click()
    assert opened[0].toLocalFile() == str(ledger.resolve()) and opened[0].fragment() == "page=12"
    view.show_part(None)
    assert not view.isVisible()

    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
