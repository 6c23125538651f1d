"""The streams panel (running answers with Stop) and the themes, on real widgets."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.ui import theme
from app.ui.panels.streams import StreamsPanel


def _panel(qtbot, **kw: int) -> StreamsPanel:
    panel = StreamsPanel(**kw)
    qtbot.addWidget(panel)
    panel.resize(600, 200)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def _row(panel: StreamsPanel, turn_id: str) -> list[str]:
    r = panel.stream_ids().index(turn_id)
    return [panel.table.item(r, c).text() for c in range(4)]


def test_empty_panel_says_what_appears_here(qtbot) -> None:
    panel = _panel(qtbot)
    assert panel.stack.currentWidget() is panel.empty
    assert "No answers running" in panel.empty.text()


def test_rows_show_label_status_tokens_and_elapsed_time(qtbot) -> None:
    panel = _panel(qtbot, tick_ms=20)
    panel.add_stream("t1", "Plan the party")
    panel.add_stream("t2", "Fix the parser")
    assert panel.stack.currentWidget() is panel.table
    assert panel.stream_ids() == ["t1", "t2"]
    panel.update_stream("t1", 12, "streaming")
    label, status, tokens, elapsed = _row(panel, "t1")
    assert (label, status) == ("Plan the party", "streaming")
    assert tokens.startswith("12")
    first = elapsed
    qtbot.waitUntil(lambda: _row(panel, "t1")[3] != first, timeout=3000)  # the clock runs
    assert _row(panel, "t2")[1] == "starting"


def test_stop_emits_stop_requested_and_finish_marks_done_then_removes(qtbot) -> None:
    panel = _panel(qtbot, linger_ms=150)
    panel.add_stream("t1", "Long story")
    panel.update_stream("t1", 5, "streaming")
    button = panel.stop_button("t1")
    assert button is not None and button.isEnabled()
    with qtbot.waitSignal(panel.stop_requested, timeout=1000) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert blocker.args == ["t1"]
    assert _row(panel, "t1")[1] == "stopping…" and not button.isEnabled()
    panel.update_stream("t1", 6, "streaming")  # tokens still arriving: the stop is still pending
    assert _row(panel, "t1")[1] == "stopping…" and _row(panel, "t1")[2].startswith("6")
    panel.finish_stream("t1", "stopped")
    assert _row(panel, "t1")[1] == "done · stopped"
    assert panel.stop_button("t1").text() == "Done" and not panel.stop_button("t1").isEnabled()
    qtbot.waitUntil(lambda: panel.stream_ids() == [], timeout=3000)
    assert panel.stack.currentWidget() is panel.empty


def test_a_restarted_id_is_not_removed_by_the_old_timer(qtbot) -> None:
    panel = _panel(qtbot, linger_ms=100)
    panel.add_stream("k", "first")
    panel.finish_stream("k", "routed")
    panel.add_stream("k", "again")
    qtbot.wait(300)
    assert panel.stream_ids() == ["k"] and _row(panel, "k")[0] == "again"


def test_clicking_a_row_emits_selected(qtbot) -> None:
    panel = _panel(qtbot)
    panel.add_stream("t1", "one")
    panel.add_stream("t2", "two")
    rect = panel.table.visualItemRect(panel.table.item(1, 0))
    with qtbot.waitSignal(panel.selected, timeout=1000) as blocker:
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == ["t2"]


def test_themes_are_dark_or_light_and_restore(qapp: QApplication) -> None:
    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    try:
        theme.apply_theme(qapp, True)
        assert theme.is_dark(qapp.palette())
        text = qapp.palette().color(QPalette.ColorRole.Text)
        assert text.lightness() > 180  # light text on the dark background
        assert theme.DARK.error in qapp.styleSheet()
        assert theme.colors_for(qapp.palette()) is theme.DARK
        theme.apply_theme(qapp, False)
        assert not theme.is_dark(qapp.palette())
        assert qapp.palette().color(QPalette.ColorRole.Text).lightness() < 80
        assert theme.colors_for(qapp.palette()) is theme.LIGHT
    finally:
        qapp.setStyle(style)
        qapp.setPalette(palette)
        qapp.setStyleSheet(sheet)


def test_rows_keep_their_widgets_across_adds_renames_and_removals(qtbot) -> None:
    """Rows change in place: a Stop or priority handler that makes the panel add, rename or
    finish streams never deletes the widget whose signal it is running in."""
    panel = _panel(qtbot, linger_ms=10)
    panel.add_stream("q1", "First")
    panel.add_stream("q2", "Second")
    stop, box = panel.stop_button("q2"), panel.priority_box("q2")
    stopped: list[str] = []
    raised: list[tuple[str, int]] = []

    def on_stop(key: str) -> None:  # the controller's reaction, synchronously
        stopped.append(key)
        panel.add_stream("q3", "Third")
        panel.finish_stream(key, "cancelled")

    panel.stop_requested.connect(on_stop)
    panel.priority_changed.connect(lambda key, value: (raised.append((key, value)), panel.rename_stream("q1", "t1")))
    box.setValue(3)
    assert raised == [("q2", 3)] and panel.stream_ids() == ["t1", "q2"]
    panel.rename_stream("q2", "t2")  # the waiting input became a turn
    assert panel.stop_button("t2") is stop and panel.priority_box("t2") is box
    qtbot.mouseClick(stop, Qt.MouseButton.LeftButton)
    assert stopped == ["t2"]  # the renamed row stops under its new id
    assert panel.stream_ids() == ["t1", "t2", "q3"]
    first = panel.stop_button("t1")
    qtbot.waitUntil(lambda: panel.stream_ids() == ["t1", "q3"], timeout=2000)  # t2 lingered, then went
    assert panel.stop_button("t1") is first and _row(panel, "q3")[0] == "Third"


def test_a_running_row_offers_to_pause_its_task(qtbot) -> None:
    panel = StreamsPanel()
    qtbot.addWidget(panel)
    panel.add_stream("t1", "Plan the offsite")
    menu = panel.row_menu("t1")
    assert menu is not None and [a.text() for a in menu.actions()] == ["Pause its task (keeps the work)", "Stop"]
    with qtbot.waitSignal(panel.pause_requested, timeout=1000) as blocker:
        menu.actions()[0].trigger()
    assert blocker.args == ["t1"]
    panel.finish_stream("t1", "stop")
    assert panel.row_menu("t1") is None and panel.row_menu("nope") is None
