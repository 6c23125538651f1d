"""The canvas scene and view: mirroring the graph, drawing, dragging, filtering, zooming."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QImage, QMouseEvent
from PySide6.QtWidgets import QApplication

from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas import PENDING_MIME, CanvasScene, CanvasView
from app.ui.canvas.cards import CardText
from app.ui.canvas.edges import EdgeItem, MergeEdgeItem
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import TidyGeometry
from app.ui.canvas.overview import OVERVIEW_MIN_NODES
from app.ui.canvas.style import TURN_MAX_HEIGHT, TURN_MIN_HEIGHT
from tests.ui.conftest import shown_canvas

G = TidyGeometry()


def _node(node_id: str, node_kind: NodeKind = NodeKind.TURN, label: str = "", **attrs: object) -> GraphNode:
    return GraphNode(node_id=node_id, kind=node_kind, label=label or f"{node_id} label", attrs=dict(attrs))


def _continue(graph: SessionGraph, src: str, dst: str) -> GraphEdge:
    edge = GraphEdge(edge_id=f"{src}>{dst}", src=src, dst=dst, kind=EdgeKind.CONTINUES)
    graph.add_edge(edge)
    return edge


def _turn(graph: SessionGraph, node_id: str, parent: str | None = None, label: str = "") -> None:
    graph.add_node(_node(node_id, label=label))
    if parent is not None:
        _continue(graph, node_id, parent)


@pytest.fixture()
def graph() -> SessionGraph:
    """a ← b ← c and a ← x (a branch), an env node, a memory derived from b."""
    g = SessionGraph("s")
    _turn(g, "a", label="plan the trip")
    _turn(g, "b", "a", label="book the hotel")
    _turn(g, "c", "b", label="pick a flight")
    _turn(g, "x", "a", label="budget for food")
    g.add_node(_node("e", NodeKind.ENV, "prices.csv", kind="file"))
    g.add_node(_node("m", NodeKind.MEMORY, "likes window seats"))
    g.add_edge(GraphEdge(src="m", dst="b", kind=EdgeKind.DERIVED_FROM))
    return g


@pytest.fixture()
def canvas(qtbot, graph: SessionGraph) -> tuple[CanvasScene, CanvasView]:
    scene, view = shown_canvas(qtbot, graph)
    view.set_zoom(1.0, scene.item("b").scene_rect().center())
    return scene, view


def _viewport_point(view: CanvasView, node_or_point: object, scene: CanvasScene | None = None) -> QPoint:
    if isinstance(node_or_point, str):
        assert scene is not None
        return view.mapFromScene(scene.item(node_or_point).scene_rect().center())
    return view.mapFromScene(node_or_point)


def _mouse(view: CanvasView, kind: QEvent.Type, pos: QPoint, buttons: Qt.MouseButton,
           button: Qt.MouseButton = Qt.MouseButton.LeftButton,
           modifiers: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    local = QPointF(pos)
    event = QMouseEvent(kind, local, QPointF(view.viewport().mapToGlobal(pos)), button, buttons, modifiers)
    QApplication.sendEvent(view.viewport(), event)


def _drag(view: CanvasView, start: QPoint, end: QPoint) -> None:
    left = Qt.MouseButton.LeftButton
    _mouse(view, QEvent.Type.MouseButtonPress, start, left)
    steps = 6
    for i in range(1, steps + 1):
        p = start + (end - start) * (i / steps)
        _mouse(view, QEvent.Type.MouseMove, p, left, Qt.MouseButton.NoButton)
    _mouse(view, QEvent.Type.MouseButtonRelease, end, Qt.MouseButton.NoButton)


# ---------------------------------------------------------------------- mirroring the graph


def test_set_graph_lays_out_conversations_and_draws_every_edge(canvas) -> None:
    scene, _ = canvas
    assert set(scene.node_ids()) == {"a", "b", "c", "x", "e", "m"}
    pos = {n: scene.item(n).pos() for n in scene.node_ids()}
    assert pos["a"].x() == pos["b"].x() == pos["c"].x()  # the conversation reads downwards
    assert pos["a"].y() < pos["b"].y() < pos["c"].y()
    assert pos["x"].y() == pos["b"].y() and pos["x"].x() > pos["b"].x()  # the branch, beside its sibling
    assert pos["e"].y() < pos["a"].y()  # an unlinked env event waits on top
    b = scene.item("b").scene_rect()
    assert pos["m"].y() == b.top() and pos["m"].x() > b.right()  # memory beside its turn
    assert pos["m"].x() + scene.item("m").width < pos["x"].x()  # ...in a strip that widened the column
    edges = [i for i in scene.items() if isinstance(i, EdgeItem)]
    assert len(edges) == 4
    cont = scene.edge_item("b>a")
    assert cont is not None and cont.ends() == ("a", "b")
    start = cont.path().pointAtPercent(0)
    a = scene.item("a").scene_rect()
    assert (start.x(), start.y()) == pytest.approx((a.center().x(), a.bottom()))  # out of a's bottom...
    assert any(cont.path().elementAt(i).y == pytest.approx(b.top())  # ...into b's top
               for i in range(cont.path().elementCount()))


def test_scene_follows_graph_signals(canvas, graph: SessionGraph) -> None:
    scene, _ = canvas
    _turn(graph, "d", "c")
    c = scene.item("c").pos()
    assert scene.item("d").pos() == QPointF(c.x(), c.y() + G.row_pitch)
    assert scene.edge_item("d>c") is not None
    graph.update_node("d", label="pick a seat", attrs={"checkpoint": True, "ambiguous": True})
    assert scene.item("d").node.label == "pick a seat"
    assert scene.item("d").checkpoint and scene.item("d").ambiguous
    graph.move_node("d", 1234.0, 567.0)
    assert scene.item("d").pos() == QPointF(1234.0, 567.0)
    end = scene.edge_item("d>c").path().elementAt(3)  # where the curve meets d (before the arrow)
    assert (end.x, end.y) == pytest.approx((1234.0, 567.0 + scene.item("d").port_y()))  # it followed
    _turn(graph, "f", "d")  # continues the pinned d's cell, not its dragged place
    assert scene.item("f").pos() == QPointF(c.x(), c.y() + 2 * G.row_pitch)


def test_reanchoring_moves_the_turn_and_its_subtree(qtbot, graph: SessionGraph) -> None:
    retire = getattr(graph, "retire_edge", None)
    if retire is None:
        pytest.skip("SessionGraph cannot retire edges yet")
    _turn(graph, "d", "c")
    scene = CanvasScene()
    scene.set_graph(graph)
    before = {n: scene.item(n).pos() for n in scene.node_ids()}
    retire("c>b", {"valid_to": "2026-01-01T00:00:00Z"})
    assert scene.edge_item("c>b") is None
    _continue(graph, "c", "x")
    x, c, d = (scene.item(n).pos() for n in "xcd")
    assert c.x() == x.x() and c.y() == x.y() + G.row_pitch  # c now continues x, one row down
    assert d.x() == c.x() and d.y() == c.y() + G.row_pitch  # and d came along
    for other in "abe":
        assert scene.item(other).pos() == before[other]
    assert scene.edge_item("c>x") is not None
    scene.set_graph(None)


def test_set_graph_none_disconnects_and_clears(canvas, graph: SessionGraph) -> None:
    scene, _ = canvas
    assert len(graph.node_added) == 1
    scene.set_graph(None)
    assert len(graph.node_added) == len(graph.edge_added) == len(graph.node_moved) == 0
    _turn(graph, "z")
    assert scene.node_ids() == [] and scene.items() == []


def test_stored_positions_are_kept_and_layout_all_respects_pins(qtbot) -> None:
    g = SessionGraph("s")
    g.add_node_silently(GraphNode(node_id="a", kind=NodeKind.TURN, x=500.0, y=900.0, pinned=True))
    g.add_node_silently(GraphNode(node_id="b", kind=NodeKind.TURN, x=-77.0, y=12.0))
    g.add_edge_silently(GraphEdge(src="b", dst="a", kind=EdgeKind.CONTINUES))
    scene = CanvasScene()
    scene.set_graph(g)
    assert scene.item("a").pos() == QPointF(500, 900)  # pinned: where the user put it
    assert scene.item("b").pos() == QPointF(0, G.row_pitch)  # not pinned: laid out, below a's cell
    scene.layout_all()
    assert scene.item("a").pos() == QPointF(500, 900)
    assert scene.item("b").pos() == QPointF(0, G.row_pitch)
    scene.set_graph(None)


# ---------------------------------------------------------------------- drawing


def test_each_kind_has_its_own_shape(qtbot) -> None:
    g = SessionGraph("s")
    for kind in NodeKind:
        g.add_node(_node(kind.value, kind))
    scene = CanvasScene()
    scene.set_graph(g)
    items = {kind: scene.item(kind.value) for kind in NodeKind}
    assert len({i.shape_name for i in items.values()}) == 5
    counts = {kind: items[kind].shape().elementCount() for kind in NodeKind}
    assert counts[NodeKind.TASK] == 7  # a closed hexagon
    assert len(set(counts.values())) >= 4
    sizes = {(i.width, i.height) for i in items.values()}
    assert len(sizes) == 5
    merge = GraphEdge(src="turn", dst="task", kind=EdgeKind.MERGES)
    g.add_edge(merge)
    assert isinstance(scene.edge_item(merge.edge_id), MergeEdgeItem)
    scene.set_graph(None)


def _render(view: CanvasView) -> QImage:
    return view.viewport().grab().toImage()


def _non_background(image: QImage, background: int) -> int:
    step = 4
    return sum(1 for x in range(0, image.width(), step) for y in range(0, image.height(), step)
               if image.pixel(x, y) != background)


def test_cards_render_at_every_level_of_detail(canvas) -> None:
    scene, view = canvas
    background = scene.backgroundBrush().color().rgb()
    inked = []
    for scale in (1.5, 0.45, 0.25, 0.1, 0.03):
        view.set_zoom(scale, scene.item("b").scene_rect().center())
        inked.append(_non_background(_render(view), background))
    assert all(n > 0 for n in inked)


def test_far_zoom_draws_the_batched_overview(qtbot) -> None:
    g = SessionGraph("big")
    previous = None
    for i in range(OVERVIEW_MIN_NODES + 20):
        node_id = f"t{i}"
        g.add_node_silently(_node(node_id))
        if previous is not None and i % 9:
            g.add_edge_silently(GraphEdge(src=node_id, dst=previous, kind=EdgeKind.CONTINUES))
        previous = node_id
    scene = CanvasScene()
    view = CanvasView(scene)
    qtbot.addWidget(view)
    view.resize(800, 600)
    view.show()
    qtbot.waitExposed(view)
    scene.set_graph(g)
    view.fit_all()
    assert view.overview_active()
    background = scene.backgroundBrush().color().rgb()
    inked = _non_background(_render(view), background)
    assert inked > 50
    last = f"t{OVERVIEW_MIN_NODES + 19}"
    for i in range(40):  # the newest conversation goes on: drawn at once, nothing else moves
        _turn(g, f"live{i}", f"live{i - 1}" if i else last)
    assert not scene._overview.dirty and scene._overview.is_recent("live39")
    view.fit_all()
    assert _non_background(_render(view), background) > inked * 0.5
    view.set_zoom(1.0)
    assert not view.overview_active()
    scene.set_graph(None)


def test_a_card_shows_its_title_and_a_preview_of_fixed_size(canvas) -> None:
    scene, _ = canvas
    card = scene.item("c")
    assert card.height == TURN_MIN_HEIGHT == TURN_MAX_HEIGHT  # every card the same size: a tidy grid
    scene.set_node_body("c", "Fly on Tuesday.", streaming=True)
    assert card.height == TURN_MIN_HEIGHT and card.body_lines() == ["Fly on Tuesday."]
    scene.set_node_body("c", "Fly on Tuesday, then rent a car. " * 60)
    assert card.height == TURN_MAX_HEIGHT and len(card.body_lines()) == 4
    assert card.body_lines()[-1].endswith("\u2026")
    scene.set_card_texts({"c": CardText("Flight Tuesday", "Which flight should I pick for Tuesday?",
                                        "Fly on Tuesday, then rent a car. " * 60)})
    assert card.heading() == "Flight Tuesday" and card.node.label == "pick a flight"
    assert card.body_lines()[0].startswith("Which flight")  # the input first, then the answer
    assert "Which flight should I pick for Tuesday?" in card.toolTip()  # the whole input on hover
    scene.set_node_status("c", "answered")
    assert card.status == "answered"


def test_highlight_outlines_only_the_given_nodes(canvas) -> None:
    scene, _ = canvas
    scene.highlight(["a", "c", "nope"])
    assert scene.highlighted() == {"a", "c"}
    assert scene.item("a").highlighted and not scene.item("b").highlighted
    scene.highlight(["b"])
    assert not scene.item("a").highlighted and scene.item("b").highlighted
    scene.highlight([])
    assert not any(scene.item(n).highlighted for n in scene.node_ids())


def test_candidates_are_scored_dashed_lines_with_the_chosen_one_emphasised(canvas) -> None:
    scene, view = canvas
    scene.show_candidates("c", [("a", 0.81), ("x", 0.42), ("missing", 0.3)], chosen="a")
    lines = scene.candidate_items()
    assert [(line.target_id, line.chosen) for line in lines] == [("a", True), ("x", False)]
    assert lines[0].pen().style() == lines[1].pen().style() == Qt.PenStyle.CustomDashLine  # dashed
    assert lines[0].pen().widthF() > lines[1].pen().widthF()
    assert lines[0].label.text.startswith("0.81") and lines[1].label.text == "0.42"
    assert all(line.scene() is scene for line in lines)
    for line in lines:  # no pill covers a card's text: it sits clear of the cards, or under them
        area = line.label.sceneBoundingRect()
        over = [it for it in scene.items(area) if isinstance(it, NodeItem)]
        assert not over or line.label.zValue() < min(it.zValue() for it in over), line.target_id
    scene.clear_candidates()
    assert scene.candidate_items() == [] and all(line.scene() is None for line in lines)


# ---------------------------------------------------------------------- filter and collapse


def test_filter_dims_what_does_not_match(canvas) -> None:
    scene, _ = canvas
    scene.set_node_body("x", "Street food is cheap")
    assert scene.set_filter("FOOD", None) == ["x"]  # label and body, case-insensitive
    assert scene.is_dimmed("a") and not scene.is_dimmed("x")
    assert scene.item("a").opacity() < 0.5 and scene.item("x").opacity() == 1.0
    assert scene.edge_item("b>a").opacity() < 0.5
    assert scene.set_filter("", {NodeKind.ENV, NodeKind.MEMORY}) == ["e", "m"]
    assert sorted(scene.set_filter("", None)) == sorted(scene.node_ids())
    assert not any(scene.is_dimmed(n) for n in scene.node_ids())


def test_collapse_hides_the_subtree_and_expand_restores_it(canvas, graph: SessionGraph) -> None:
    scene, _ = canvas
    _turn(graph, "d", "c")
    scene.set_collapsed("a", True)
    hidden = {n for n in scene.node_ids() if not scene.item(n).isVisible()}
    assert hidden == {"b", "c", "d", "x", "m"}  # descendants and their satellite
    assert scene.item("a").collapsed_count == 4
    assert not scene.edge_item("b>a").isVisible()
    _turn(graph, "f", "d")  # arrives inside the collapsed subtree: hidden, counted
    assert not scene.item("f").isVisible() and scene.item("a").collapsed_count == 5
    scene.set_collapsed("b", True)
    scene.set_collapsed("a", False)
    visible = {n for n in scene.node_ids() if scene.item(n).isVisible()}
    assert visible == {"a", "b", "x", "e", "m"}  # b is still collapsed
    assert scene.item("a").collapsed_count == 0 and scene.item("b").collapsed_count == 3
    scene.set_collapsed("b", False)
    assert all(scene.item(n).isVisible() for n in scene.node_ids())
    assert all(e.isVisible() for e in scene.items() if isinstance(e, EdgeItem))


def test_a_pile_of_satellites_shows_how_many_lie_under_its_top(qtbot, canvas, graph: SessionGraph) -> None:
    scene, _ = canvas
    for n in range(4):  # b has m already: m, d0 in the row, d1..d3 on the pile over d0
        graph.add_node(_node(f"d{n}", NodeKind.ARTIFACT, f"report v{n}"))
        graph.add_edge(GraphEdge(src=f"d{n}", dst="b", kind=EdgeKind.DERIVED_FROM))
    tops = {n: scene.item(n).pile_count for n in ("m", "d0", "d1", "d2", "d3")}
    assert tops == {"m": 0, "d0": 0, "d1": 0, "d2": 0, "d3": 3}
    assert scene.item("d3").zValue() > scene.item("d0").zValue()  # the newest lies on top
    assert "3 more lie under this one" in scene.item("d3").toolTip()
    graph.move_node("d3", 2000.0, 2000.0)  # dragged aside: the next one is the top
    assert scene.item("d3").pile_count == 0 and scene.item("d2").pile_count == 2
    assert "more lie" not in scene.item("d3").toolTip()
    reopened, view = shown_canvas(qtbot, graph)  # a session opened afresh shows the same pile
    assert [reopened.item(n).pile_count for n in ("d0", "d1", "d2", "d3")] == [0, 0, 2, 0]
    view.set_zoom(1.0, reopened.item("d2").scene_rect().center())
    top = reopened.item("d2")
    badge = view.mapFromScene(top.mapToScene(QPointF(top.pile_badge_rect().center().x(), -5)))  # above the border
    under = reopened.item("d1").pos()
    _mouse(view, QEvent.Type.MouseButtonPress, badge, Qt.MouseButton.LeftButton)
    _mouse(view, QEvent.Type.MouseButtonRelease, badge, Qt.MouseButton.NoButton)
    assert reopened.item("d1").pile_count == 2 and top.pile_count == 0  # the next one came up
    assert reopened.item("d1").zValue() > top.zValue() and reopened.item("d1").pos() != under
    assert not graph.node("d2").pinned  # a click, not a drag: nothing is pinned
    assert reopened.selected_ids() == ["d1"]  # and the one that came up is the one shown


# ---------------------------------------------------------------------- pointer interaction


def test_releasing_a_turn_over_another_node_asks_to_reanchor(canvas, qtbot) -> None:
    scene, view = canvas
    start = scene.item("c").pos()
    dropped: list[tuple[str, str]] = []
    moved: list[tuple[str, float, float]] = []
    scene.node_dropped.connect(lambda a, b: dropped.append((a, b)))
    scene.node_moved.connect(lambda n, x, y: moved.append((n, x, y)))
    view.set_zoom(0.6, scene.item("b").scene_rect().center())
    _drag(view, _viewport_point(view, "c", scene), _viewport_point(view, "x", scene))
    assert dropped == [("c", "x")] and moved == []
    assert scene.item("c").pos() == start  # snapped back: the engine decides


def test_releasing_on_empty_canvas_asks_to_pin(canvas) -> None:
    scene, view = canvas
    start = scene.item("c").pos()
    moved: list[tuple[str, float, float]] = []
    dropped: list[tuple[str, str]] = []
    scene.node_moved.connect(lambda n, x, y: moved.append((n, x, y)))
    scene.node_dropped.connect(lambda a, b: dropped.append((a, b)))
    a = _viewport_point(view, "c", scene)
    _drag(view, a, a + QPoint(0, 120))
    assert dropped == [] and len(moved) == 1
    node_id, x, y = moved[0]
    assert node_id == "c" and x == pytest.approx(start.x()) and y == pytest.approx(start.y() + 120, abs=1)
    assert scene.item("c").pos() == QPointF(x, y)  # stays where dropped
    assert scene.edge_item("c>b").path().elementAt(3).y > start.y() + 100  # the edge followed


def test_click_and_ctrl_click_select_and_report_the_primary_node(canvas) -> None:
    scene, view = canvas
    primaries: list[str] = []
    selections: list[list[str]] = []
    scene.node_selected.connect(primaries.append)
    scene.selection_changed.connect(selections.append)
    left = Qt.MouseButton.LeftButton
    for node_id, mods in (("a", Qt.KeyboardModifier.NoModifier), ("c", Qt.KeyboardModifier.ControlModifier)):
        p = _viewport_point(view, node_id, scene)
        _mouse(view, QEvent.Type.MouseButtonPress, p, left, modifiers=mods)
        _mouse(view, QEvent.Type.MouseButtonRelease, p, Qt.MouseButton.NoButton, modifiers=mods)
    assert scene.selected_ids() == ["a", "c"] and primaries == ["a", "c"]
    assert selections[-1] == ["a", "c"]
    empty = view.mapFromScene(QPointF(-600, 1500))
    _mouse(view, QEvent.Type.MouseButtonPress, empty, left)
    _mouse(view, QEvent.Type.MouseButtonRelease, empty, Qt.MouseButton.NoButton)
    assert scene.selected_ids() == [] and primaries[-1] == ""


def test_rubber_band_selects_several_nodes(canvas) -> None:
    scene, view = canvas
    view.set_zoom(0.5, scene.item("b").scene_rect().center())
    ra, rc = scene.item("a").scene_rect(), scene.item("c").scene_rect()
    start = view.mapFromScene(ra.topLeft() - QPointF(20, 20))
    end = view.mapFromScene(rc.bottomRight() + QPointF(10, 10))
    left, shift = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier
    _mouse(view, QEvent.Type.MouseButtonPress, start, left, modifiers=shift)
    for i in range(1, 6):
        _mouse(view, QEvent.Type.MouseMove, start + (end - start) * (i / 5), left, Qt.MouseButton.NoButton, shift)
    _mouse(view, QEvent.Type.MouseButtonRelease, end, Qt.MouseButton.NoButton, modifiers=shift)
    assert {"a", "b", "c"} <= set(scene.selected_ids())
    assert "x" not in scene.selected_ids()


def test_context_actions_fit_the_node_and_emit_node_action(canvas) -> None:
    scene, _ = canvas
    assert scene.node_actions("c") == ["reply", "regenerate", "checkpoint", "focus"]
    assert scene.node_actions("a")[-1] == "collapse"
    assert scene.node_actions("e") == ["focus"]
    scene.select(["b", "x"])
    assert "inject" in scene.node_actions("c")
    scene.set_collapsed("a", True)
    assert "expand" in scene.node_actions("a") and "collapse" not in scene.node_actions("a")
    got: list[tuple[str, str]] = []
    scene.node_action.connect(lambda action, node: got.append((action, node)))
    menu = scene.build_node_menu("c")
    [reply] = [a for a in menu.actions() if a.data() == "reply"]
    reply.trigger()
    assert got == [("reply", "c")]


def test_dropping_the_pending_input_chip_on_a_node(canvas) -> None:
    scene, view = canvas
    got: list[str] = []
    scene.pending_dropped.connect(got.append)
    mime = QMimeData()
    mime.setData(PENDING_MIME, b"pending")
    pos = QPointF(_viewport_point(view, "b", scene))
    move, buttons, mods = Qt.DropAction.MoveAction, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(pos.toPoint(), move, mime, buttons, mods)
    QApplication.sendEvent(view.viewport(), enter)
    assert enter.isAccepted()
    over = QDragMoveEvent(pos.toPoint(), move, mime, buttons, mods)
    QApplication.sendEvent(view.viewport(), over)
    assert over.isAccepted()
    QApplication.sendEvent(view.viewport(), QDropEvent(pos, move, mime, buttons, mods))
    assert got == ["b"]
    other = QMimeData()
    other.setText("plain text")
    refused = QDragEnterEvent(pos.toPoint(), move, other, buttons, mods)
    QApplication.sendEvent(view.viewport(), refused)
    assert not refused.isAccepted()


# ---------------------------------------------------------------------- navigation


def test_zoom_pan_fit_and_center(canvas, qtbot) -> None:
    scene, view = canvas
    view.set_zoom(1.0, QPointF(0, 0))
    anchor = QPoint(200, 150)
    under = view.mapToScene(anchor)
    view.zoom_by(2.0, anchor)
    assert view.scale_factor() == pytest.approx(2.0)
    assert (view.mapToScene(anchor) - under).manhattanLength() < 2  # zoomed around the point
    center = view.mapToScene(view.viewport().rect().center())
    qtbot.keyClick(view, Qt.Key.Key_Right)
    assert view.mapToScene(view.viewport().rect().center()).x() > center.x()
    qtbot.keyClick(view, Qt.Key.Key_Minus)
    assert view.scale_factor() == pytest.approx(1.6)
    view.set_zoom(3.0, QPointF(5000, 5000))
    qtbot.keyClick(view, Qt.Key.Key_F)  # Fit: the newest node's conversation, focused
    assert scene.focus() == "a"
    rect = view.mapFromScene(scene.conversation_rect("a")).boundingRect()
    assert view.viewport().rect().contains(rect) and not rect.intersects(view.minimap.geometry())
    assert view.scale_factor() <= 1.0
    qtbot.keyClick(view, Qt.Key.Key_E)  # Show everything
    assert scene.focus() is None
    assert view.viewport().rect().contains(view.mapFromScene(scene.content_rect()).boundingRect())
    view.center_on_node("x")
    middle = view.mapToScene(view.viewport().rect().center())
    assert scene.item("x").scene_rect().contains(middle)
    transform = view.transform()
    view.wheelEvent  # noqa: B018 - the wheel path is zoom_by around the cursor
    view.zoom_by(1.0015 ** 120)
    assert view.transform() != transform and math.isclose(view.scale_factor(), transform.m11() * 1.0015 ** 120)


def test_dragging_the_background_pans(canvas) -> None:
    scene, view = canvas
    empty = view.mapFromScene(QPointF(-700, 1600))
    before = view.mapToScene(view.viewport().rect().center())
    _drag(view, empty, empty + QPoint(-150, -90))
    after = view.mapToScene(view.viewport().rect().center())
    assert after.x() == pytest.approx(before.x() + 150, abs=2)
    assert after.y() == pytest.approx(before.y() + 90, abs=2)
    assert scene.selected_ids() == []


def test_theme_switch_repaints_with_dark_colours(canvas) -> None:
    scene, _ = canvas
    light = scene.backgroundBrush().color().lightness()
    scene.set_theme(True)
    assert scene.backgroundBrush().color().lightness() < light
    assert scene.legend()[0][0] == "node" and len(scene.legend()) == len(NodeKind) + len(EdgeKind)


def test_bench_reports_frame_times(qtbot) -> None:
    from app.ui.canvas.bench import measure_pan_zoom

    result = measure_pan_zoom(n_nodes=400, frames=24)
    for key in ("frame_ms_p50", "frame_ms_p95", "frame_ms_max", "loop_lag_ms_p50", "loop_lag_ms_p95",
                "loop_lag_ms_max", "layout_ms", "n_nodes", "n_edges"):
        assert key in result and math.isfinite(result[key]) and result[key] >= 0
    assert result["n_nodes"] == 400 and result["frame_ms_p50"] <= result["frame_ms_p95"] <= result["frame_ms_max"]


def test_an_edge_goes_around_a_card_in_its_way(qtbot) -> None:
    from app.ui.canvas.edges import stroke

    g = SessionGraph("s")
    for node_id, x in (("a", 0.0), ("x", 320.0), ("b", 640.0)):  # x stands between a and b
        g.add_node(GraphNode(node_id=node_id, kind=NodeKind.TURN, label=node_id, x=x, y=0.0, pinned=True))
    scene, _view = shown_canvas(qtbot, g)
    _continue(g, "b", "a")
    path = scene.edge_item("b>a").path()
    a, x, b = (scene.item(n).scene_rect() for n in ("a", "x", "b"))
    assert not stroke(path).intersects(x)  # around the card, not behind it
    xs = {round(path.elementAt(i).x) for i in range(path.elementCount())}
    assert path.elementAt(0).x == a.right() and b.left() in xs  # still from side to side
    g.move_node("x", 320.0, 900.0)  # the card out of the way, then b moved: the plain curve again
    g.move_node("b", 650.0, 0.0)
    assert path.boundingRect().height() > 20 > scene.edge_item("b>a").path().boundingRect().height()


def test_a_task_card_offers_its_steering_and_says_when_it_is_paused(canvas, graph: SessionGraph) -> None:
    scene, _ = canvas
    graph.add_node(_node("t", NodeKind.TASK, "draft the agenda", status="active"))
    graph.add_edge(GraphEdge(src="c", dst="t", kind=EdgeKind.SPAWNED))
    assert scene.node_actions("t")[-3:] == ["pause_task", "amend_task", "cancel_task"]
    graph.update_node("t", attrs={"status": "blocked", "paused": True,
                                  "steer": "paused (work so far kept); 1/3 steps done"})
    item = scene.item("t")
    assert item.task_status == "paused" and "1/3 steps done" in item.toolTip()
    assert scene.node_actions("t")[-3:] == ["resume_task", "amend_task", "cancel_task"]
    menu = scene.build_node_menu("t")
    assert [a.text() for a in menu.actions()][-3:] == ["Resume task", "Amend task\u2026", "Cancel task"]
    graph.update_node("t", attrs={"status": "complete", "paused": False})
    assert "cancel_task" not in scene.node_actions("t")
