""""Continue the answer" in the window, on the real Engine (SQLite + LanceDB, scripted model): pressed
on an answer cut at its length limit, it continues that answer on its branch — not the latest
answer of another branch — and the model is shown that answer as its history."""

from __future__ import annotations

from app.config import Settings
from app.core.engine.answer_length import CONTINUE_TEXT
from app.core.pipeline.builder import NEW_ROOT
from app.core.ports import SessionGeneration
from app.core.types import BlockType
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until

LONG = " ".join(f"step{k}" for k in range(200))


def test_continue_the_answer_goes_on_with_the_answer_it_is_pressed_on(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services([LONG, "Dear landlord, the heating is broken.", "The rest."]))
    qtbot.addWidget(window)
    window.show()
    c, panel = window.controller, window.inspector.turn
    assert drive(aloop, c.load())
    drive(aloop, c.engine.set_generation(c.session_id, SessionGeneration(max_tokens=64)))
    c.submit("Plan a seven-day Kyoto itinerary, day by day.")
    drive(aloop, until(lambda: len(c.state.turn_order) == 1 and not c.busy(), 30, "the itinerary"))
    c.submit("Write an email to my landlord about the broken heating.", anchor=NEW_ROOT)
    drive(aloop, until(lambda: len(c.state.turn_order) == 2 and not c.busy(), 30, "the email"))
    kyoto, email = c.state.turn_order
    kyoto_node = c.state.node_of(kyoto)
    record = drive(aloop, c.engine.turn_record(kyoto))
    assert record.finish_reason == "length"

    window._select_turn(kyoto, record)
    assert panel.continue_button.isVisible()
    panel.continue_button.click()
    drive(aloop, until(lambda: len(c.state.turn_order) == 3 and not c.busy(), 30, "the continuation"))
    go_on = c.state.turn_order[2]
    node = c.state.node_of(go_on)
    assert c.state.graph.parent(node) == kyoto_node  # on the itinerary's branch, under its card
    assert c.state.graph.root_of(node) != c.state.graph.root_of(c.state.node_of(email))
    cont = drive(aloop, c.engine.turn_record(go_on))
    assert cont.build.text == CONTINUE_TEXT and cont.build.anchor_node == kyoto_node
    history = {r.evidence_id for b in cont.build.context.blocks if b.block_type == BlockType.CONVERSATION for r in b.refs}
    answers = {t: c.state.turns[t].message_ids[-1] for t in (kyoto, email)}
    assert answers[kyoto] in history and answers[email] not in history
    assert window.scene.item(node).isVisible()
