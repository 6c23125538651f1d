"""The Context tab: the budget by segment, the compiled blocks in prompt order, what was dropped,
and the exact prompt messages sent to the model.

Built from ``BuildRecord.context`` (``CompiledContext``) and ``BuildRecord.prompt``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QSizePolicy, QWidget

from app.core.context.compiler import SEGMENT_ORDER
from app.core.pipeline.record import TurnRecord
from app.ui import theme
from app.ui.panels.widgets import (
    IDS_ROLE,
    HoverTracker,
    RawJsonWidget,
    ScrollTab,
    SortableItem,
    fill_table,
    fit_height,
    make_table,
    section_label,
    set_role,
    short_id,
)


@dataclass(frozen=True, slots=True)
class SegmentBar:
    """One segment of the budget bar: tokens planned (quota) and tokens used."""

    name: str
    quota: int
    used: int


def prompt_text(prompt: list[dict[str, str]]) -> str:
    """The prompt messages one after another, each under a ``── role ──`` line, contents verbatim."""
    return "\n\n".join(f"── {m.get('role', '?')} ──\n{m.get('content', '')}" for m in prompt)


class BudgetBarWidget(QWidget):
    """Two stacked horizontal bars on one scale: tokens planned per segment and tokens used,
    with the context budget marked and a legend (segments over their quota are flagged)."""

    ROW_H = 18

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.segments: list[SegmentBar] = []
        self.budget = 0
        self.tokens = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(self.sizeHint().height())

    def set_usage(self, segments: list[SegmentBar], budget: int, tokens: int) -> None:
        """Show ``segments`` against ``budget`` (``tokens`` = the whole context as counted)."""
        self.segments, self.budget, self.tokens = segments, budget, tokens
        self._fit_height()
        lines = [f"{s.name}: {s.used} used of {s.quota} planned" for s in segments]
        self.setToolTip(f"context {tokens} / {budget} tokens\n" + "\n".join(lines))
        self.update()

    def scale(self) -> int:
        """Tokens the full width stands for: the largest of budget, total planned and total used."""
        return max(1, self.budget, sum(s.quota for s in self.segments), sum(s.used for s in self.segments))

    def sizeHint(self) -> QSize:
        return QSize(420, 3 * self.ROW_H + 40)

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        colors = theme.colors_for()
        text_color = self.palette().color(QPalette.ColorRole.Text)
        fm = painter.fontMetrics()
        label_w = max(fm.horizontalAdvance("planned"), fm.horizontalAdvance("used")) + 10
        left, width = float(label_w), max(10.0, float(self.width() - label_w - 6))
        per_token = width / self.scale()
        for row, (title, attr) in enumerate((("planned", "quota"), ("used", "used"))):
            top = 4.0 + row * (self.ROW_H + 6)
            painter.setPen(text_color)
            painter.drawText(QRectF(0, top, label_w, self.ROW_H), int(Qt.AlignmentFlag.AlignVCenter), title)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(colors.track))
            painter.drawRect(QRectF(left, top, width, self.ROW_H))
            x = left
            for seg in self.segments:
                w = getattr(seg, attr) * per_token
                if w <= 0:
                    continue
                painter.setBrush(theme.segment_color(seg.name))
                painter.drawRect(QRectF(x, top, w, self.ROW_H))
                if w > fm.horizontalAdvance(seg.name) + 6:
                    painter.setPen(QColor("#ffffff"))
                    painter.drawText(QRectF(x, top, w, self.ROW_H), int(Qt.AlignmentFlag.AlignCenter), seg.name)
                    painter.setPen(Qt.PenStyle.NoPen)
                x += w
        if self.budget > 0:  # the budget line across both bars
            bx = left + self.budget * per_token
            painter.setPen(QPen(text_color, 2, Qt.PenStyle.DashLine))
            painter.drawLine(int(bx), 1, int(bx), int(4 + 2 * self.ROW_H + 8))
        first = 4.0 + 2 * (self.ROW_H + 6) + 4
        for seg, (x, row) in zip(self.segments, self.legend_places(fm), strict=True):
            text, top = f"{seg.name} {seg.used}/{seg.quota}", first + row * self.ROW_H
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.segment_color(seg.name))
            painter.drawRect(QRectF(x, top + 4, 10, 10))
            painter.setPen(QColor(colors.warn) if seg.used > seg.quota else text_color)
            painter.drawText(QRectF(x + 14, top, fm.horizontalAdvance(text) + 4, self.ROW_H),
                             int(Qt.AlignmentFlag.AlignVCenter), text)
        painter.end()

    def legend_places(self, fm: Any) -> list[tuple[float, int]]:
        """(x, row) of each segment's legend entry: as many per row as the width holds."""
        places, x, row = [], 0.0, 0
        for seg in self.segments:
            width = fm.horizontalAdvance(f"{seg.name} {seg.used}/{seg.quota}") + 26
            if x > 0 and x + width - 8 > self.width():
                x, row = 0.0, row + 1
            places.append((x, row))
            x += width
        return places

    def _fit_height(self) -> None:
        rows = 1 + max((row for _, row in self.legend_places(self.fontMetrics())), default=0)
        self.setMinimumHeight(int(4 + 2 * (self.ROW_H + 6) + 4 + rows * self.ROW_H + 6))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_height()


