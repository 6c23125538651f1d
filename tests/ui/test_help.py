"""A newcomer's help: the empty canvas says what to do, and Help lists the shortcuts in force."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl

from app import config
from app.config import Settings
from app.ui import help as help_module
from app.ui.help import shortcut_rows
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


def test_the_empty_canvas_hints_until_the_first_card_and_help_lists_the_shortcuts(
        qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted."]))
    qtbot.addWidget(window)
    window.show()
    assert drive(aloop, window.controller.load())
    drive(aloop, until(lambda: window.view.hint.isVisible(), 10, "the hint"))
    hint = window.view.hint
    assert "press Enter" in hint.text() and "Help" in hint.text()
    assert window.view.viewport().rect().contains(hint.geometry())  # all of it on screen

    rows = shortcut_rows(window)
    keys = {what: key for _where, what, key in rows}
    assert keys["New session"] == "Ctrl+N" and keys["Stop all answers"] == "Ctrl+."
    assert keys["Send the input"] == "Enter" and keys["Keyboard shortcuts"] == "F1"
    help_action = next(a for a in window.menuBar().actions() if a.text() == "&Help")
    help_menu = help_action.menu()  # (the action must outlive its menu's wrapper)
    next(a for a in help_menu.actions() if a.text() == "&Keyboard shortcuts").trigger()
    shown = window.help_windows["shortcuts"]
    assert shown.isVisible() and not shown.isModal() and shown.table.rowCount() == len(rows)

    window.composer.edit.setPlainText("What is on the canvas?")
    window.composer.send.click()
    drive(aloop, until(lambda: not window.view.hint.isVisible(), 30, "the hint to go"))
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))


def test_help_opens_the_log_folder(qtbot, aloop, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[QUrl] = []
    monkeypatch.setattr(help_module.QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window = MainWindow(settings, fake_services(["Noted."]))
    qtbot.addWidget(window)
    window.show()
    assert drive(aloop, window.controller.load())
    help_action = next(a for a in window.menuBar().actions() if a.text() == "&Help")
    help_menu = help_action.menu()  # (the action must outlive its menu's wrapper)
    next(a for a in help_menu.actions() if a.text() == "Open &log folder").trigger()
    assert [url.toLocalFile() for url in opened] == [str(config.log_dir())]  # the file manager, on that folder
    assert config.log_dir().is_dir()  # made when the app had not logged yet
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
