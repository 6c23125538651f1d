"""CanvasView: pan, zoom, fit and select on a ``CanvasScene``.

Pan: drag the background with the left button (or anywhere with the middle button), or the arrow
keys. Zoom: the wheel (around the cursor) or +/-. 0 or F (Fit) shows the selected card's
conversation (else the newest's) as large as it fits, its titles readable, and the other
conversations as dimmed blocks; a click on a block fits that one; Escape or E (Show everything)
shows every conversation again and fits them all. Shift- or Ctrl-drag on the background draws a
selection rubber band; Ctrl+click adds to the selection; double-click centres. Far out (below
``OVERVIEW_SCALE`` with many nodes) the view paints the scene's batched overview and the
conversations' blocks instead of asking thousands of items to paint themselves.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QWheelEvent,
)
from PySide6.QtWidgets import QGraphicsView, QLabel, QWidget

from app.ui.canvas.minimap import MARGIN as MINIMAP_MARGIN
from app.ui.canvas.minimap import Minimap
from app.ui.canvas.overview import OVERVIEW_MIN_NODES, OVERVIEW_SCALE
from app.ui.canvas.scene import CanvasScene
from app.ui.canvas.style import BLOCK_SCALE

MIN_SCALE = 0.004
READABLE_SCALE = BLOCK_SCALE * 1.05  # Fit's smallest zoom: the cards' titles still show, readable
MAX_SCALE = 4.0
PAN_STEP = 80
_WORLD = QRectF(-4.0e6, -4.0e6, 8.0e6, 8.0e6)  # free panning: the canvas has no edge


FIRST_RUN_HINT = (
    "Nothing here yet. Type a question or a task in the box below and press Enter.\n\n"
    "Each input becomes a card on this canvas, placed on the branch it belongs to; its answer "
    "streams into the card. Select a card to see why it was routed there and what evidence the "
    "answer used (Inspector, right). Right-click a card to reply from it, mark a checkpoint "
    "or ask again.\n\n"
    "Help → Keyboard shortcuts lists the keys."
)


class CanvasView(QGraphicsView):
    """An interactive view of a ``CanvasScene``."""

    def __init__(self, scene: CanvasScene, parent: QWidget | None = None) -> None:
        super().__init__(scene, parent)
        self._canvas = scene
        self._pan_from: QPoint | None = None
        self._pan_moved = 0
        self._rubber = False
        self.overview_enabled = True
        self.setSceneRect(_WORLD)
        self.setRenderHints(QPainter.RenderHint.Antialiasing | QPainter.RenderHint.TextAntialiasing)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.MinimalViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.OptimizationFlag.DontSavePainterState
                                  | QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setDragMode(QGraphicsView.DragMode.NoDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAcceptDrops(True)
        self.hint = QLabel(FIRST_RUN_HINT, self.viewport())
        self.hint.setObjectName("canvas-hint")
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.hint.setStyleSheet("color: palette(mid); font-size: 14px;")
        scene.changed.connect(self._on_scene_changed)  # a method: Qt disconnects it with the view
        self.minimap = Minimap(self, scene)

    @property
    def canvas(self) -> CanvasScene:
        return self._canvas

    def _on_scene_changed(self, _rects: Any) -> None:
        self.update_hint()

    def update_hint(self) -> None:
        """Show the first-run hint, centred, while the canvas has no node."""
        empty = self._canvas.node_count() == 0
        if empty:
            width = min(520, max(200, self.viewport().width() - 40))
            self.hint.setFixedWidth(width)
            self.hint.adjustSize()
            self.hint.move((self.viewport().width() - width) // 2,
                           max(10, (self.viewport().height() - self.hint.height()) // 2))
        self.hint.setVisible(empty)

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self.update_hint()
        self.minimap.schedule()

    # ------------------------------------------------------------------ navigation

    def scale_factor(self) -> float:
        """The current zoom (1.0 = one scene unit per pixel)."""
        return self.transform().m11()

    def overview_active(self) -> bool:
        """Whether frames are drawn from the scene's batched overview."""
        return (self.overview_enabled and self.scale_factor() < OVERVIEW_SCALE
                and self._canvas.node_count() >= OVERVIEW_MIN_NODES)

    def pan_by(self, dx: float, dy: float) -> None:
        """Move the content by (dx, dy) pixels."""
        h, v = self.horizontalScrollBar(), self.verticalScrollBar()
        h.setValue(h.value() - round(dx))
        v.setValue(v.value() - round(dy))

    def zoom_by(self, factor: float, anchor: QPoint | None = None) -> None:
        """Zoom by ``factor`` keeping the scene point under ``anchor`` (default: the centre) fixed."""
        current = self.scale_factor()
        target = min(MAX_SCALE, max(MIN_SCALE, current * factor))
        if current <= 0 or abs(target - current) < 1e-12:
            return
        point = anchor if anchor is not None else self.viewport().rect().center()
        before = self.mapToScene(point)
        self.scale(target / current, target / current)
        drift = self.mapFromScene(before) - point
        self.pan_by(-drift.x(), -drift.y())
        self.minimap.schedule()

    def set_zoom(self, scale: float, center: QPointF | None = None) -> None:
        """Set an absolute zoom, optionally centring on a scene point."""
        keep = center if center is not None else self.mapToScene(self.viewport().rect().center())
        scale = min(MAX_SCALE, max(MIN_SCALE, scale))
        self.resetTransform()
        self.scale(scale, scale)
        self.centerOn(keep)
        self.minimap.schedule()

    def fit_readable(self, focus: str | None = None) -> None:
        """Fit: the conversation of ``focus`` (a node; default the selected one, else the newest)
        as large as it fits, never below ``READABLE_SCALE`` (there: around the node), the other
        conversations folded into blocks. Without a conversation, everything (``fit_all``)."""
        node = focus or (self._canvas.selected_node_ids() or [None])[-1] or self._canvas.newest_node()
        root = self._canvas.conversation_of(node) if node else None
        if root is None:
            self.fit_all()
            return
        self.fit_conversation(root, node)

    def fit_conversation(self, root: str, node: str | None = None) -> None:
        """Focus the conversation of ``root`` and fit it (see ``fit_readable``)."""
        self._canvas.set_focus(root)
        rect = self._canvas.conversation_rect(root)
        if rect.isEmpty():
            return
        self._fit_beside_minimap(rect)
        if self.scale_factor() < READABLE_SCALE:  # too wide: all of its rows, around the node
            item = self._canvas.item(node) if node else None
            tall = (self.viewport().height() - 56.0) / max(1.0, rect.height())
            at = item.scene_rect().center() if item is not None else rect.center()
            scale = min(1.0, max(READABLE_SCALE, tall))
            self.set_zoom(scale, QPointF(at.x(), rect.center().y() if scale <= tall else at.y()))

    def fit_all(self) -> None:
        """Show everything: every conversation (the focus dropped), every visible node (never
        zooming in past 1:1)."""
        self._canvas.set_focus(None)
        self._fit(self._canvas.content_rect())

    def _fit_beside_minimap(self, rect: QRectF, margin: float = 28.0) -> None:
        """Fit ``rect`` (never past 1:1) in the part of the view the minimap leaves free: beside
        it or above it, whichever shows ``rect`` larger."""
        port = self.viewport().rect()
        free_w = port.width() - self.minimap.width() - 2 * MINIMAP_MARGIN
        free_h = port.height() - self.minimap.height() - 2 * MINIMAP_MARGIN
        side = min((free_w - 2 * margin) / rect.width(), (port.height() - 2 * margin) / rect.height())
        above = min((port.width() - 2 * margin) / rect.width(), (free_h - 2 * margin) / rect.height())
        scale = min(1.0, max(MIN_SCALE, side, above))
        dx = (port.width() - free_w) / 2 if side >= above else 0.0
        dy = (port.height() - free_h) / 2 if side < above else 0.0
        self.set_zoom(scale, rect.center() + QPointF(dx, dy) / scale)

    def _fit(self, rect: QRectF) -> None:
        if rect.isEmpty():
            self.set_zoom(1.0, QPointF(0, 0))
            return
        margin = 40.0 + 0.02 * max(rect.width(), rect.height())
        self.fitInView(rect.adjusted(-margin, -margin, margin, margin), Qt.AspectRatioMode.KeepAspectRatio)
        if self.scale_factor() > 1.0:
            self.set_zoom(1.0, rect.center())
        elif self.scale_factor() < MIN_SCALE:
            self.set_zoom(MIN_SCALE, rect.center())

    def reveal(self, node_id: str) -> None:
        """Centre the node at a zoom where its title reads (zooming in when further out)."""
        self.center_on_node(node_id)
        item = self._canvas.item(node_id)
        if item is not None and self.scale_factor() < READABLE_SCALE:
            self.set_zoom(READABLE_SCALE, item.scene_rect().center())

    def center_on_node(self, node_id: str) -> None:
        """Centre the node; when it belongs to a conversation folded into its block, that
        conversation becomes the focus."""
        item = self._canvas.item(node_id)
        if item is None:
            return
        root = self._canvas.conversation_of(node_id)
        if self._canvas.focus() is not None and root is not None and root != self._canvas.focus():
            self._canvas.set_focus(root)
        self.centerOn(item.scene_rect().center())

    # ------------------------------------------------------------------ input

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta().y() or event.angleDelta().x()
        if delta:
            self.zoom_by(1.0015 ** delta, event.position().toPoint())
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        step = PAN_STEP * (5 if event.modifiers() & Qt.KeyboardModifier.ShiftModifier else 1)
        pans = {Qt.Key.Key_Left: (step, 0), Qt.Key.Key_Right: (-step, 0),
                Qt.Key.Key_Up: (0, step), Qt.Key.Key_Down: (0, -step)}
        if key in pans:
            self.pan_by(*pans[key])
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_by(1.25)
        elif key in (Qt.Key.Key_Minus, Qt.Key.Key_Underscore):
            self.zoom_by(0.8)
        elif key in (Qt.Key.Key_0, Qt.Key.Key_F):
            self.fit_readable()
        elif key in (Qt.Key.Key_E, Qt.Key.Key_Escape):
            self.fit_all()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        button = event.button()
        point = self.mapToScene(event.position().toPoint())
        root = self._canvas.conversation_blocks().block_at(point, self.scale_factor())
        if button == Qt.MouseButton.LeftButton and root is not None:  # a conversation's block: open it
            self.fit_conversation(root)
            event.accept()
            return
        on_node = self._canvas.node_at(point) is not None
        modifiers = event.modifiers()
        select_mod = modifiers & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.ControlModifier)
        left = button == Qt.MouseButton.LeftButton
        if button == Qt.MouseButton.MiddleButton or (left and not on_node and not select_mod):
            self._pan_from = event.position().toPoint()
            self._pan_moved = 0
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        if button == Qt.MouseButton.LeftButton and not on_node:
            self._rubber = True
            self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            pos = event.position().toPoint()
            delta = pos - self._pan_from
            self._pan_from = pos
            self._pan_moved += abs(delta.x()) + abs(delta.y())
            self.pan_by(delta.x(), delta.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            if self._pan_moved < 3 and event.button() == Qt.MouseButton.LeftButton:
                self._canvas.clearSelection()  # a click on empty canvas
            self._pan_from = None
            self.viewport().unsetCursor()
            event.accept()
            return
        super().mouseReleaseEvent(event)
        if self._rubber:
            self._rubber = False
            self.setDragMode(QGraphicsView.DragMode.NoDrag)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        point = self.mapToScene(event.position().toPoint())
        node = self._canvas.node_at(point)
        if node is not None:
            self.center_on_node(node.node_id)
        else:
            self.centerOn(point)
        event.accept()

    # ------------------------------------------------------------------ painting

    def paintEvent(self, event: QPaintEvent) -> None:
        if not self.overview_active():
            super().paintEvent(event)
            return
        painter = QPainter(self.viewport())
        painter.setClipRegion(event.region())
        painter.fillRect(event.rect(), self._canvas.backgroundBrush())
        painter.setTransform(self.viewportTransform())
        self._canvas.paint_overview(painter, self.scale_factor())
        if self._rubber and not self.rubberBandRect().isEmpty():
            painter.resetTransform()
            pen = QPen(self._canvas.canvas_style.accent, 1.0)
            painter.setPen(pen)
            fill = QColor(self._canvas.canvas_style.accent)
            fill.setAlpha(40)
            painter.setBrush(fill)
            painter.drawRect(self.rubberBandRect())
        painter.end()
