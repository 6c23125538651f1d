"""``NodeItem``: one graphics item per graph node (edges are in ``edges``).

Node kinds differ by shape, colour and glyph (turn = rounded card, task = double-bordered
hexagon, env = pill, memory = ellipse, artifact = document). A turn card shows its title (the
input's key words, ``set_card_text``), a preview (its input and the start of its answer) and
badges; the whole input and answer are in its tooltip. ``NodeItem.paint`` chooses the detail from
the painter's scale (semantic zoom, ``style``): the full card at reading zoom, the shape with its
title alone at middle zoom (a font large enough to read at that zoom), nothing below, where the
conversation's block stands. Text is wrapped and elided once per size, never per paint.
"""

from __future__ import annotations

import textwrap
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFontMetricsF, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsRectItem, QStyleOptionGraphicsItem, QWidget

from app.core.types import GraphNode, NodeKind
from app.ui.canvas.shapes import geometry, node_size
from app.ui.canvas.style import (
    BLOCK_SCALE,
    BODY_LINE,
    BODY_MAX_LINES,
    LOD_FULL,
    PORT_Y,
    SHAPE_NAMES,
    TURN_HEADER,
    CanvasStyle,
    node_kind,
    title_size,
)
from app.ui.canvas.text import sample_length

_ELIDE = Qt.TextElideMode.ElideRight
_CENTER = Qt.AlignmentFlag.AlignCenter
_NO_PEN = QPen(Qt.PenStyle.NoPen)
_NODE_FLAGS = QGraphicsItem.GraphicsItemFlag.ItemIsSelectable | QGraphicsItem.GraphicsItemFlag.ItemIsMovable
def wrap_text(text: str, style: CanvasStyle, width: float, max_lines: int) -> tuple[list[str], bool]:
    """Wrap ``text`` in the body font to ``width``; at most ``max_lines`` lines, the last one
    ending with an ellipsis when the text goes on. Returns (lines, truncated)."""
    return style.wrap_body.wrap(text, width, max_lines)


