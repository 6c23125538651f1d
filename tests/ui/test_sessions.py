"""The Sessions dock on the real engine (real SQLite + LanceDB, scripted model): the first input
names a session, one click opens one, rename in place, search by title and message, archive
with Undo (nothing deleted), and the app reopens the session used last, not the newest one."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.config import Settings
from app.ui.sessions import UNTITLED
from app.ui.window import MainWindow
from tests.conftest import stored
from tests.ui.conftest import answer, drive, fake_services, until


def _open(qtbot, settings: Settings) -> MainWindow:
    window = MainWindow(settings, fake_services(["Noted."] * 8))
    qtbot.addWidget(window)
    window.show()
    return window


def _close(window: MainWindow, loop) -> None:
    window.close()
    drive(loop, until(lambda: window._shut, 30, "shutdown"))


async def _listed(window: MainWindow, predicate) -> list[str]:
    """Wait until the listed session ids satisfy ``predicate``; return them."""
    return await until(lambda: predicate(ids := window.sessions.session_ids()) and ids, 30, "the session list")


def _titles(window: MainWindow) -> list[str]:
    panel = window.sessions
    return [panel.rows[sid].get("title") or UNTITLED for sid in panel.session_ids()]


def test_sessions_are_named_opened_renamed_searched_archived_and_reopened(qtbot, aloop, settings: Settings) -> None:
    window = _open(qtbot, settings)
    c, panel = window.controller, window.sessions
    assert drive(aloop, c.load())
    first = c.session_id
    drive(aloop, answer(window, "Plan the Kyoto trip for April\nwith temples"))
    drive(aloop, until(lambda: _titles(window) == ["Plan the Kyoto trip for April"], 30, "the title"))  # its first input
    assert window.windowTitle() == "PCM Canvas — Plan the Kyoto trip for April"

    panel.new_button.click()
    drive(aloop, until(lambda: c.session_id not in (None, first), 30, "a new session"))
    second = c.session_id
    drive(aloop, until(lambda: _titles(window) == [UNTITLED, "Plan the Kyoto trip for April"], 30, "two sessions"))
    drive(aloop, answer(window, "Why does my_list[3] raise IndexError?"))

    # one click opens a session
    item = panel.list.item(panel.session_ids().index(first))
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton, pos=panel.list.visualItemRect(item).center())
    drive(aloop, until(lambda: c.session_id == first, 30, "the first session opened"))

    # rename in place: Enter keeps it
    panel.start_rename(second)
    assert panel.rename_box.isVisible() and panel.rename_box.text() == "Why does my_list[3] raise IndexError?"
    panel.rename_box.setText("  Python   error ")
    qtbot.keyClick(panel.rename_box, Qt.Key.Key_Return)
    drive(aloop, until(lambda: panel.rows.get(second, {}).get("title") == "Python error", 30, "the new title"))
    assert not panel.rename_box.isVisible()

    # search: titles and message text, any case
    panel.search.setText("INDEXERROR")
    drive(aloop, _listed(window, lambda ids: ids == [second]))
    panel.search.setText("nothing like this")
    drive(aloop, until(lambda: panel.session_ids() == [] and panel.empty.isVisible(), 30, "no match"))
    panel.search.clear()
    drive(aloop, _listed(window, lambda ids: ids == [second, first]))

    # archive hides it and offers Undo; Undo brings it back; nothing is deleted
    panel.archive(second)
    drive(aloop, _listed(window, lambda ids: ids == [first]))
    assert panel.undo_button.isVisible() and "Python error" in panel.undo_label.text()
    panel.archived_box.setChecked(True)
    drive(aloop, _listed(window, lambda ids: ids == [second, first]))
    assert "archived" in panel.list.item(0).text()
    panel.archived_box.setChecked(False)
    drive(aloop, _listed(window, lambda ids: ids == [first]))
    panel.undo_button.click()
    drive(aloop, _listed(window, lambda ids: ids == [second, first]))
    assert not panel.undo_button.isVisible()
    turns = drive(aloop, stored(c.engine, lambda store: [(t["turn_id"], t["status"], store.get_message(t["input_message_id"]).content) for t in store.list_turns(second)]))
    assert len(turns) == 1, turns  # its turn is still there

    # the app reopens the session used last (the first), not the newest one
    _close(window, aloop)
    again = _open(qtbot, settings)
    assert drive(aloop, again.controller.load())
    assert again.controller.session_id == first
    _close(again, aloop)


def test_session_settings_are_edited_in_a_dialog_and_apply_to_the_next_turn(qtbot, aloop, settings: Settings) -> None:
    from app.core.ports import SessionGeneration
    from app.core.types import BlockType

    window = _open(qtbot, settings)
    c = window.controller
    assert drive(aloop, c.load())
    window.file_actions.open_session_settings()
    dialog = drive(aloop, until(lambda: window.file_actions.generation_dialog, 10, "the dialog"))
    assert dialog.isVisible() and dialog.values() == SessionGeneration()  # defaults to start with
    assert dialog.max_tokens.specialValueText().startswith("Default (")
    assert dialog.provider.currentData() == "" and dialog.provider.count() >= 1  # who answers: the default order
    dialog.temperature.setValue(0.9)
    dialog.max_tokens.setValue(128)
    dialog.prompt.setPlainText("x" * 4001)
    assert not dialog.buttons.button(dialog.buttons.StandardButton.Save).isEnabled()  # too long
    dialog.prompt.setPlainText("  Answer in one sentence.  ")
    dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    expected = SessionGeneration(temperature=0.9, max_tokens=128, system_prompt="Answer in one sentence.")
    drive(aloop, until(lambda: c.state.generation == expected, 10, "the settings saved"))
    drive(aloop, answer(window, "What is a harbour?"))
    record = drive(aloop, c.engine.turn_record(c.state.turn_order[-1]))
    assert record.params["temperature"] == 0.9 and record.params["max_tokens"] == 128
    assert any("Answer in one sentence." in b.content for b in record.build.context.blocks
               if b.block_type == BlockType.INSTRUCTION)
    _close(window, aloop)


def test_an_answer_cut_at_its_length_offers_continue_which_asks_on_that_turn(qtbot, aloop, settings: Settings) -> None:
    from app.core.ports import SessionGeneration
    from app.core.engine.answer_length import CONTINUE_TEXT

    long = " ".join(f"w{i}" for i in range(200))
    window = MainWindow(settings, fake_services([long, "the rest."]))
    qtbot.addWidget(window)
    window.show()
    c = window.controller
    assert drive(aloop, c.load())
    drive(aloop, c.engine.set_generation(c.session_id, SessionGeneration(max_tokens=64)))
    drive(aloop, answer(window, "Tell me <b>everything</b> about harbours"))
    first = c.state.turn_order[-1]
    record = drive(aloop, c.engine.turn_record(first))
    assert record.finish_reason == "length" and len(record.output.split()) == 64
    window._select_turn(first, record)
    assert window.scene.selected_ids() == [record.node_id]  # canvas and inspector show one turn
    turn = window.inspector.turn
    assert not turn.continue_button.isHidden()
    assert turn.input.text() == "Tell me <b>everything</b> about harbours"  # shown as typed
    turn.continue_button.click()
    drive(aloop, until(lambda: len(c.state.turn_order) == 2 and not c.busy(), 30, "the continuation"))
    again = drive(aloop, c.engine.turn_record(c.state.turn_order[-1]))
    assert again.build.text == CONTINUE_TEXT and again.build.anchor_node == record.node_id
    assert window.scene.selected_ids() == [again.node_id] and window.inspector.record.turn_id == again.turn_id
    window.scene.select([record.node_id])  # a click on the first card brings it back to the inspector
    drive(aloop, until(lambda: window.inspector.record.turn_id == first, 10, "the first turn inspected"))
    window._select_turn(again.turn_id, again)
    assert turn.continue_button.isHidden()  # "the rest." ended by itself
    _close(window, aloop)
