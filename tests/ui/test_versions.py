"""Answer versions in the window: "Answer again" makes a second version of the same turn (no card
beside it), the turn panel shows "Version 2 of 2" with ‹ › to flip, each version keeps its own
answer, the canvas shows one version at a time in the same place, and the transcript follows."""

from __future__ import annotations

from app.config import Settings
from app.core.session import versions
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


def test_answer_again_makes_a_version_and_the_panel_flips_between_them(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["First answer.", "Second answer."]))
    qtbot.addWidget(window)
    window.show()
    c, panel, scene = window.controller, window.inspector.turn, window.scene
    assert drive(aloop, c.load())
    c.submit("How do I keep basil alive?")
    drive(aloop, until(lambda: len(c.state.turn_order) == 1 and not c.busy(), 30, "an answer"))
    first = c.state.turn_order[0]
    c.live["elsewhere"] = None  # the status bar's "N streaming" follows each turn, not a 2 s tick
    window._update_status_labels()
    assert "1 streaming" in window.memory_label.text()
    del c.live["elsewhere"]
    window._update_status_labels()
    assert "streaming" not in window.memory_label.text()
    first_node = c.state.node_of(first)
    window._select_turn(first, drive(aloop, c.engine.turn_record(first)))
    assert not panel.version_label.isVisible() and panel.again_button.isVisible()

    panel.again_button.click()
    drive(aloop, until(lambda: len(c.state.turn_order) == 2 and not c.busy(), 30, "the second version"))
    second = c.state.turn_order[1]
    second_node = c.state.node_of(second)
    assert versions.versions(c.state.graph, first_node) == [first_node, second_node]
    # One card shows, in the first version's place; the put-away one is hidden, not deleted.
    drive(aloop, until(lambda: not scene.item(first_node).isVisible(), 10, "the first version put away"))
    assert scene.item(second_node).isVisible() and scene.item(second_node).pos() == scene.item(first_node).pos()

    assert "Answering again" in window.banner.summary.text()  # not "your choice": a new version
    window._select_turn(second, drive(aloop, c.engine.turn_record(second)))
    assert panel.version_label.text() == "Version 2 of 2"
    assert panel.older.isEnabled() and not panel.newer.isEnabled()
    assert "Second answer." in panel.answer.toPlainText()
    assert "Second answer." in window.transcript.view.toPlainText()

    panel.older.click()  # flip back: its own answer and trace, on the canvas in the same place
    drive(aloop, until(lambda: window.inspector.record is not None and window.inspector.record.turn_id == first,
                       10, "the first version shown"))
    assert panel.version_label.text() == "Version 1 of 2" and "First answer." in panel.answer.toPlainText()
    assert scene.item(first_node).isVisible() and not scene.item(second_node).isVisible()
    assert scene.selected_ids() == [first_node]
    assert "First answer." in window.transcript.view.toPlainText()
    assert "Second answer." not in window.transcript.view.toPlainText()
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
