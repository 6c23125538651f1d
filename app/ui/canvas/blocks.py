"""Conversation blocks: a conversation drawn as one labelled block (semantic zoom, issue 33).

Below ``BLOCK_SCALE`` every conversation is its block, and so is each conversation other than the
focused one while the view focuses one (Fit): a plate over the conversation's cards, dimmed when
it is not the focus, naming its title, how many turns it holds, what is running in it and its
topics. The labels are drawn at a fixed size on screen at the top of the part of the block in
view, so they read at every zoom. Above that scale and in focus, the block paints nothing and lets
clicks through to the cards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsItem, QStyleOptionGraphicsItem, QWidget

from app.core.types import NodeKind
from app.ui.canvas.style import BLOCK_SCALE, CanvasStyle

PAD = 24.0  # the block reaches this far beyond its conversation's cells (over the channels' edges)
TITLE_MIN = 120.0  # screen pixels of title kept beside the turn count before the count gives way


@dataclass(frozen=True)
class BlockText:
    """What a block says: its title, its topics, its size and what is running in it."""

    title: str
    topics: str
    turns: int
    running: str = ""

    def status(self) -> str:
        """How many turns, and what is running."""
        count = f"{self.turns} turn" + ("" if self.turns == 1 else "s")
        return f"{count} · {self.running}" if self.running else count


class ConversationBlockItem(QGraphicsItem):
    """One conversation's block; the scene sets its box, text and whether it is folded."""

    def __init__(self, root: str, style: CanvasStyle) -> None:
        super().__init__()
        self.root = root
        self._style = style
        self._rect = QRectF()
        self._text = BlockText("", "", 0)
        self._source: Callable[[], BlockText] | None = None  # makes the text when it is next needed
        self.folded = False  # another conversation has the focus: shown as a block at every zoom
        self.setZValue(5.0)  # over the cards it stands for
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)  # the view decides (``ConversationBlocks.block_at``)

    def set_box(self, rect: QRectF) -> None:
        """The conversation's cells (the block adds its padding)."""
        padded = rect.adjusted(-PAD, -PAD, PAD, PAD)
        if padded != self._rect:
            self.prepareGeometryChange()
            self._rect = padded

    def set_text_source(self, source: Callable[[], BlockText]) -> None:
        """What the block says is to be made again (by ``source``, when it is next drawn)."""
        self._source = source
        self.update()

    @property
    def text(self) -> BlockText:
        if self._source is not None:
            self._text, self._source = self._source(), None
        return self._text

    def set_folded(self, folded: bool) -> None:
        if folded != self.folded:
            self.folded = folded
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
        painter.setBrush(s.folded_brush if self.folded else s.block_brush)  # opaque: no card or line shows through
        painter.drawRoundedRect(self._rect, 14.0, 14.0)
        self._paint_labels(painter)

    def _paint_labels(self, painter: QPainter) -> None:
        """The title with the turn count, then the topics: a fixed size on screen, at the top
        left of the part of the block in view."""
        s = self._style
        transform = painter.transform()
        screen = transform.mapRect(self._rect).intersected(QRectF(painter.viewport())).adjusted(10, 6, -10, -4)
        if screen.width() < 24 or screen.height() < s.metrics_label.height():
            return
        painter.save()
        painter.resetTransform()
        painter.setClipRect(screen)
        title, status = self._title_and_status(screen.width())
        at = QPointF(screen.left(), screen.top() + s.metrics_label.ascent())
        painter.setFont(s.font_label)
        painter.setPen(s.muted_pen if self.folded else s.text_pen)
        painter.drawText(at, title)
        if status:
            painter.setFont(s.font_body)
            painter.setPen(s.muted_pen)
            painter.drawText(at + QPointF(s.metrics_label.horizontalAdvance(title) + 10, 0), status)
        y = screen.top() + s.metrics_label.height() + 2
        if self.text.topics and y + s.metrics_body.height() <= screen.bottom() + 2:
            topics = s.metrics_body.elidedText(self.text.topics, Qt.TextElideMode.ElideRight, screen.width())
            painter.drawText(QPointF(screen.left(), y + s.metrics_body.ascent()), topics)
        painter.restore()

    def _title_and_status(self, width: float) -> tuple[str, str]:
        """The title and the turn count as they fit ``width`` pixels: both whole when they fit;
        else the title elided beside the count while it keeps a readable part (``TITLE_MIN``
        pixels, or all of it); else the title alone over the whole width (a narrow block at Fit
        shows its name, not "P…" and a count)."""
        s = self._style
        status = self.text.status()
        beside = width - s.metrics_body.horizontalAdvance(status) - 10
        whole = s.metrics_label.horizontalAdvance(self.text.title)
        if whole <= beside or beside >= min(whole, TITLE_MIN):
            return s.metrics_label.elidedText(self.text.title, Qt.TextElideMode.ElideRight, beside), status
        return s.metrics_label.elidedText(self.text.title, Qt.TextElideMode.ElideRight, width), ""

    def apply_style(self, style: CanvasStyle) -> None:
        self._style = style
        self.update()
