"""The far-zoom drawing of the canvas: every node and edge in a handful of C++ calls.

Below ``OVERVIEW_SCALE`` a view would call a Python ``paint`` for thousands of items per frame;
``CanvasView`` instead asks the scene for this overview: one path of rectangles per node kind (or
one polygon of dots per kind when very far) and one path of straight lines per edge kind, built
once. Nodes and edges that arrive later are kept in a short "recent" list drawn from their
current positions each frame (a new turn moves once its ``continues`` edge arrives) and baked in
at the next rebuild. Selection, highlight and candidates, which are few,
are drawn on top each frame, and so are the labels of landmark nodes (tasks, branch roots,
checkpoints) at a fixed size on screen, skipping those that would overlap: the overview stays
readable.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen, QPolygonF

from app.core.types import EdgeKind, NodeKind
from app.ui.canvas.edges import EdgeItem
from app.ui.canvas.items import NodeItem
from app.ui.canvas.shapes import NODE_SIZES
from app.ui.canvas.style import LOD_LABEL, CanvasStyle

OVERVIEW_SCALE = LOD_LABEL  # below this scale (and with enough nodes) views draw the overview
OVERVIEW_MIN_NODES = 300
DOT_SCALE = 0.03  # below this scale nodes are dots of a fixed size on screen
LANDMARK_SCALE = 0.02  # below this scale even landmark labels are left out
MAX_LANDMARKS = 60
_MAX_RECENT = 300  # beyond this many late arrivals the overview is rebuilt
_LANDMARK_WIDTH = 200.0
_TURN_BLOCK_HEIGHT = 100.0  # a nominal height, so a growing card does not invalidate the overview


_BLOCK_SIZES = {kind: (w, _TURN_BLOCK_HEIGHT if kind == NodeKind.TURN else h) for kind, (w, h) in NODE_SIZES.items()}


def _block(item: NodeItem) -> QRectF:
    """The node's box in the overview (a fixed size per kind)."""
    w, h = _BLOCK_SIZES[item.kind]
    return QRectF(item.x(), item.y(), w, h)


def _ports(start: NodeItem, end: NodeItem) -> tuple[QPointF, QPointF]:
    """Where an overview edge line starts and ends (side to side, or centre to centre)."""
    a, b = start.pos(), end.pos()
    if b.x() >= a.x() + start.width:
        return QPointF(a.x() + start.width, a.y() + start.port_y()), QPointF(b.x(), b.y() + end.port_y())
    return (QPointF(a.x() + start.width / 2, a.y() + start.port_y()),
            QPointF(b.x() + end.width / 2, b.y() + end.port_y()))


