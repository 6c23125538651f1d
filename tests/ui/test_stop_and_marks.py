"""Stop and the transcript's marks in the window, on the real Engine (SQLite + LanceDB, scripted
model): Stop shows beside Send while an answer streams; Ctrl+. is acknowledged in the same
event-loop turn ("Stopping…") before the answer ends; the stopped answer is marked in the
Conversation dock; a pasted traceback keeps its lines there; an answer cut at its length limit
says so."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence

from app.config import Settings
from app.core.ports import SessionGeneration
from app.ui.composer import STOP, STOPPING
from app.ui.panels.transcript import FINISH_MARKS, branch_markdown, keep_lines
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until

LONG = " ".join(f"word{k}" for k in range(400))
TRACEBACK = ("Why does this fail?\n"
             "Traceback (most recent call last):\n"
             "  File \"app.py\", line 3, in <module>\n"
             "    port = config['port']\n"
             "KeyError: 'port'")


def test_stop_beside_send_and_ctrl_period_acknowledged_at_once(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services([LONG], delay=0.02))
    qtbot.addWidget(window)
    window.show()
    c, composer = window.controller, window.composer
    assert drive(aloop, c.load())
    assert not composer.stop.isVisible()
    c.submit("Tell me a very long story.")
    drive(aloop, until(lambda: c.live and next(iter(c.live.values())).pieces > 3, 30, "the answer streaming"))
    assert composer.stop.isVisible() and composer.stop.text() == STOP
    assert composer.stop.geometry().left() >= composer.send.geometry().right()  # beside Send
    [action] = [a for a in window.findChildren(QAction) if a.shortcut() == QKeySequence("Ctrl+.")]
    action.trigger()  # no event is processed between the key and these checks
    assert composer.stop.text() == STOPPING and not composer.stop.isEnabled()
    assert "Stopping" in window.statusBar().currentMessage()
    drive(aloop, until(lambda: not c.busy(), 30, "the answer stopped"))
    assert not composer.stop.isVisible()
    turn = c.state.turn_order[-1]
    record = drive(aloop, c.engine.turn_record(turn))
    assert record.finish_reason == "cancelled" and len(record.output.split()) < 400
    window.transcript.show_branch(c.state, c.state.node_of(turn))
    assert FINISH_MARKS["cancelled"] in window.transcript.view.toPlainText()
    composer.stop.show()
    composer.set_busy(False)  # the next stream starts with a fresh Stop
    assert composer.stop.text() == STOP and composer.stop.isEnabled()


def test_a_pasted_traceback_keeps_its_lines_and_a_cut_answer_is_marked(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services([LONG]))
    qtbot.addWidget(window)
    window.show()
    c = window.controller
    assert drive(aloop, c.load())
    drive(aloop, c.engine.set_generation(c.session_id, SessionGeneration(max_tokens=64)))
    c.submit(TRACEBACK)
    drive(aloop, until(lambda: c.state.turn_order and not c.busy(), 30, "the answer"))
    turn = c.state.turn_order[-1]
    assert drive(aloop, c.engine.turn_record(turn)).finish_reason == "length"
    window.transcript.show_branch(c.state, c.state.node_of(turn))
    shown = window.transcript.view.toPlainText().replace("\u00a0", " ")
    for line in TRACEBACK.splitlines():
        assert line.strip() in [x.strip() for x in shown.splitlines()], line  # each on a line of its own
    assert "  File \"app.py\"" in shown  # the indentation stays
    assert FINISH_MARKS["length"] in shown
    # a stored status (a turn interrupted in an earlier run) is marked too; a clean end is not
    window.transcript.finishes.clear()
    c.statuses[turn] = "interrupted"
    window.transcript.show_branch(c.state, c.state.node_of(turn))
    assert FINISH_MARKS["interrupted"] in window.transcript.view.toPlainText()
    assert "⚠" not in branch_markdown(c.state, c.state.node_of(turn), finishes={turn: "stop"})


def test_keep_lines_leaves_fenced_code_as_written() -> None:
    text = "a\n  b\n```\n  code\nmore\n```\nc"
    kept = keep_lines(text)
    assert "```\n  code\nmore\n```" in kept
    assert kept.startswith("a  \n\u00a0\u00a0b  \n")
