"""Edge items: one per graph edge, drawn by Qt from a path (no Python paint), by kind:
``continues`` solid with an arrow, ``references`` dotted, ``derived_from`` dashed, ``spawned``
dash-dot with an arrow, ``resolves`` solid green with an arrow, ``merges`` a coloured double line.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath
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
        size, spread = 9.0, 0.5
        bx, by = p1.x() - ux * size, p1.y() - uy * size
        path.moveTo(bx - uy * size * spread, by + ux * size * spread)
        path.lineTo(p1)
        path.lineTo(bx + uy * size * spread, by - ux * size * spread)
    return path


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

    def update_geometry(self, start: NodeItem, end: NodeItem) -> None:
        """Redraw between ``start`` and ``end`` (the items of ``ends()``)."""
        self.setPath(edge_path(start.scene_rect(), start.port_y(), end.scene_rect(), end.port_y(),
                               self.kind in ARROW_KINDS))

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
