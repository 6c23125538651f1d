"""The Context tab: the budget by segment, the compiled blocks in prompt order, what was dropped,
and the exact prompt messages sent to the model.

Built from ``BuildRecord.context`` (``CompiledContext``) and ``BuildRecord.prompt``. Under the
selected block, its Detail row (``detail_row``) changes how much of the branch the context
carries; the choice leaves as ``detail_requested(turn_id, DetailAction)``. When the same turn is
shown again (recompiled), the block of the same kind and the same part stay selected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QSizePolicy, QWidget

from app.core.context.compiler import SEGMENT_ORDER
from app.core.pipeline.detail import RAW
from app.core.types import BlockType
from app.ui import theme
from app.ui.panels.detail_row import Branch, DetailRow, block_parts, shown_of, unseen, unseen_parts
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

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord


@dataclass(frozen=True, slots=True)
class SegmentBar:
    """One segment of the budget bar: tokens planned (quota) and tokens used."""

    name: str
    quota: int
    used: int

    def legend(self) -> str:
        """The legend entry: "evidence 120/200"; a segment without a share of its own (the branch
        summary) shows what it took of what the others left: "summary 132 of leftover"."""
        return f"{self.name} {self.used}/{self.quota}" if self.quota else f"{self.name} {self.used} of leftover"

    def over(self) -> bool:
        """Used more than planned (it borrowed from what other segments left)."""
        return 0 < self.quota < self.used

    def line(self) -> str:
        """The tooltip line."""
        if self.quota:
            return f"{self.name}: {self.used} used of {self.quota} planned"
        return f"{self.name}: {self.used} used of what the other segments left (no share of its own)"


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
        lines = [s.line() for s in segments]
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
            text, top = seg.legend(), first + row * self.ROW_H
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(theme.segment_color(seg.name))
            painter.drawRect(QRectF(x, top + 4, 10, 10))
            painter.setPen(QColor(colors.warn) if seg.over() else text_color)
            painter.drawText(QRectF(x + 14, top, fm.horizontalAdvance(text) + 4, self.ROW_H),
                             int(Qt.AlignmentFlag.AlignVCenter), text)
        painter.end()

    def legend_places(self, fm: Any) -> list[tuple[float, int]]:
        """(x, row) of each segment's legend entry: as many per row as the width holds."""
        places, x, row = [], 0.0, 0
        for seg in self.segments:
            width = fm.horizontalAdvance(seg.legend()) + 26
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
    """Shows what the model was given: budget use, blocks, dropped items and the exact prompt.
    ``branch_lookup`` (the window's) names the session's other branches a record's context could
    bring in; ``label_lookup`` a node's label."""

    detail_requested = Signal(str, object)  # (turn_id, DetailAction)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.branch_lookup: Callable[[TurnRecord], list[Branch]] | None = None
        self.label_lookup: Callable[[str], str] | None = None
        layout = self.column
        self.budget_bar = BudgetBarWidget()
        self.blocks = make_table(["#", "Type", "Priority", "Tokens", "Refs", "Content"])
        self.block_view = QPlainTextEdit()
        self.block_view.setReadOnly(True)
        self.block_view.setFont(theme.monospace_font())
        self.block_view.setMaximumHeight(150)
        self.block_view.setPlaceholderText("Select a block to read it in full.")
        self.detail_title = section_label("Detail")
        self.detail = DetailRow()
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
            self.detail_title, self.detail,
            section_label("Dropped"), self.no_dropped, self.dropped,
            section_label("Exact prompt sent"), self.prompt, self.raw,
        ):
            layout.addWidget(widget)
        layout.addStretch(1)
        self.blocks.currentCellChanged.connect(self._on_block_selected)
        self.detail.requested.connect(self._on_detail_requested)
        self._record: TurnRecord | None = None
        self._shown: dict[str, str] = {}

    def show_record(self, record: TurnRecord | None) -> None:
        """Fill every section from ``record`` (clear them for None)."""
        previous = self._record
        again = previous is not None and record is not None and previous.turn_id == record.turn_id
        kept = (self._block_type(), self.detail.current_key()) if again else None
        self._record = record
        self._shown = shown_of(record) if record is not None else {}
        self.detail_title.setVisible(record is not None)
        self.detail.setVisible(record is not None)
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
        self.detail.show_context(record.build.detail, self.branch_lookup(record) if self.branch_lookup else [],
                                 self.label_lookup or (lambda _node: ""), unseen(record))
        self._select_block(kept)
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

    def _block_type(self) -> BlockType | None:
        """The kind of the selected block (None: none selected)."""
        row, record = self.blocks.currentRow(), self._record
        blocks = record.build.context.blocks if record is not None else []
        return blocks[row].block_type if 0 <= row < len(blocks) else None

    def _select_block(self, kept: tuple[BlockType | None, str] | None) -> None:
        """Select the first block, or (the same turn recompiled) the block of the kind selected
        before with the same part; a summary part now shown in full: the branch's turns."""
        blocks = self._record.build.context.blocks if self._record is not None else []
        kinds = [b.block_type for b in blocks]
        wanted = [kept[0]] if kept is not None and kept[0] is not None else []
        if kept is not None and self._shown.get(kept[1]) == RAW:  # its turns are in the branch's block now
            wanted = [BlockType.CONVERSATION]
        elif BlockType.SUMMARY in wanted:
            wanted.append(BlockType.CONVERSATION)
        row = next((kinds.index(k) for k in wanted if k in kinds), 0)
        if blocks:
            self.blocks.setCurrentCell(row, 0)
            self.blocks.scrollToItem(self.blocks.item(row, 0))
        self._on_block_selected(row if blocks else -1, 0, -1, -1)  # also when the current cell did not move
        if kept is not None:
            self.detail.select(kept[1])

    def _on_detail_requested(self, action: object) -> None:
        if self._record is not None:
            self.detail_requested.emit(self._record.turn_id, action)

    def _on_block_selected(self, row: int, _column: int, _prev_row: int, _prev_column: int) -> None:
        record = self._record
        hidden = unseen_parts(record) if record is not None else []  # in no block: offered with any
        if record is None or not 0 <= row < len(record.build.context.blocks):
            self.block_view.setPlainText("")
            self.detail.show_parts(hidden, self._shown)
            return
        block = record.build.context.blocks[row]
        self.detail.show_parts(block_parts(block, self._shown) + hidden, self._shown)
        refs = ", ".join(r.evidence_id for r in block.refs) or "none"
        self.block_view.setPlainText(
            f"{block.block_id} · {block.block_type.value} · {block.priority.value} · {block.token_estimate} tokens\n"
            f"refs: {refs}\n\n{block.content}"
        )
