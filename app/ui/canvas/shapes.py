"""Shapes and sizes of canvas nodes by kind: outlines, label/badge rectangles (cached per kind and
size), initial sizes. Geometry only; ``items.NodeItem`` paints with it."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QPainterPath

from app.core.types import NodeKind
from app.ui.canvas.layout import CARD_WIDTH
from app.ui.canvas.style import ARTIFACT_SIZE, ENV_SIZE, MEMORY_SIZE, TASK_SIZE, TURN_MIN_HEIGHT

_LABEL_LEFT = {NodeKind.TURN: 34.0, NodeKind.TASK: 40.0, NodeKind.ENV: 32.0, NodeKind.MEMORY: 34.0,
               NodeKind.ARTIFACT: 8.0}
_GLYPH_AT = {NodeKind.TURN: (10.0, 9.0), NodeKind.TASK: (20.0, 10.0), NodeKind.ENV: (11.0, 12.0),
             NodeKind.MEMORY: (14.0, 19.0), NodeKind.ARTIFACT: (8.0, 8.0)}


@dataclass(frozen=True)
class Geometry:
    """Rectangles and paths of a node of one kind and size, shared by all such nodes."""

    rect: QRectF
    bounds: QRectF
    outline: QPainterPath
    inner: QPainterPath | None
    glyph_at: QPointF
    label_x: float
    label_width: float
    label_rect: QRectF
    dot_rect: QRectF
    badge_rect: QRectF
    progress_rect: QRectF


_CACHE: dict[tuple[NodeKind, float, float], Geometry] = {}


def geometry(kind: NodeKind, w: float, h: float) -> Geometry:
    key = (kind, w, h)
    found = _CACHE.get(key)
    if found is None:
        rect = QRectF(0, 0, w, h)
        left = _LABEL_LEFT[kind]
        found = _CACHE[key] = Geometry(
            rect=rect, bounds=rect.adjusted(-5, -10, 5, 5), outline=outline_path(kind, w, h),
            inner=outline_path(kind, w, h, inset=4) if kind == NodeKind.TASK else None,
            glyph_at=QPointF(*_GLYPH_AT[kind]), label_x=left,
            label_width=w - left - (12 if kind == NodeKind.TURN else 30 if kind == NodeKind.TASK else 14),
            label_rect=QRectF(8, 0, w - 16, h), dot_rect=QRectF(w - 22, 6, 16, 16),
            badge_rect=QRectF(w - 44, h - 20, 38, 15), progress_rect=QRectF(22, h - 16, w - 44, 6),
        )
    return found


NODE_SIZES: dict[NodeKind, tuple[float, float]] = {
    NodeKind.TURN: (CARD_WIDTH, TURN_MIN_HEIGHT), NodeKind.TASK: TASK_SIZE, NodeKind.ENV: ENV_SIZE,
    NodeKind.MEMORY: MEMORY_SIZE, NodeKind.ARTIFACT: ARTIFACT_SIZE,
}


def node_size(kind: NodeKind) -> tuple[float, float]:
    """The initial (for turns: minimum) size of a node of ``kind``."""
    return NODE_SIZES[kind]


def outline_path(kind: NodeKind, w: float, h: float, inset: float = 0.0) -> QPainterPath:
    """The outline of a node of ``kind`` in a ``w`` x ``h`` box (shrunk by ``inset``)."""
    r = QRectF(inset, inset, w - 2 * inset, h - 2 * inset)
    path = QPainterPath()
    if kind == NodeKind.TURN:
        path.addRoundedRect(r, 10, 10)
    elif kind == NodeKind.TASK:
        tip = 16.0
        path.moveTo(r.left() + tip, r.top())
        path.lineTo(r.right() - tip, r.top())
        path.lineTo(r.right(), r.center().y())
        path.lineTo(r.right() - tip, r.bottom())
        path.lineTo(r.left() + tip, r.bottom())
        path.lineTo(r.left(), r.center().y())
        path.closeSubpath()
    elif kind == NodeKind.ENV:
        path.addRoundedRect(r, r.height() / 2, r.height() / 2)
    elif kind == NodeKind.MEMORY:
        path.addEllipse(r)
    else:  # artifact: a page with a folded top-right corner
        fold = 14.0
        path.moveTo(r.left(), r.top())
        path.lineTo(r.right() - fold, r.top())
        path.lineTo(r.right(), r.top() + fold)
        path.lineTo(r.right(), r.bottom())
        path.lineTo(r.left(), r.bottom())
        path.closeSubpath()
        path.moveTo(r.right() - fold, r.top())
        path.lineTo(r.right() - fold, r.top() + fold)
        path.lineTo(r.right(), r.top() + fold)
    return path
