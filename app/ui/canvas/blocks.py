"""Conversation blocks: a conversation drawn as one labelled block (semantic zoom, issue 33).

Below ``BLOCK_SCALE`` every conversation is its block, and so is each conversation other than the
focused one while the view focuses one (Fit): a plate over the conversation's cards, dimmed when
it is not the focus, naming its title, its topics, how many turns it holds and what is running in
it. The labels are drawn at a fixed size on screen, so they read at every zoom. Above that scale
and in focus, the block paints nothing and lets clicks through to the cards.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from app.core.types import NodeKind
from app.ui.canvas.style import BLOCK_SCALE, CanvasStyle

PAD = 18.0  # the block reaches this far beyond its conversation's cells
FOLDED_OPACITY = 0.55


@dataclass(frozen=True)
class BlockText:
    """What a block says: its title, its topics, its size and what is running in it."""

    title: str
    topics: str
    turns: int
    running: str = ""

    def lines(self) -> list[str]:
        count = f"{self.turns} turn" + ("" if self.turns == 1 else "s")
        return [self.title, self.topics, f"{count} · {self.running}" if self.running else count]


class ConversationBlockItem(QGraphicsItem):
    """One conversation's block; the scene sets its box, text and whether it is folded."""

    def __init__(self, root: str, style: CanvasStyle) -> None:
        super().__init__()
        self.root = root
        self._style = style
        self._rect = QRectF()
        self.text = BlockText("", "", 0)
        self.folded = False  # another conversation has the focus: shown as a block at every zoom
        self.setZValue(5.0)  # over the cards it stands for
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)  # the scene decides (``block_at``)

    def set_box(self, rect: QRectF) -> None:
        """The conversation's cells (the block adds its padding)."""
        padded = rect.adjusted(-PAD, -PAD, PAD, PAD)
        if padded != self._rect:
            self.prepareGeometryChange()
            self._rect = padded

    def set_text(self, text: BlockText) -> None:
        if text != self.text:
            self.text = text
            self.update()

    def set_folded(self, folded: bool) -> None:
        if folded != self.folded:
            self.folded = folded
            self.setOpacity(FOLDED_OPACITY if folded else 1.0)
            self.update()

    def shows_at(self, scale: float) -> bool:
        """Whether the block stands in for its conversation at ``scale``."""
        return self.folded or scale < BLOCK_SCALE

    def box(self) -> QRectF:
        return QRectF(self._rect)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self._rect

    def paint(self, painter: QPainter, _option: QStyleOptionGraphicsItem | None, _widget: QWidget | None = None) -> None:
        scale = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        if not self.shows_at(scale):
            return
        s = self._style
        painter.setPen(s.border[NodeKind.TURN])
        painter.setBrush(s.block_brush)
        painter.drawRoundedRect(self._rect, 14.0, 14.0)
        self._paint_labels(painter)

    def _paint_labels(self, painter: QPainter) -> None:
        """The block's lines at a fixed size on screen, clipped to the block."""
        s = self._style
        transform = painter.transform()
        screen = transform.mapRect(self._rect).adjusted(8, 6, -8, -6)
        if screen.width() < 24 or screen.height() < 14:
            return
        painter.save()
        painter.resetTransform()
        painter.setClipRect(screen)
        y = screen.top()
        for i, line in enumerate(self.text.lines()):
            if not line:
                continue
            font, metrics = (s.font_label, s.metrics_label) if i == 0 else (s.font_body, s.metrics_body)
            if y + metrics.height() > screen.bottom() + 2:
                break
            painter.setFont(font)
            painter.setPen(s.text_pen if i == 0 else s.muted_pen)
            text = metrics.elidedText(line, Qt.TextElideMode.ElideRight, screen.width())
            painter.drawText(QPointF(screen.left(), y + metrics.ascent()), text)
            y += metrics.height() + 2
        painter.restore()

    def apply_style(self, style: CanvasStyle) -> None:
        self._style = style
        self.update()
