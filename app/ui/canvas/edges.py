"""Edge items: one per graph edge, drawn by Qt from a path (no Python paint), by kind:
``continues`` solid with an arrow, ``references`` dotted, ``derived_from`` dashed, ``spawned``
dash-dot with an arrow, ``resolves`` solid green with an arrow, ``merges`` a coloured double line.

An edge between laid out nodes follows the route the layout gives (``TidyLayout.route``: down
into the channel below its row, along the free channels and gutters, into the other card's top)
drawn with rounded corners (``route_path``). An edge with a dragged or waiting end is a curve
from one card's side to the other's; where that curve would run behind another card, ``detour``
takes it through the free space instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPainterPathStroker
from PySide6.QtWidgets import QGraphicsPathItem, QStyleOptionGraphicsItem, QWidget

from app.core.types import EdgeKind, GraphEdge
from app.ui.canvas.items import NodeItem
from app.ui.canvas.style import ARROW_KINDS, CanvasStyle, edge_kind


def edge_path(a: QRectF, a_port: float, b: QRectF, b_port: float, arrow: bool) -> QPainterPath:
    """A curve from box ``a`` to box ``b``: side to side when they are apart horizontally (at the
    ports' heights), else bottom to top. ``arrow`` adds an open arrow head at ``b``."""
    if b.left() >= a.right() + 4:
        p0, p1 = QPointF(a.right(), a.top() + a_port), QPointF(b.left(), b.top() + b_port)
        horizontal = True
    elif a.left() >= b.right() + 4:
        p0, p1 = QPointF(a.left(), a.top() + a_port), QPointF(b.right(), b.top() + b_port)
        horizontal = True
    elif b.top() >= a.bottom():
        p0, p1 = QPointF(a.center().x(), a.bottom()), QPointF(b.center().x(), b.top())
        horizontal = False
    else:
        p0, p1 = QPointF(a.center().x(), a.top()), QPointF(b.center().x(), b.bottom())
        horizontal = False
    path = QPainterPath(p0)
    if horizontal:
        d = (p1.x() - p0.x()) * 0.5
        path.cubicTo(QPointF(p0.x() + d, p0.y()), QPointF(p1.x() - d, p1.y()), p1)
        ux, uy = (1.0 if d >= 0 else -1.0), 0.0
    else:
        d = (p1.y() - p0.y()) * 0.5
        path.cubicTo(QPointF(p0.x(), p0.y() + d), QPointF(p1.x(), p1.y() - d), p1)
        ux, uy = 0.0, (1.0 if d >= 0 else -1.0)
    if arrow:
        _arrow_head(path, p1, ux, uy)
    return path


def route_path(points: Sequence[tuple[float, float]], arrow: bool, radius: float = 10.0) -> QPainterPath:
    """A polyline through ``points`` with rounded corners; ``arrow`` adds an open head at the end."""
    path = QPainterPath(QPointF(*points[0]))
    for (ax, ay), (bx, by), (cx, cy) in zip(points, points[1:], points[2:], strict=False):
        d1, d2 = math.hypot(bx - ax, by - ay), math.hypot(cx - bx, cy - by)
        r = min(radius, d1 / 2, d2 / 2)
        if r <= 0:
            path.lineTo(bx, by)
            continue
        path.lineTo(bx - (bx - ax) / d1 * r, by - (by - ay) / d1 * r)
        path.quadTo(bx, by, bx + (cx - bx) / d2 * r, by + (cy - by) / d2 * r)
    (px, py), (ex, ey) = points[-2] if len(points) > 1 else points[0], points[-1]
    path.lineTo(ex, ey)
    length = math.hypot(ex - px, ey - py)
    if arrow and length:
        _arrow_head(path, QPointF(ex, ey), (ex - px) / length, (ey - py) / length)
    return path


def _arrow_head(path: QPainterPath, tip: QPointF, ux: float, uy: float) -> None:
    """An open arrow head at ``tip`` pointing along (ux, uy)."""
    size, spread = 9.0, 0.5
    bx, by = tip.x() - ux * size, tip.y() - uy * size
    path.moveTo(bx - uy * size * spread, by + ux * size * spread)
    path.lineTo(tip)
    path.lineTo(bx + uy * size * spread, by - ux * size * spread)


def stroke(path: QPainterPath) -> QPainterPath:
    """The thin area a path's line covers (an open path's own area would include its chord)."""
    stroker = QPainterPathStroker()
    stroker.setWidth(2.0)
    return stroker.createStroke(path)


def room_between(a: QRectF, b: QRectF, card: float = 100.0) -> bool:
    """Whether a card could stand between the boxes: farther apart than a gutter, across or
    down (a curve within a gutter never meets a card, so it needs no look at the scene)."""
    return max(b.left() - a.right(), a.left() - b.right(), b.top() - a.bottom(), a.top() - b.bottom()) > card


def detour(a: QRectF, a_port: float, b: QRectF, b_port: float, arrow: bool,
           blocked: Callable[[QPainterPath], bool], gap: float = 24.0) -> QPainterPath | None:
    """A path from box ``a`` to box ``b`` through free space (see the module doc): side out, a
    gutter, the first free channel among above/below ``b``'s row and above/below ``a``'s, a
    gutter, side in. None when ``blocked`` says every channel runs into a card."""
    right = b.center().x() >= a.center().x()
    p0 = QPointF(a.right() if right else a.left(), a.top() + a_port)
    p1 = QPointF(b.left() if right else b.right(), b.top() + b_port)
    x1, x2 = (p0.x() + gap, p1.x() - gap) if right else (p0.x() - gap, p1.x() + gap)
    for y in (b.top() - gap, b.bottom() + gap, a.top() - gap, a.bottom() + gap):
        path = QPainterPath(p0)
        for point in (QPointF(x1, p0.y()), QPointF(x1, y), QPointF(x2, y), QPointF(x2, p1.y()), p1):
            path.lineTo(point)
        if not blocked(path):
            if arrow:
                _arrow_head(path, p1, 1.0 if right else -1.0, 0.0)
            return path
    return None


class EdgeItem(QGraphicsPathItem):
    """One graph edge; painted by Qt (no Python paint). A ``continues`` edge is drawn from the
    continued node to its continuation (reading order); other kinds from ``src`` to ``dst``."""

    def __init__(self, edge: GraphEdge, style: CanvasStyle) -> None:
        super().__init__()
        self.edge = edge
        self.edge_id = edge.edge_id
        self.kind = edge_kind(edge.kind)
        self.src_id, self.dst_id = edge.src, edge.dst
        self.setPen(style.edge_pen[self.kind])
        self.setZValue(0.0 if self.kind == EdgeKind.CONTINUES else 0.1)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)

    def ends(self) -> tuple[str, str]:
        """(from, to) node ids in drawing order."""
        if self.kind == EdgeKind.CONTINUES:
            return self.dst_id, self.src_id
        return self.src_id, self.dst_id

    def update_geometry(self, start: NodeItem, end: NodeItem,
                        blocked: Callable[[QPainterPath], bool] | None = None,
                        route: Sequence[tuple[float, float]] | None = None) -> None:
        """Redraw between ``start`` and ``end`` (the items of ``ends()``): along ``route`` (the
        layout's corners) when given; else a curve, and where ``blocked`` says the curve runs
        into a card, around it (``detour``) if a free way exists."""
        arrow = self.kind in ARROW_KINDS
        if route:
            self.setPath(route_path(route, arrow))
            return
        a, b = start.scene_rect(), end.scene_rect()
        path = edge_path(a, start.port_y(), b, end.port_y(), arrow)
        if blocked is not None and room_between(a, b) and blocked(path):
            path = detour(a, start.port_y(), b, end.port_y(), arrow, blocked) or path
        self.setPath(path)

    def apply_style(self, style: CanvasStyle) -> None:
        self.setPen(style.edge_pen[self.kind])


class MergeEdgeItem(EdgeItem):
    """A ``merges`` edge: a thick coloured line with a thin line of the background inside."""

    def __init__(self, edge: GraphEdge, style: CanvasStyle) -> None:
        super().__init__(edge, style)
        self._style = style

    def paint(self, painter: QPainter, _option: QStyleOptionGraphicsItem, _widget: QWidget | None = None) -> None:
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(self._style.edge_pen[EdgeKind.MERGES])
        painter.drawPath(self.path())
        painter.setPen(self._style.merge_inner_pen)
        painter.drawPath(self.path())

    def apply_style(self, style: CanvasStyle) -> None:
        self._style = style
        super().apply_style(style)
