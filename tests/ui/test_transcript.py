"""The Conversation dock reads the selected branch as a conversation: Markdown rendered, code kept
as code with a copy link, citations linked only outside code, a click on a turn selecting it."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication

from app.config import Settings
from app.ui.panels.transcript import link_citations
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until

ANSWER = "Use the blue theme [1].\n\n```python\nmy_list = [1, 2, 3]\n```\n\nSee also `x[2]` and **[3]**."


def test_citations_become_links_only_outside_code() -> None:
    linked = link_citations(ANSWER, "t1")
    assert "[\\[1\\]](turn:t1#1)" in linked and "[\\[3\\]](turn:t1#3)" in linked
    assert "my_list = [1, 2, 3]" in linked and "`x[2]`" in linked and "t1#2" not in linked
    assert link_citations("```\nopen [4]", "t") == "```\nopen [4]"  # an unclosed block is code to the end


def test_the_branch_reads_as_a_conversation_and_a_turn_can_be_picked_from_it(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted: blue.", ANSWER]))
    qtbot.addWidget(window)
    window.show()
    c = window.controller
    assert drive(aloop, c.load())
    for n, text in enumerate(["I prefer the <b>blue</b> theme", "Which theme do I prefer for the website?"], 1):
        anchor = c.state.node_of(c.state.turn_order[-1]) if c.state.turn_order else None  # one branch
        c.submit(text, anchor=anchor)
        drive(aloop, until(lambda n=n: len(c.state.turn_order) == n and not c.busy(), 30, "an answer"))
    first, second = c.state.turn_order
    drive(aloop, until(lambda: window.transcript.node_id == c.state.node_of(second), 10, "the branch shown"))
    shown = window.transcript.view.toPlainText()
    assert shown.index("I prefer the <b>blue</b> theme") < shown.index("Which theme do I prefer")  # root first
    assert "my_list = [1, 2, 3]" in shown and "Noted: blue." in shown
    assert window.transcript.codes == ["my_list = [1, 2, 3]"] and "Copy code" in shown
    window.transcript.view.anchorClicked.emit(QUrl("copy:0"))  # the code as written, on the clipboard
    assert QGuiApplication.clipboard().text() == "my_list = [1, 2, 3]"
    html = window.transcript.view.toHtml()
    assert html.count(f'href="turn:{second}#') == 2 and "<b>blue</b>" not in html  # user text stays text
    window.transcript.view.anchorClicked.emit(QUrl(f"turn:{first}"))
    drive(aloop, until(lambda: window.inspector.record is not None and window.inspector.record.turn_id == first,
                       10, "the first turn inspected"))
    assert window.scene.selected_ids() == [c.state.node_of(first)]
    window._select_turn(second, drive(aloop, c.engine.turn_record(second)))
    # The routing's scored lines show for the selected turn only, after its answer too.
    assert {line.target_id for line in window.scene.candidate_items()} == {c.state.node_of(first)}
    window._on_node_selected("")
    assert window.scene.candidate_items() == []
    window._select_turn(second, drive(aloop, c.engine.turn_record(second)))
    window.inspector.turn.edit_button.click()  # edit and send again: the input back, on its branch
    assert window.composer.edit.toPlainText() == "Which theme do I prefer for the website?"
    assert window.composer.anchor == c.state.node_of(first)
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
