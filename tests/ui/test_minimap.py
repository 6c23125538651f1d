"""Fit keeps cards readable; the minimap shows the whole of a large session and moves the view.

A small session fits at a readable zoom and needs no minimap; a conversation too large for that is
kept at ``READABLE_SCALE`` around the selection with the minimap in the corner, drawn from the scene's
overview, its frame where the view is; a click on the minimap centres the view there; E (or
"Show everything") still shows everything however small.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt

from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.scene import CanvasScene
from app.ui.canvas.view import READABLE_SCALE, CanvasView
from tests.ui.conftest import shown_canvas


def _chain(n: int, branches: int = 1) -> SessionGraph:
    g = SessionGraph("s")
    for b in range(branches):
        for i in range(n):
            node_id = f"b{b}t{i}"
            g.add_node(GraphNode(node_id=node_id, kind=NodeKind.TURN, label=f"turn {i} of branch {b}"))
            parent = f"b{b}t{i - 1}" if i else ("b0t0" if b else None)
            if parent is not None and parent != node_id:
                g.add_edge(GraphEdge(src=node_id, dst=parent, kind=EdgeKind.CONTINUES))
    return g


def _view(qtbot, graph: SessionGraph) -> tuple[CanvasScene, CanvasView]:
    return shown_canvas(qtbot, graph, (900, 600))


def test_a_small_session_fits_readably_without_a_minimap(qtbot) -> None:
    _scene, view = _view(qtbot, _chain(3))
    view.fit_readable()
    view.minimap.refresh()
    assert view.scale_factor() >= READABLE_SCALE and not view.minimap.isVisible()


def test_a_large_session_stays_readable_and_the_minimap_moves_the_view(qtbot) -> None:
    scene, view = _view(qtbot, _chain(60, branches=4))
    scene.select(["b3t50"])
    view.fit_readable()
    view.minimap.refresh()
    assert abs(view.scale_factor() - READABLE_SCALE) < 1e-6
    assert view.minimap.isVisible()
    selected = scene.item("b3t50").scene_rect().center()
    assert view.minimap.visible_rect().contains(selected)  # around the selection
    # The map is drawn (the overview's ink, not just its frame).
    image = view.minimap.grab().toImage()
    colours = {image.pixel(x, y) for x in range(0, image.width(), 3) for y in range(0, image.height(), 3)}
    assert len(colours) > 3
    # A click on the map's far corner moves the view to the other end of the canvas.
    before = view.minimap.visible_rect().center()
    corner = QPoint(12, 12) if before.x() > scene.content_rect().center().x() else QPoint(208, 138)
    qtbot.mouseClick(view.minimap, Qt.MouseButton.LeftButton, pos=corner)
    after = view.minimap.visible_rect().center()
    assert (after - before).manhattanLength() > 500
    # E shows everything however small; then nothing is outside the view.
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_E)
    view.minimap.refresh()
    assert view.scale_factor() < READABLE_SCALE and not view.minimap.isVisible()
    assert view.minimap.visible_rect().contains(scene.content_rect())