class NodeItem(QGraphicsRectItem):
    """Draws one graph node; the scene keeps it in step with the graph record.

    A ``QGraphicsRectItem`` underneath only so that Qt computes the bounding box in C++: the
    scene's index asks for it thousands of times when many cards change at once."""

    def __init__(self, node: GraphNode, style: CanvasStyle) -> None:
        super().__init__()
        self.setPen(_NO_PEN)
        self.node = node
        self.node_id = node.node_id
        self.kind = node_kind(node.kind)
        self.shape_name = SHAPE_NAMES[self.kind]
        self._style = style
        self.status = ""
        self.steer = ""  # a task card: what its steering did (paused, amended and where, steps done)
        self.off_machine = False  # the answer came from a provider off this machine
        self.body = ""
        self.streaming = False
        self.highlighted = False
        self.collapsed_count = 0
        self.pile_count = 0  # satellites lying under this one on its card's strip
        self.summary = ""  # collapsed: what the hidden subtree says, shown instead of the body
        self._own_body = ""  # the node's own body meanwhile
        self.title = ""  # the card's title (key words of its input); "" shows the node's label
        self.full_text = ""  # the whole input, for the tooltip
        self.question = ""  # the input, shown muted above the answer in the preview
        self.covered = False  # under its conversation's block: nothing to paint
        self._body_lines: list[str] = []
        self._body_truncated = False
        self._label_lines: list[str] | None = None  # elided lazily
        self._titles: dict[int, list[tuple[QPointF, str]]] = {}  # title lines per font size
        self._text_at: dict[tuple[str, str], tuple[QPointF, str]] = {}
        w, h = node_size(self.kind)
        self._set_size(w, h)
        self.setFlags(_NODE_FLAGS)
        self.setZValue(1.0)
        self._read_attrs()
        self.setToolTip(self._tooltip())

    # ------------------------------------------------------------------ state

    @property
    def width(self) -> float:
        return self._rect.width()

    @property
    def height(self) -> float:
        return self._rect.height()

    def scene_rect(self) -> QRectF:
        """The node's box in scene coordinates (without the selection margin)."""
        return self._rect.translated(self.pos())

    def port_y(self) -> float:
        """Height (from the top) where horizontal edges meet this node; stable while it grows."""
        return PORT_Y if self.kind == NodeKind.TURN else self._rect.height() / 2

    def set_node(self, node: GraphNode) -> None:
        """Take a changed graph record (label, attrs)."""
        if node.label != self.node.label:
            self._label_lines, self._titles = None, {}
        self.node = node
        self._read_attrs()
        self.setToolTip(self._tooltip())
        self.update()

    def set_summary(self, text: str) -> None:
        """Show ``text`` (a collapsed subtree's summary) as the body, muted, and in the tooltip;
        "" shows the node's own body again."""
        if text == self.summary:
            return
        if not self.summary:
            self._own_body = self.body
        self.summary, self._body_truncated = text, False
        self._show_body(text or self._own_body, self.streaming)
        self.setToolTip(self._tooltip())

    def set_pile_count(self, count: int) -> None:
        """Show how many satellites lie under this one (a "+N" badge on its corner; 0 hides it)."""
        if count != self.pile_count:
            self.pile_count = count
            self.setToolTip(self._tooltip())
            self.update()

    def set_card_text(self, title: str, full_text: str = "", question: str = "") -> None:
        """The card's title, the whole input (tooltip) and the input shown in the preview."""
        if (title, full_text, question) == (self.title, self.full_text, self.question):
            return
        self.title, self.full_text, self.question = title, full_text, question
        self._label_lines, self._titles = None, {}
        self._body_truncated = False
        self._show_body(self.summary or self.body, self.streaming)
        self.setToolTip(self._tooltip())

    def heading(self) -> str:
        """What the card's title line says."""
        return self.title or self.node.label or self.kind.value

    def _tooltip(self) -> str:
        """The title, then what the card stands for in full: a collapsed node's summary, else
        its whole input and its answer."""
        parts = [self.heading()]
        paragraphs = [textwrap.fill(p, 90) for p in self.summary.split("\n") if p.strip()]
        if paragraphs:
            parts.append("\n".join(paragraphs))
        else:
            if self.full_text and self.full_text != parts[0]:
                parts.append(textwrap.fill(" ".join(self.full_text.split())[:1200], 90))
            if self.body:
                parts.append(textwrap.fill(" ".join(self.body.split())[:600], 90))
        if self.steer:
            parts.append(self.steer)
        if self.pile_count:
            more = "1 more lies" if self.pile_count == 1 else f"{self.pile_count} more lie"
            parts.append(f"{more} under this one: click +{self.pile_count} to bring the next up, or drag "
                         "this one aside.")
        return "\n\n".join(parts)

    def set_body(self, text: str, *, streaming: bool = False) -> None:
        """Show ``text`` (the answer) under the title, as many lines as the card holds; while a
        summary shows, it is kept for when the node is expanded."""
        if self.summary:
            self._own_body, self.streaming = text, streaming
            return
        self._show_body(text, streaming)
        if not streaming:  # the answer is whole: the tooltip has it (not redone per token batch)
            self.setToolTip(self._tooltip())

    def _show_body(self, text: str, streaming: bool) -> None:
        was_streaming, self.streaming = self.streaming, streaming
        if self._body_truncated and text.startswith(self.body[: sample_length(BODY_MAX_LINES)]):
            # the visible part is settled: a token batch appended past the ellipsis
            self.body = text
            if was_streaming != streaming:
                self.update()
            return
        self.body = text
        width = self._rect.width() - 20
        rows = BODY_MAX_LINES - (1 if self.summary else 0)  # the "+N" badge of a collapsed node gets a line
        question: list[str] = []
        if self.question and not self.summary and text:  # the input, one muted line, above the answer
            question, _ = wrap_text(self.question, self._style, width, 1)
        answer, self._body_truncated = wrap_text(text or self.question, self._style, width, rows - len(question))
        self._question_lines = len(question)
        self._body_lines = question + answer
        self.update()

    def set_status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self.update()

    def set_off_machine(self, on: bool) -> None:
        if on != self.off_machine:
            self.off_machine = on
            self.update()

    def set_highlighted(self, on: bool) -> None:
        if on != self.highlighted:
            self.highlighted = on
            self.update()

    def set_collapsed_count(self, count: int) -> None:
        """Show a "+N" badge (0 hides it)."""
        if count != self.collapsed_count:
            self.collapsed_count = count
            self.update()

    def body_lines(self) -> list[str]:
        return list(self._body_lines)

    def text(self) -> str:
        """Title, label, whole input and body, for filtering and search."""
        return f"{self.title}\n{self.node.label}\n{self.full_text}\n{self.body}"

    def _read_attrs(self) -> None:
        attrs: dict[str, Any] = self.node.attrs
        self.checkpoint = bool(attrs.get("checkpoint"))
        self.ambiguous = bool(attrs.get("ambiguous"))
        self.task_status = str(attrs.get("status", "")) if self.kind == NodeKind.TASK else ""
        if self.task_status and attrs.get("paused"):  # the user paused it (its status is "blocked")
            self.task_status = "paused"
        self.steer = str(attrs.get("steer", "")) if self.kind == NodeKind.TASK else ""
        try:
            self.progress = min(1.0, max(0.0, float(attrs.get("progress", 0.0) or 0.0)))
        except (TypeError, ValueError):
            self.progress = 0.0
        source = str(attrs.get("kind", "other")) if self.kind == NodeKind.ENV else self.kind.value
        self._glyph = self._style.glyphs.get(source, self._style.glyphs["other"])
        if not self.body:
            answer = attrs.get("answer") or attrs.get("body")
            if isinstance(answer, str) and answer:
                self.set_body(answer)

    def _set_size(self, w: float, h: float) -> None:
        g = geometry(self.kind, w, h)
        self._rect, self._bounds, self._outline, self._inner = g.rect, g.bounds, g.outline, g.inner
        self._glyph_at, self._label_x, self._label_width = g.glyph_at, g.label_x, g.label_width
        self._label_rect, self._dot_rect, self._badge_rect = g.label_rect, g.dot_rect, g.badge_rect
        self._progress_rect = g.progress_rect
        self.setRect(g.bounds)  # the bounding box (the pen is none)
        self._titles = {}
        self._text_at = {}
        self._pills: dict[str, tuple[QRectF, QPointF, str]] = {}
        self._question_lines = 0

    # ------------------------------------------------------------------ QGraphicsItem

    def shape(self) -> QPainterPath:
        if self.pile_count:  # the "+N" is clickable where it stands over the border too
            shape = QPainterPath(self._outline)
            shape.addRect(self.pile_badge_rect())
            return shape
        return self._outline

    def paint(self, painter: QPainter, _option: QStyleOptionGraphicsItem, _widget: QWidget | None = None) -> None:
        lod = QStyleOptionGraphicsItem.levelOfDetailFromTransform(painter.worldTransform())
        if lod < BLOCK_SCALE or self.covered:  # its conversation's block stands here
            return
        s, kind = self._style, self.kind
        painter.setPen(s.selected_pen if self.isSelected() else s.border[kind])
        painter.setBrush(s.fill[kind])
        painter.drawPath(self._outline)
        if self._inner is not None:
            painter.setPen(s.border[kind])
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(self._inner)
        if self.highlighted:
            painter.setPen(s.highlight_pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(self._bounds, 12, 12)
        if lod < LOD_FULL:
            self._paint_title_only(painter, title_size(lod))
        else:
            self._paint_full(painter)
        if self.pile_count:
            self._paint_pile_badge(painter)

    def title_pixels(self, scale: float) -> float:
        """How tall (screen px) the title is drawn at ``scale``; 0 where it is not drawn."""
        if scale < BLOCK_SCALE or self.covered:
            return 0.0
        return (self._style.font_label.pixelSize() if scale >= LOD_FULL else title_size(scale)) * scale

    # ------------------------------------------------------------------ painting helpers

    def _paint_title_only(self, painter: QPainter, size: int) -> None:
        s = self._style
        lines = self._titles.get(size)
        if lines is None:
            r = self._label_rect
            max_lines = max(1, int(r.height() // s.wrap_title[size].metrics.height()))
            placed = s.wrap_title[size].centred(self.heading(), r.left(), r.top(), r.width(), r.height(), min(3, max_lines))
            lines = self._titles[size] = [(QPointF(x, y), line) for x, y, line in placed]
        painter.setFont(s.title_fonts[size])
        painter.setPen(s.text_pen)
        for at, text in lines:
            painter.drawText(at, text)
        dot = self._status_dot()
        if dot is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(dot)
            painter.drawEllipse(self._dot_rect)

    def _status_dot(self) -> Any:
        s = self._style
        if self.ambiguous:
            return s.status_brush["ambiguous"]
        status = self.status or self.task_status
        return s.status_brush_for(status) if status else None

    def _paint_full(self, painter: QPainter) -> None:
        s = self._style
        kind = self.kind
        painter.setPen(s.glyph_pen[kind])
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.translate(self._glyph_at)
        painter.drawPath(self._glyph)
        painter.translate(-self._glyph_at)
        if self._label_lines is None:
            self._label_lines = self._elide_label()
        painter.setFont(s.font_label)
        painter.setPen(s.text_pen)
        top = 22.0 if kind == NodeKind.TURN else (self._rect.height() / 2 - 9 * (len(self._label_lines) - 1) + 5)
        if kind == NodeKind.TASK:
            top -= 6
        elif kind == NodeKind.ARTIFACT:
            top += 6  # under the page glyph in the top-left corner, not through it
        for i, line in enumerate(self._label_lines):
            painter.drawText(QPointF(self._label_x, top + 18 * i), line)
        if kind == NodeKind.TURN and self._body_lines:
            painter.setPen(s.border[kind])
            painter.drawLine(QPointF(10, TURN_HEADER - 4), QPointF(self._rect.width() - 10, TURN_HEADER - 4))
            painter.setFont(s.font_body)
            answer_pen = s.muted_pen if self.streaming or self.summary else s.text_pen
            for i, line in enumerate(self._body_lines):
                painter.setPen(s.muted_pen if i < self._question_lines else answer_pen)
                painter.drawText(QPointF(10, TURN_HEADER + 10 + BODY_LINE * i), line)
        if kind == NodeKind.TASK:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(s.progress_back)
            painter.drawRoundedRect(self._progress_rect, 3, 3)
            if self.progress > 0:
                done = QRectF(self._progress_rect)
                done.setWidth(done.width() * self.progress)
                painter.setBrush(s.status_brush_for(self.task_status or "active"))
                painter.drawRoundedRect(done, 3, 3)
        self._paint_badges(painter)

    def _elide_label(self) -> list[str]:
        label = self.heading()
        max_lines = 1 if self.kind == NodeKind.ENV else 2
        lines, _ = self._style.wrap_label.wrap(label, self._label_width, max_lines)
        return lines or [label]

    def _paint_badges(self, painter: QPainter) -> None:
        s = self._style
        status = self.status or self.task_status
        if self.ambiguous and not status:
            status = "ambiguous"
        painter.setFont(s.font_small)
        if status and self.kind in (NodeKind.TURN, NodeKind.TASK):
            pill, at, text = self._status_pill(status)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(s.status_brush_for(status))
            painter.drawRoundedRect(pill, 8, 8)
            painter.setPen(s.white_pen)
            painter.drawText(at, text)
        # ambiguity and checkpoint sit on the top border, left, clear of the label and status
        x = 12.0
        if self.ambiguous and status != "ambiguous":
            painter.setPen(s.background_pen)
            painter.setBrush(s.status_brush["ambiguous"])
            rect = QRectF(x, -8, 16, 16)
            painter.drawEllipse(rect)
            painter.setPen(s.white_pen)
            painter.drawText(*self._small_text("ambiguous", "?", rect))
            x += 20
        if self.off_machine:  # answered off this machine: an arrow leaving a round plate
            painter.setPen(s.background_pen)
            painter.setBrush(s.status_brush_for("off_machine"))
            rect = QRectF(x, -8, 16, 16)
            painter.drawEllipse(rect)
            painter.setPen(s.white_pen)
            painter.drawText(*self._small_text("off_machine", "↗", rect))
            x += 20
        if self.checkpoint:  # a small flag on a round plate
            painter.setPen(s.background_pen)
            painter.setBrush(s.solid[self.kind])
            painter.drawEllipse(QRectF(x, -8, 16, 16))
            painter.setPen(s.white_pen)
            painter.drawLine(QPointF(x + 5.5, -4), QPointF(x + 5.5, 4.5))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(s.white_brush)
            painter.drawRect(QRectF(x + 6, -4, 5.5, 4))
        if self.collapsed_count:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(s.solid[self.kind])
            painter.drawRoundedRect(self._badge_rect, 7, 7)
            painter.setPen(s.white_pen)
            painter.drawText(*self._small_text("collapsed", f"+{self.collapsed_count}", self._badge_rect))

    def pile_badge_rect(self) -> QRectF:
        """Where the "+N" of a pile's top is drawn (item coordinates)."""
        return QRectF(self._rect.width() - 26, -8, 30, 16)

    def _paint_pile_badge(self, painter: QPainter) -> None:
        """"+N" on the top-right corner, over the border, as on a stack of cards."""
        s = self._style
        rect = self.pile_badge_rect()
        painter.setFont(s.font_small)
        painter.setPen(s.background_pen)
        painter.setBrush(s.solid[self.kind])
        painter.drawRoundedRect(rect, 8, 8)
        painter.setPen(s.white_pen)
        painter.drawText(*self._small_text("pile", f"+{self.pile_count}", rect))

    def _status_pill(self, status: str) -> tuple[QRectF, QPointF, str]:
        """The badge box sized to ``status``, on the top border at the right (clear of the
        title), and its text position."""
        found = self._pills.get(status)
        if found is None:
            width = self._style.metrics_small.horizontalAdvance(status) + 14
            right = self._rect.width() - (34 if self.pile_count else 8)
            pill = QRectF(right - width, -8, width, 16)
            found = self._pills[status] = (pill, *_centered(self._style.metrics_small, status, pill))
        return found

    def _small_text(self, slot: str, text: str, rect: QRectF) -> tuple[QPointF, str]:
        """Where to draw a badge text (computed once per slot, text and size)."""
        key = (slot, text)
        found = self._text_at.get(key)
        if found is None:
            found = self._text_at[key] = _centered(self._style.metrics_small, text, rect)
        return found


def _centered(metrics: QFontMetricsF, text: str, rect: QRectF) -> tuple[QPointF, str]:
    """The baseline point that centres ``text`` (elided to ``rect``'s width) in ``rect``, and the
    elided text: the arguments of ``QPainter.drawText(QPointF, str)``, its fast path."""
    text = metrics.elidedText(text.replace("\n", " "), _ELIDE, rect.width())
    width = metrics.horizontalAdvance(text)
    return QPointF(rect.center().x() - width / 2, rect.center().y() + (metrics.ascent() - metrics.descent()) / 2), text
