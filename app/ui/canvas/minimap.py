"""The minimap: the whole canvas, small, in the canvas's bottom-right corner.

It shows once part of the content lies outside the view (a large session kept at a readable
zoom): every node and edge drawn with the scene's batched overview, and the part the view shows
as a frame. A click or a drag on it centres the view there. It repaints on the next frame after
the scene or the view changes (coalesced), never per item.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen, QTransform
from PySide6.QtWidgets import QGraphicsView, QWidget

from app.ui.canvas.scene import CanvasScene

SIZE = (220, 150)
MARGIN = 10


class Minimap(QWidget):
    """A small map of the whole canvas over ``view``'s corner (see the module doc)."""

    def __init__(self, view: QGraphicsView, canvas: CanvasScene) -> None:
        super().__init__(view.viewport())
        self.view, self.canvas = view, canvas
        self.setFixedSize(*SIZE)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip("The whole canvas: click or drag to move the view there")
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(100)
        self._content = QRectF()  # the content's box, measured once per refresh
        self._timer.timeout.connect(self.refresh)
        # Bound methods, not lambdas: Qt drops these connections when the minimap goes.
        canvas.changed.connect(self.schedule)
        for bar in (view.horizontalScrollBar(), view.verticalScrollBar()):
            bar.valueChanged.connect(self.schedule)
        self.hide()

    def schedule(self, *_args: object) -> None:
        """Refresh on the next frame (calls coalesce)."""
        self._timer.start()

    def visible_rect(self) -> QRectF:
        """The scene rectangle the view shows."""
        return self.view.mapToScene(self.view.viewport().rect()).boundingRect()

    def needed(self) -> bool:
        """Whether some of the content lies outside the view (as of the last refresh)."""
        return not self._content.isEmpty() and not self.visible_rect().contains(self._content)

    def refresh(self) -> None:
        """Show (in the corner) or hide it as needed, and repaint."""
        self._content = self.canvas.content_rect()
        port = self.view.viewport()
        self.move(port.width() - self.width() - MARGIN, port.height() - self.height() - MARGIN)
        self.setVisible(self.needed())
        if self.isVisible():
            self.raise_()
            self.update()

    def _transform(self) -> QTransform:
        """Scene → minimap: the content and the view's frame, fitted with a small border."""
        rect = self._content.united(self.visible_rect())
        pad = 8.0
        scale = min((self.width() - 2 * pad) / max(rect.width(), 1.0), (self.height() - 2 * pad) / max(rect.height(), 1.0))
        dx = pad + (self.width() - 2 * pad - rect.width() * scale) / 2 - rect.left() * scale
        dy = pad + (self.height() - 2 * pad - rect.height() * scale) / 2 - rect.top() * scale
        return QTransform(scale, 0, 0, scale, dx, dy)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        style = self.canvas.canvas_style
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        back = QColor(style.background.color())
        back.setAlpha(235)
        painter.setBrush(back)
        painter.setPen(QPen(style.accent, 1.0))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        transform = self._transform()
        painter.setTransform(transform)
        self.canvas.paint_overview(painter, transform.m11(), labels=False)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(style.accent, 2.0 / max(transform.m11(), 1e-9)))
        painter.drawRect(self.visible_rect())
        painter.end()

    def _centre_at(self, pos: QPointF) -> None:
        inverse, ok = self._transform().inverted()
        if ok:
            self.view.centerOn(inverse.map(pos))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        self._centre_at(event.position())
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if event.buttons() & Qt.MouseButton.LeftButton:
            self._centre_at(event.position())
        event.accept()