class OverviewPainter:
    """Batched geometry of the whole scene for far zoom levels."""

    def __init__(self, style: CanvasStyle) -> None:
        self.style = style
        self.dirty = True
        self._blocks: dict[NodeKind, QPainterPath] = {}
        self._dots: dict[NodeKind, QPolygonF] = {}
        self._dim_blocks = QPainterPath()
        self._dim_dots = QPolygonF()
        self._edges: dict[EdgeKind, QPainterPath] = {}
        self._landmarks: list[tuple[QPointF, str, float]] = []  # (top left, label, width), by y
        self._landmark_ys: list[float] = []
        self._recent_nodes: dict[str, tuple[NodeItem, bool]] = {}
        self._recent_edges: list[tuple[EdgeItem, NodeItem, NodeItem]] = []
        self._pens: dict[str, QPen] = {}
        self.apply_style(style)

    def apply_style(self, style: CanvasStyle) -> None:
        """Take the colours of ``style`` (the geometry stays)."""
        self.style = style
        self._pens = {}
        for kind in NodeKind:
            pen = QPen(style.solid[kind].color(), 4.0)
            pen.setCosmetic(True)
            pen.setCapStyle(Qt.PenCapStyle.SquareCap)
            self._pens[kind.value] = pen
        dim = QPen(style.dim_brush.color(), 3.0)
        dim.setCosmetic(True)
        self._pens["dim"] = dim
        for ekind in EdgeKind:
            color = QColor(style.edge_color[ekind])
            color.setAlpha(150)
            pen = QPen(color, 1.0)
            pen.setCosmetic(True)
            self._pens[ekind.value] = pen

    # ------------------------------------------------------------------ geometry

    def rebuild(self, nodes: Iterable[NodeItem], edges: Iterable[tuple[EdgeItem, NodeItem, NodeItem]],
                dimmed: set[str], landmarks: Callable[[NodeItem], bool] = lambda _item: False) -> None:
        """Recompute everything from the visible items; ``landmarks`` picks the labelled ones."""
        self._landmarks = []
        self._blocks = {kind: QPainterPath() for kind in NodeKind}
        self._dots = {kind: QPolygonF() for kind in NodeKind}
        self._dim_blocks = QPainterPath()
        self._dim_dots = QPolygonF()
        self._edges = {kind: QPainterPath() for kind in EdgeKind}
        self._recent_nodes, self._recent_edges = {}, []
        self.dirty = False
        wrapper = self.style.wrap_label
        for item in nodes:
            if item.isVisible():
                self._bake_node(item, item.node_id in dimmed)
                if item.node_id not in dimmed and landmarks(item):
                    label, _ = wrapper.wrap(item.node.label or item.kind.value, _LANDMARK_WIDTH, 1)
                    if label:
                        width = wrapper.measure(label[0]) + 8
                        self._landmarks.append((QPointF(item.x(), item.y()), label[0], width))
        for edge, start, end in edges:
            if edge.isVisible():
                self._bake_edge(edge, start, end)
        self._landmarks.sort(key=lambda lm: lm[0].y())
        self._landmark_ys = [lm[0].y() for lm in self._landmarks]

    def add_node(self, item: NodeItem, dimmed: bool = False) -> None:
        """Take a node that has just arrived (drawn from its live position until the rebuild)."""
        if not self.dirty:
            self._recent_nodes[item.node_id] = (item, dimmed)
            self.dirty = len(self._recent_nodes) > _MAX_RECENT

    def add_edge(self, edge: EdgeItem, start: NodeItem, end: NodeItem) -> None:
        """Take an edge that has just arrived (drawn from its ends' live positions)."""
        if not self.dirty:
            self._recent_edges.append((edge, start, end))
            self.dirty = len(self._recent_edges) > _MAX_RECENT

    def is_recent(self, node_id: str) -> bool:
        """Whether the node is drawn from its live position (so moving it needs no rebuild)."""
        return node_id in self._recent_nodes

    def _bake_node(self, item: NodeItem, dimmed: bool) -> None:
        block = _block(item)
        if dimmed:
            self._dim_blocks.addRect(block)
            self._dim_dots.append(block.center())
        else:
            self._blocks[item.kind].addRect(block)
            self._dots[item.kind].append(block.center())

    def _bake_edge(self, edge: EdgeItem, start: NodeItem, end: NodeItem) -> None:
        a, b = _ports(start, end)
        path = self._edges[edge.kind]
        path.moveTo(a)
        path.lineTo(b)

    # ------------------------------------------------------------------ painting

    def paint(self, painter: QPainter, scale: float, *, selected: Sequence[NodeItem],
              highlighted: Sequence[NodeItem], candidates: Sequence[tuple[NodeItem, NodeItem, str, bool]],
              labels: bool = True) -> None:
        """Draw the overview with ``painter`` already in scene coordinates (``labels``: the
        landmarks' names and the candidates' scores too)."""
        style = self.style
        self._paint_baked(painter, scale)
        if self._recent_edges or self._recent_nodes:
            self._paint_recent(painter, scale)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        if candidates:
            for source, target, _label, chosen in candidates:
                painter.setPen(style.chosen_pen if chosen else style.candidate_pen)
                painter.drawLine(_block(source).center(), _block(target).center())
        for pen, items in ((style.highlight_pen, highlighted), (style.selected_pen, selected)):
            if items:
                painter.setPen(pen)
                for item in items:
                    if item.isVisible():
                        painter.drawRect(_block(item).adjusted(-8, -8, 8, 8))
        if labels and scale >= LANDMARK_SCALE and self._landmarks:
            self._paint_landmarks(painter)
        if labels and candidates:
            self._paint_scores(painter, candidates)

    def _paint_baked(self, painter: QPainter, scale: float) -> None:
        """The baked edges, then the nodes: dots when zoomed far out, else blocks."""
        style = self.style
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for ekind, path in self._edges.items():
            if not path.isEmpty():
                painter.setPen(self._pens[ekind.value])
                painter.drawPath(path)
        if scale < DOT_SCALE:
            painter.setPen(self._pens["dim"])
            painter.drawPoints(self._dim_dots)
            for kind, dots in self._dots.items():
                painter.setPen(self._pens[kind.value])
                painter.drawPoints(dots)
        else:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(style.dim_brush)
            painter.drawPath(self._dim_blocks)
            for kind, path in self._blocks.items():
                painter.setBrush(style.solid[kind])
                painter.drawPath(path)

    def _paint_scores(self, painter: QPainter, candidates: Sequence[tuple[NodeItem, NodeItem, str, bool]]) -> None:
        """The candidates' score labels, at a readable size whatever the zoom."""
        style = self.style
        transform = painter.transform()
        painter.resetTransform()
        painter.setFont(style.font_small)
        painter.setPen(style.text_pen)
        for source, target, label, _chosen in candidates:
            mid = (_block(source).center() + _block(target).center()) / 2
            painter.drawText(transform.map(mid) + QPointF(4, -4), label)
        painter.setTransform(transform)

    def _paint_recent(self, painter: QPainter, scale: float) -> None:
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for edge, start, end in self._recent_edges:
            if edge.isVisible():
                painter.setPen(self._pens[edge.kind.value])
                painter.drawLine(*_ports(start, end))
        painter.setPen(Qt.PenStyle.NoPen)
        for item, dimmed in self._recent_nodes.values():
            if not item.isVisible():
                continue
            if scale < DOT_SCALE:
                painter.setPen(self._pens["dim" if dimmed else item.kind.value])
                painter.drawPoint(_block(item).center())
            else:
                painter.setPen(Qt.PenStyle.NoPen)
                painter.fillRect(_block(item), self.style.dim_brush if dimmed else self.style.solid[item.kind])

    def _paint_landmarks(self, painter: QPainter) -> None:
        """Landmark labels in device space, each on a plate, none overlapping another, at most
        ``MAX_LANDMARKS`` per frame (the cost stays bounded however many are in view)."""
        transform = painter.transform()
        window = QRectF(painter.window())  # the device rectangle, in device pixels
        inverse, ok = transform.inverted()
        if not ok:
            return
        seen = inverse.mapRect(window)
        first = bisect.bisect_left(self._landmark_ys, seen.top())
        last = bisect.bisect_right(self._landmark_ys, seen.bottom() + 200)
        painter.resetTransform()
        style = self.style
        painter.setFont(style.font_label)
        metrics = style.metrics_label
        height = metrics.height() + 4
        left, right = seen.left() - 200, seen.right()
        taken: set[tuple[int, int]] = set()  # 40 x 8 px cells covered by labels drawn so far
        drawn = 0
        for at, label, width in self._landmarks[first:last]:
            if not left <= at.x() <= right:
                continue
            p = transform.map(at)
            x, y = p.x(), p.y() - height
            if (int(x // 40), int(y // 8)) in taken:  # the usual rejection, before the full test
                continue
            cells = {(cx, cy) for cx in range(int(x // 40), int((x + width) // 40) + 1)
                     for cy in range(int(y // 8), int((y + height) // 8) + 1)}
            if cells & taken:
                continue
            box = QRectF(x, y, width, height)
            taken |= cells
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(style.plate_brush)
            painter.drawRoundedRect(box, 4, 4)
            painter.setPen(style.text_pen)
            painter.drawText(QPointF(p.x() + 4, p.y() - 4 - metrics.descent()), label)
            drawn += 1
            if drawn >= MAX_LANDMARKS:
                break
        painter.setTransform(transform)
