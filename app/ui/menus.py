"""The main window's menus: File, Edit, View, Turn and Help (``help.py`` lists their shortcuts).

The items call the window's own methods and those of the action objects it holds
(``file_actions``, ``attach_actions``)."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction, QKeySequence

from app.ui.help import add_help_menu


def action(w: Any, menu: Any, text: str, slot: Any,
           shortcut: str | QKeySequence | QKeySequence.StandardKey | None = None) -> QAction:
    """A menu item of the window ``w``, with its shortcut."""
    item = QAction(text, w)
    if shortcut is not None:
        item.setShortcut(QKeySequence(shortcut))
    item.triggered.connect(slot)
    menu.addAction(item)
    return item


def build_menus(w: Any) -> None:
    """File, Edit, View, Turn and Help, each item with its shortcut (Help lists them)."""
    file = w.menuBar().addMenu("&File")
    action(w, file, "&New session", w.new_session, QKeySequence.StandardKey.New)
    action(w, file, "&Export session…", w.file_actions.ask_export, "Ctrl+E")
    action(w, file, "&Import session…", w.file_actions.ask_import, "Ctrl+I")
    file.addSeparator()
    attach = action(w, file, "&Attach file…", w.attach_actions.ask, "Ctrl+Shift+A")
    w.composer.attach_requested.connect(attach.trigger)  # the composer's paperclip: the same action
    file.addSeparator()
    action(w, file, "&Settings…", lambda: w.file_actions.open_settings(), "Ctrl+,")
    action(w, file, "&Models…", w.file_actions.open_models, "Ctrl+Shift+M")
    action(w, file, "Session se&ttings…", w.file_actions.open_session_settings, "Ctrl+Shift+,")
    file.addSeparator()
    action(w, file, "&Quit", w.close, QKeySequence.StandardKey.Quit)
    edit = w.menuBar().addMenu("&Edit")
    undo = w.undo.createUndoAction(w, "&Undo")
    undo.setShortcut(QKeySequence.StandardKey.Undo)
    redo = w.undo.createRedoAction(w, "&Redo")
    redo.setShortcut(QKeySequence.StandardKey.Redo)
    edit.addAction(undo)
    edit.addAction(redo)
    action(w, edit, "&Find nodes", lambda: w.search.setFocus(), QKeySequence.StandardKey.Find)
    view = w.menuBar().addMenu("&View")
    action(w, view, "&Fit to view", w.view.fit_readable, "Ctrl+0")
    action(w, view, "Show &everything", w.view.fit_all, "Ctrl+9")
    action(w, view, "Zoom &in", lambda: w.view.zoom_by(1.25), QKeySequence.StandardKey.ZoomIn)
    action(w, view, "Zoom &out", lambda: w.view.zoom_by(1 / 1.25), QKeySequence.StandardKey.ZoomOut)
    action(w, view, "Re-layout", w.scene.layout_all, "Ctrl+Shift+L")
    view.addSeparator()
    for dock in w.docks.values():
        view.addAction(dock.toggleViewAction())
    action(w, view, "Toggle &dark theme", w.file_actions.toggle_theme, "Ctrl+Shift+T")
    turn = w.menuBar().addMenu("&Turn")
    action(w, turn, "Focus the &composer", lambda: w.composer.edit.setFocus(), "Ctrl+L")
    action(w, turn, "&Stop all answers", w.stop_all, "Ctrl+.")
    add_help_menu(w)
