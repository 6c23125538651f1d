"""How legible a laid out session is, measured on the real scene and view (``pcm bench canvas``).

``measure`` shows a session graph in a ``CanvasView`` of a desktop window's size (offscreen
works) and reports:

- ``layout_ms``: the pure layout of the whole graph (``layout.lay_out``, median of 3), and
  ``scene_ms``: showing it (items, layout, edges, card texts: ``CanvasScene.set_graph``);
- ``overlaps``: pairs of shown nodes whose boxes overlap (a satellite pile is one stack, by design);
- ``edges_through_cards``: shown edges whose line runs through a shown node other than its ends;
- ``readable_titles``: at Fit on the newest turn, the share (0–1) of its conversation's cards whose
  title is inside the view and drawn at least ``READABLE_PX`` tall; ``coverage``: the share of
  the view that cards cover there;
- ``moved_on_add``: turns are added one at a time, each continuing the newest turn of the next
  conversation in turn; for each, the mean distance (scene units) the other cards moved, averaged
  over the additions (``moved_on_add_max``: the worst addition; ``card_height`` to compare with).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QPointF, QRectF

from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.bench import close_canvas, shown_canvas
from app.ui.canvas.cards import CardText
from app.ui.canvas.edges import EdgeItem, stroke
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import CARD_HEIGHT, LayoutEdge, LayoutNode, lay_out
from app.ui.canvas.scene import CanvasScene
from app.ui.canvas.style import edge_kind, node_kind
from app.ui.canvas.view import CanvasView

READABLE_PX = 9.0
VIEW_SIZE = (1280, 800)


def _shown(scene: CanvasScene) -> list[NodeItem]:
    return [it for n in scene.node_ids() if (it := scene.item(n)) is not None and it.isVisible()]


def _stack(scene: CanvasScene, node_id: str) -> str | None:
    """The anchor of the pile the node lies on (None when it lies on none)."""
    anchor = scene.layout.anchor_of(node_id) if node_id in scene.layout else None
    return anchor if anchor is not None and node_id in scene.layout.pile(anchor) else None


def overlaps(scene: CanvasScene) -> int:
    """Pairs of shown nodes whose boxes overlap (by more than half a unit), piles apart."""
    items = sorted(_shown(scene), key=lambda it: it.scene_rect().left())
    count = 0
    active: list[tuple[QRectF, NodeItem]] = []
    for item in items:
        rect = item.scene_rect()
        active = [(r, it) for r, it in active if r.right() > rect.left()]
        for other_rect, other in active:
            inter = rect.intersected(other_rect)
            if inter.width() > 0.5 and inter.height() > 0.5:
                stack = _stack(scene, item.node_id)
                if stack is None or stack != _stack(scene, other.node_id):
                    count += 1
        active.append((rect, item))
    return count


def edges_through_cards(scene: CanvasScene) -> int:
    """Shown edges whose line runs through a shown node other than their ends (or their pile)."""
    count = 0
    for item in scene.items():
        if not isinstance(item, EdgeItem) or not item.isVisible():
            continue
        ends = {item.src_id, item.dst_id}
        piles = {p for e in ends if (p := _stack(scene, e)) is not None}
        line = stroke(item.path())
        for other in scene.items(item.path().boundingRect()):
            if (isinstance(other, NodeItem) and other.isVisible() and other.node_id not in ends
                    and _stack(scene, other.node_id) not in piles
                    and line.intersects(other.scene_rect().adjusted(1, 1, -1, -1))):
                count += 1
                break
    return count


def readable_titles(scene: CanvasScene, view: CanvasView, root: str) -> float:
    """The share of the conversation's shown cards whose title is in the view and readable."""
    members = dict(scene.layout.conversations()).get(root, [])
    cards = [it for m in members if (it := scene.item(m)) is not None and it.isVisible()]
    if not cards:
        return 0.0
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    scale = view.scale_factor()
    good = sum(1 for it in cards if seen.contains(it.scene_rect()) and it.title_pixels(scale) >= READABLE_PX)
    return good / len(cards)


