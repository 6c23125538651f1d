"""Semantic zoom, Fit on a conversation, conversation blocks, search jumps, and what a card keeps
across a restart (issue 33)."""

from __future__ import annotations

from PySide6.QtCore import QObject, QPointF, Qt, Signal

from app.config import Settings
from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.items import NodeItem
from app.ui.canvas.style import BLOCK_SCALE, LOD_FULL, MIN_TITLE_PIXELS
from app.ui.canvas.toolbar import CanvasToolbar
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, shown_canvas, until


def _session(conversations: int = 3, turns: int = 6) -> SessionGraph:
    """``conversations`` chains of ``turns`` turns, c0t0 ← c0t1 ← ..., started one after another."""
    g = SessionGraph("s")
    for c in range(conversations):
        for t in range(turns):
            node_id = f"c{c}t{t}"
            g.add_node(GraphNode(node_id=node_id, kind=NodeKind.TURN, label=f"topic {c} turn {t} ferry" if t == 2 else
                                 f"topic {c} turn {t}"))
            if t:
                g.add_edge(GraphEdge(src=node_id, dst=f"c{c}t{t - 1}", kind=EdgeKind.CONTINUES))
    return g


def test_titles_stay_readable_from_middle_zoom_up_and_blocks_take_over_below(qtbot) -> None:
    scene, view = shown_canvas(qtbot, _session())
    card = scene.item("c1t1")
    assert card is not None
    for scale in (BLOCK_SCALE, 0.3, 0.45, LOD_FULL, 1.0, 2.0):
        assert card.title_pixels(scale) >= MIN_TITLE_PIXELS - 0.1, scale  # never too small to read
    assert card.title_pixels(BLOCK_SCALE * 0.9) == 0.0  # the conversation's block stands there
    blocks = scene.conversation_blocks()
    assert [b.root for b in blocks.blocks()] == ["c0t0", "c1t0", "c2t0"]
    block = blocks.block("c1t0")
    assert block is not None and block.shows_at(BLOCK_SCALE * 0.9) and not block.shows_at(0.5)
    assert block.text.title == "topic 1 turn 0" and block.text.turns == 6
    assert block.box().contains(card.scene_rect())
    scene.set_node_status("c1t5", "streaming")
    assert block.text.running == "1 answering"


def test_fit_shows_the_selected_conversation_and_folds_the_others_into_dimmed_blocks(qtbot) -> None:
    scene, view = shown_canvas(qtbot, _session())
    scene.select(["c1t3"])
    view.fit_readable()
    assert scene.focus() == "c1t0"
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    assert seen.contains(scene.conversation_rect("c1t0"))
    assert view.scale_factor() >= LOD_FULL  # six turns: at reading zoom, previews and badges show
    blocks = scene.conversation_blocks()
    assert blocks.block("c0t0").folded and blocks.block("c2t0").folded and not blocks.block("c1t0").folded
    assert scene.item("c0t2").covered and not scene.item("c1t2").covered
    # a click on a folded block fits that conversation
    view.set_zoom(0.3, scene.conversation_rect("c1t0").center())
    target = blocks.block("c2t0").box().intersected(view.mapToScene(view.viewport().rect()).boundingRect()).center()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(target))
    assert scene.focus() == "c2t0" and not scene.item("c2t2").covered and scene.item("c1t2").covered
    graph = scene.graph
    graph.add_node(GraphNode(node_id="late", kind=NodeKind.TURN, label="late"))  # joins a folded conversation
    graph.add_edge(GraphEdge(src="late", dst="c1t5", kind=EdgeKind.CONTINUES))
    assert scene.item("late").covered and blocks.block("c1t0").text.turns == 7
    # centring a turn of a folded conversation (a new answer there, a search hit) focuses it
    view.center_on_node("c0t4")
    assert scene.focus() == "c0t0"
    qtbot.keyClick(view, Qt.Key.Key_E)  # Show everything
    assert scene.focus() is None and not any(b.folded for b in blocks.blocks())