class ContextTabWidget(ScrollTab):
    """Shows what the model was given: budget use, blocks, dropped items and the exact prompt."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = self.column
        self.budget_bar = BudgetBarWidget()
        self.blocks = make_table(["#", "Type", "Priority", "Tokens", "Refs", "Content"])
        self.block_view = QPlainTextEdit()
        self.block_view.setReadOnly(True)
        self.block_view.setFont(theme.monospace_font())
        self.block_view.setMaximumHeight(150)
        self.block_view.setPlaceholderText("Select a block to read it in full.")
        self.dropped = make_table(["Item", "Segment", "Tokens", "Reason"], sortable=True)
        self.no_dropped = set_role(QLabel("Nothing was dropped: every candidate line fit the budget."), "muted")
        self.prompt = QPlainTextEdit()
        self.prompt.setReadOnly(True)
        self.prompt.setFont(theme.monospace_font())
        self.prompt.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.prompt.setMinimumHeight(260)
        self.raw = RawJsonWidget("Raw compiled context JSON")
        self.block_hover = HoverTracker(self.blocks)
        self.dropped_hover = HoverTracker(self.dropped)
        for widget in (
            self.summary, section_label("Budget by segment (tokens)"), self.budget_bar,
            section_label("Blocks in prompt order"), self.blocks, self.block_view,
            section_label("Dropped"), self.no_dropped, self.dropped,
            section_label("Exact prompt sent"), self.prompt, self.raw,
        ):
            layout.addWidget(widget)
        layout.addStretch(1)
        self.blocks.currentCellChanged.connect(self._on_block_selected)
        self._record: TurnRecord | None = None

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill every section from ``record`` (clear them for None)."""
        self._record = record
        if record is None:
            self.summary.setText("")
            self.budget_bar.set_usage([], 0, 0)
            self.blocks.setRowCount(0)
            self.dropped.setRowCount(0)
            self.block_view.setPlainText("")
            self.prompt.setPlainText("")
            self.raw.set_data({})
            return
        ctx = record.build.context
        over = ctx.tokens > ctx.budget
        colors = theme.colors_for()
        style = f" style='color:{colors.error}'" if over else ""
        self.summary.setText(
            f"<b{style}>{ctx.tokens}</b> of {ctx.budget} tokens "
            f"(counted by “{ctx.counter}”), {len(ctx.blocks)} blocks, {len(ctx.dropped)} items dropped; "
            f"the turn asked for {record.build.budget}."
        )
        order = [s.value for s in SEGMENT_ORDER] + [s for s in ctx.segments if s not in {x.value for x in SEGMENT_ORDER}]
        bars = [SegmentBar(name, ctx.segments[name].quota, ctx.segments[name].used) for name in order if name in ctx.segments]
        self.budget_bar.set_usage(bars, ctx.budget, ctx.tokens)
        rows = []
        for n, block in enumerate(ctx.blocks, start=1):
            kind = block.block_type.value
            type_item = SortableItem(kind)
            type_item.setData(Qt.ItemDataRole.DecorationRole, theme.segment_color(kind))
            refs = [r.evidence_id for r in block.refs]
            refs_item = SortableItem(", ".join(short_id(r) for r in refs) or "—", len(refs))
            refs_item.setToolTip("\n".join(refs))
            refs_item.setData(IDS_ROLE, refs)
            first = block.content.split("\n")
            content = SortableItem(" ⏎ ".join(first[:3]) + (" …" if len(first) > 3 else ""))
            content.setToolTip(block.content)
            rows.append([SortableItem(str(n), n), type_item, block.priority.value,
                         SortableItem(str(block.token_estimate), block.token_estimate), refs_item, content])
        fill_table(self.blocks, rows)
        fit_height(self.blocks, 14)
        if ctx.blocks:
            self.blocks.setCurrentCell(0, 0)
        dropped_rows = []
        for d in ctx.dropped:
            item = SortableItem(short_id(d.item_id), d.item_id)
            item.setToolTip(d.item_id)
            item.setData(IDS_ROLE, [d.item_id])
            dropped_rows.append([item, d.segment, SortableItem(str(d.tokens), d.tokens), d.reason])
        fill_table(self.dropped, dropped_rows)
        fit_height(self.dropped, 10)
        self.dropped.setVisible(bool(ctx.dropped))
        self.no_dropped.setVisible(not ctx.dropped)
        self.prompt.setPlainText(prompt_text(record.build.prompt))
        self.raw.set_data(ctx.model_dump(mode="json"))

    def _on_block_selected(self, row: int, _column: int, _prev_row: int, _prev_column: int) -> None:
        if self._record is None or not 0 <= row < len(self._record.build.context.blocks):
            self.block_view.setPlainText("")
            return
        block = self._record.build.context.blocks[row]
        refs = ", ".join(r.evidence_id for r in block.refs) or "none"
        self.block_view.setPlainText(
            f"{block.block_id} · {block.block_type.value} · {block.priority.value} · {block.token_estimate} tokens\n"
            f"refs: {refs}\n\n{block.content}"
        )