def coverage(scene: CanvasScene, view: CanvasView) -> float:
    """The share of the view that shown, uncovered cards cover (they do not overlap)."""
    seen = view.mapToScene(view.viewport().rect()).boundingRect()
    area = sum(r.width() * r.height() for it in _shown(scene) if not it.covered
               for r in (it.scene_rect().intersected(seen),))
    return min(1.0, area / max(1.0, seen.width() * seen.height()))


def moved_on_add(scene: CanvasScene, graph: SessionGraph, adds: int) -> dict[str, float]:
    """Add ``adds`` turns (see the module docstring) and measure how far the other cards moved."""
    order = {n: i for i, n in enumerate(scene.node_ids())}
    means: list[float] = []
    for i in range(adds):
        conversations = scene.layout.conversations()
        if not conversations:
            break
        _, members = conversations[i % len(conversations)]
        tip = max(members, key=lambda n: order.get(n, -1))
        before = {n: QPointF(it.pos()) for n in scene.node_ids() if (it := scene.item(n)) is not None}
        node = GraphNode(kind=NodeKind.TURN, label=f"added turn {i}")
        graph.add_node(node)
        graph.add_edge(GraphEdge(src=node.node_id, dst=tip, kind=EdgeKind.CONTINUES))
        order[node.node_id] = len(order)
        moved = [math.dist((p.x(), p.y()), (it.x(), it.y()))
                 for n, p in before.items() if (it := scene.item(n)) is not None]
        means.append(sum(moved) / max(1, len(moved)))
    return {"moved_on_add": round(statistics.fmean(means), 1) if means else 0.0,
            "moved_on_add_max": round(max(means), 1) if means else 0.0, "adds": float(len(means))}


def layout_time(graph: SessionGraph, runs: int = 3) -> float:
    """Median time (ms) of laying the whole graph out, without Qt."""
    nodes = [LayoutNode(n.node_id, node_kind(n.kind)) for n in graph.nodes()]
    edges = [LayoutEdge(e.src, e.dst, edge_kind(e.kind)) for e in graph.edges()]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        lay_out(nodes, edges)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(graph: SessionGraph, texts: Mapping[str, CardText], *, adds: int = 8) -> dict[str, Any]:
    """Show ``graph`` (with its cards' ``texts``) in a view and measure it (module docstring).
    ``graph`` gets ``adds`` turns more (a throw-away copy of a session's graph is meant)."""
    app, scene, view = shown_canvas(VIEW_SIZE)
    started = time.perf_counter()
    scene.set_graph(graph)
    scene.set_card_texts(texts)
    scene_ms = (time.perf_counter() - started) * 1000
    turns = [n for n in scene.node_ids() if (it := scene.item(n)) is not None and it.kind == NodeKind.TURN]
    result: dict[str, Any] = {
        "turns": len(turns), "nodes": scene.node_count(), "conversations": len(scene.layout.conversations()),
        "layout_ms": round(layout_time(graph), 1), "scene_ms": round(scene_ms, 1),
        "overlaps": overlaps(scene), "edges_through_cards": edges_through_cards(scene),
    }
    newest = turns[-1] if turns else None
    root = scene.conversation_of(newest) if newest else None
    view.fit_readable(newest)
    app.processEvents()
    result.update({
        "fit_scale": round(view.scale_factor(), 3),
        "fit_conversation_turns": len(dict(scene.layout.conversations()).get(root, [])) if root else 0,
        "readable_titles": round(readable_titles(scene, view, root), 3) if root else 0.0,
        "coverage": round(coverage(scene, view), 3),
        "card_height": CARD_HEIGHT,
    })
    result.update(moved_on_add(scene, graph, adds))
    close_canvas(app, scene, view)
    return result
