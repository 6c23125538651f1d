"""``pcm-canvas FILE`` (how the installers' file association opens an exported session): the
window loads the models, imports the document as a new session and opens it; a document it
cannot import is explained and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

from app.config import Settings
from app.desktop import build_parser
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


def _window(qtbot, settings: Settings, replies: list[str] | None = None) -> MainWindow:
    window = MainWindow(settings, fake_services(replies))
    qtbot.addWidget(window)
    window.show()
    return window


def _close(window: MainWindow, loop) -> None:
    window.close()
    drive(loop, until(lambda: window._shut, 30, "shutdown"))


def test_a_file_given_at_start_is_imported_and_opened(qtbot, aloop, tmp_path: Path) -> None:
    assert build_parser().parse_args(["exported.json"]).file == "exported.json"
    assert build_parser().parse_args(["--self-test", "Hi"]).file is None
    first = _window(qtbot, Settings.load(tmp_path / "a"), ["Sure [1]."])
    drive(aloop, first.controller.load())
    first.composer.edit.setPlainText("Plan the garden: tomatoes along the south wall")
    first.composer.send.click()
    drive(aloop, until(lambda: first.controller.state is not None and not first.controller.busy()
                       and len(first.controller.state.messages) >= 2, 60, "an answered turn"))
    exported = drive(aloop, first.file_actions.export_to(tmp_path / "garden.json"))
    _close(first, aloop)

    second = _window(qtbot, Settings.load(tmp_path / "b"))
    session_id = drive(aloop, second.file_actions.load_and_import(None, exported))
    assert session_id == json.loads(exported.read_text(encoding="utf-8"))["session"]["session_id"]
    assert second.controller.session_id == session_id and second.composer.send.isEnabled()
    before = {s["session_id"] for s in drive(aloop, second.controller.sessions())}
    _close(second, aloop)

    bad = tmp_path / "not-a-session.json"
    bad.write_text("[1, 2", encoding="utf-8")
    third = _window(qtbot, Settings.load(tmp_path / "b"))
    assert drive(aloop, third.file_actions.load_and_import(None, bad)) is None
    assert third.composer.send.isEnabled()  # the app is usable; the error was shown
    assert {s["session_id"] for s in drive(aloop, third.controller.sessions())} == before  # nothing written
    _close(third, aloop)