def test_a_score_pill_never_covers_a_card(qtbot) -> None:
    scene, _view = shown_canvas(qtbot, _session(1, 4))
    scene.show_candidates("c0t3", [("c0t0", 0.8), ("c0t1", 0.4)], "c0t0")
    for line in scene.candidate_items():
        assert line.label.zValue() < scene.item("c0t1").zValue()


class _Controller(QObject):
    session_opened = Signal(object)
    turn_finished = Signal(str, object)
    engine = None
    state = None


def test_ctrl_f_jumps_to_the_newest_match_and_enter_to_the_next(qtbot) -> None:
    scene, view = shown_canvas(qtbot, _session())
    toolbar = CanvasToolbar(scene, view, _Controller())
    qtbot.addWidget(toolbar)
    view.set_zoom(0.05, QPointF(0, 0))
    toolbar.search.setText("ferry")
    assert scene.highlighted() == {"c2t2"}  # the newest card that matches, outlined
    middle = view.mapToScene(view.viewport().rect().center())
    assert scene.item("c2t2").scene_rect().contains(middle) and view.scale_factor() >= BLOCK_SCALE
    toolbar.search.returnPressed.emit()
    assert scene.highlighted() == {"c1t2"}
    assert scene.is_dimmed("c1t3") and not scene.is_dimmed("c1t2")
    toolbar.search.setText("")
    assert scene.highlighted() == set()


def test_titles_previews_badges_and_the_dark_theme_survive_a_restart(qtbot, aloop, settings: Settings) -> None:
    services = fake_services(["Take the 28 tram early; it fills up by ten."])
    window = MainWindow(settings, services)
    qtbot.addWidget(window)
    window.show()
    drive(aloop, window.controller.load())
    for text in ("Write a short plan for a Lisbon trip with the tram and Alfama.",
                 "Which quicksort pivot avoids the worst case?"):
        window.composer.edit.setPlainText(text)
        window.composer.send.click()
        drive(aloop, until(lambda: not window.controller.busy() and len(window.controller.state.turn_order) >= 1
                           and all(len(window.controller.state.turns[t].message_ids) >= 2
                                   for t in window.controller.state.turn_order), 60, "the answer"))
    session_id = window.controller.session_id
    live = {n: (window.scene.item(n).heading(), window.scene.item(n).body) for n in window.scene.node_ids()
            if window.scene.item(n).kind == NodeKind.TURN}
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))

    again = MainWindow(settings.model_copy(update={"theme": "dark"}), services)
    qtbot.addWidget(again)
    again.show()
    drive(aloop, again.controller.load(session_id))
    drive(aloop, until(lambda: again.scene.node_count() >= 2, 30, "the canvas"))
    assert again.scene.canvas_style.dark  # the canvas follows the theme from the start
    cards: list[NodeItem] = [again.scene.item(n) for n in live]
    assert [(c.heading(), c.body) for c in cards] == list(live.values())
    title = cards[0].heading()  # key words, not the first ones; then the answer
    assert "Lisbon" in title and "Alfama" in title and not title.startswith("Write") and "28 tram" in cards[0].body
    drive(aloop, until(lambda: all(c.status == "answered" for c in cards), 30, "the answered badges"))
    again.close()
    drive(aloop, until(lambda: again._shut, 30, "shutdown"))


def test_a_narrow_block_shows_its_title_before_its_turn_count(qtbot) -> None:
    from app.ui.canvas.blocks import TITLE_MIN, BlockText, ConversationBlockItem
    from app.ui.canvas.style import CanvasStyle

    block = ConversationBlockItem("r", CanvasStyle())
    block.set_text_source(lambda: BlockText("Packing list for Lisbon", "", 2))
    title, status = block._title_and_status(2000)
    assert (title, status) == ("Packing list for Lisbon", "2 turns")  # room for both: both whole
    title, status = block._title_and_status(TITLE_MIN * 0.8)  # at Fit, a two-turn cluster
    assert status == "" and len(title) > 3 and title.startswith("Pack")  # the name, not "P…" and a count
