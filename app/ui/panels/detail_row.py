"""The Context tab's Detail row: how much of the branch a turn's context carries, changed by hand.

The parts of the selected block are offered in a list: a summary block's lines (one ref
``turns:a-b`` each: "Summary of turns a-b"), a conversation block's turns (one ref per message,
named by the start of its line). "More detail" shows the part one level finer (brief → standard →
detailed → the turns themselves), "Less detail" one level coarser (a turn shown in full goes back
into the summary). Another branch of the session can be brought in beside the turn's own, and
taken out again. A choice is emitted as a ``DetailAction`` (``requested``); the window asks the
engine (``Engine.detail``), which recompiles the context within the same budget and records it
with the turn, so "Answer again" answers with it. A muted line says what is set on the context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from app.core.context.compiler import HEADERS
from app.core.pipeline.detail import HIDDEN, RAW, Detail, DetailAction
from app.core.pipeline.summary_items import offer_from_record, shown_levels
from app.core.types import BlockType, ContextBlock
from app.ui.panels.widgets import set_role, short_id

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

#: How a part is shown, in the words of the "You set" line and the status bar.
LEVEL_WORDS = {RAW: "shown in full", "detailed": "summarized in detail", "standard": "summarized at standard length",
               "brief": "summarized briefly", HIDDEN: "left out"}
#: The same, short, after a part's name in the list.
LEVEL_TAGS = {RAW: "in full", "detailed": "detailed", "standard": "standard", "brief": "brief", HIDDEN: "left out"}
HINT = "Recompiled within the same budget; Answer again answers with it."
NO_PARTS = "Select a summary or “This branch so far” block above to change its detail."
LABEL_CHARS = 56

#: A branch offered to bring in: (the node to focus, its name).
Branch = tuple[str, str]


@dataclass(frozen=True)
class Part:
    """One part of a block whose detail can change: a summary part (``span``) or a raw turn."""

    label: str
    span: str = ""
    message_id: str = ""

    @property
    def key(self) -> str:
        return self.span or self.message_id

    def action(self, kind: Literal["expand", "collapse"]) -> DetailAction:
        """The expand / collapse action on this part."""
        if self.span:
            return DetailAction(kind=kind, span=self.span)
        return DetailAction(kind=kind, message_id=self.message_id)


def shown_of(record: TurnRecord) -> dict[str, str]:
    """Span → the level each summary part of the record's context is shown at."""
    b = record.build
    refs = [r for block in b.context.blocks for r in block.refs]
    return shown_levels(Detail.model_validate(b.detail), refs, offer_from_record(b.summaries))


def block_parts(block: ContextBlock, shown: Mapping[str, str]) -> list[Part]:
    """The parts of ``block`` (none for a block that is neither summary nor conversation)."""
    if block.block_type == BlockType.SUMMARY:
        spans = [r.selector.removeprefix("turns:") for r in block.refs if r.selector.startswith("turns:")]
        return [Part(_summary_label(span, shown.get(span)), span=span) for span in spans]
    if block.block_type != BlockType.CONVERSATION:
        return []
    lines = block.content.split("\n")
    if lines and lines[0] == HEADERS[BlockType.CONVERSATION]:
        lines = lines[1:]
    named = len(lines) == len(block.refs)
    return [Part(_elide(lines[n]) if named else f"Turn {short_id(ref.evidence_id)}", message_id=ref.evidence_id)
            for n, ref in enumerate(block.refs) if ref.evidence_id]


def summary_spans(record: TurnRecord) -> set[str]:
    """The spans of the summary lines the record's context shows."""
    refs = [r.selector for b in record.build.context.blocks for r in b.refs]
    return {s.removeprefix("turns:") for s in refs if s.startswith("turns:")}


def unseen(record: TurnRecord) -> dict[str, str]:
    """Span → level of the summary parts the user set that no line of the context shows: left
    out, or summarized at a level too long for what the budget left."""
    spans: dict[str, str] = record.build.detail.get("spans") or {}
    lines = summary_spans(record)
    return {span: level for span, level in spans.items() if level != RAW and span not in lines}


def unseen_parts(record: TurnRecord) -> list[Part]:
    """The parts of ``unseen``, offered whichever block is selected (no block has them)."""
    return [Part(_summary_label(span, level, fits=level == HIDDEN), span=span) for span, level in unseen(record).items()]


def detail_said(detail: Mapping[str, Any], label: Callable[[str], str],
                missing: Mapping[str, str] | None = None) -> str:
    """What the user set on a context, in one line ("You set: turns 0-31 shown in full; …");
    ``missing``: the parts that did not fit (``unseen``)."""
    said = [f"turns {span} {LEVEL_WORDS.get(level, level)}" + (" (did not fit the budget)" if
            span in (missing or {}) and level != HIDDEN else "") for span, level in (detail.get("spans") or {}).items()]
    if detail.get("through") is not None:
        said.append(f"turns up to {detail['through']} folded into the summary")
    if detail.get("focus"):
        said.append(f"the branch “{label(detail['focus']) or short_id(detail['focus'])}” brought in")
    return "You set: " + "; ".join(said) + "." if said else "Nothing set: the context is as it was built."


def _summary_label(span: str, level: str | None, *, fits: bool = True) -> str:
    tag = LEVEL_TAGS.get(level or "")
    tag = tag if fits or not tag else f"{tag}, did not fit the budget"
    return f"Summary of turns {span}" + (f" ({tag})" if tag else "")


def _elide(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= LABEL_CHARS else line[:LABEL_CHARS - 1].rstrip() + "…"


class DetailRow(QWidget):
    """The parts list with More / Less detail, what is set, and the branch to bring in."""

    requested = Signal(object)  # a DetailAction on the shown turn

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.parts = QComboBox()
        self.parts.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.parts.setMinimumContentsLength(18)
        self.parts.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.parts.setToolTip("The parts of the selected block")
        self.more = QPushButton("More detail")
        self.more.setToolTip("Show this part one level finer: brief → standard → detailed → the turns themselves.")
        self.less = QPushButton("Less detail")
        self.less.setToolTip("Show this part one level coarser; a turn shown in full goes back into the summary.")
        self.said = set_role(QLabel(), "muted")
        self.said.setWordWrap(True)
        self.hint = set_role(QLabel(HINT), "muted")
        self.hint.setWordWrap(True)
        self.branches = QComboBox()
        self.branches.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.branches.setMinimumContentsLength(14)
        self.branches.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.bring = QPushButton("Bring in")
        self.bring.setToolTip("Make the chosen branch a second subject of this context, beside the turn's own.")
        self.take_out = QPushButton("Take out")
        self.take_out.setToolTip("Leave the branch brought in out of this context again.")
        self.branch_label = QLabel("Bring in another branch:")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(4)
        parts_row, branch_row = QHBoxLayout(), QHBoxLayout()
        for w in (self.parts, self.more, self.less):
            parts_row.addWidget(w)
        for w in (self.branches, self.bring, self.take_out):
            branch_row.addWidget(w)
        column.addLayout(parts_row)
        column.addWidget(self.said)
        column.addWidget(self.hint)
        column.addWidget(self.branch_label)
        column.addLayout(branch_row)
        self._parts: list[Part] = []
        self._levels: dict[str, str] = {}  # part key → the level it is shown at (a turn: in full)
        self.parts.currentIndexChanged.connect(self._on_part)
        self.more.clicked.connect(lambda: self._emit_part("expand"))
        self.less.clicked.connect(lambda: self._emit_part("collapse"))
        self.bring.clicked.connect(self._emit_bring)
        self.take_out.clicked.connect(lambda: self.requested.emit(DetailAction(kind="focus", node_id=None)))
        self.show_parts([], {})
        self.show_context({}, [], lambda _node: "")

    # ------------------------------------------------------------------ filling

    def show_parts(self, parts: list[Part], shown: Mapping[str, str]) -> None:
        """Offer ``parts`` (the selected block's, and the left-out ones); keep the chosen one if it is still there."""
        keep = self.current_key()
        self._parts = parts
        self._levels = {p.key: RAW if p.message_id else shown.get(p.span, "") for p in parts}
        self.parts.blockSignals(True)
        self.parts.clear()
        for part in parts:
            self.parts.addItem(part.label, part.key)
        if not parts:
            self.parts.addItem(NO_PARTS)
        at = self.parts.findData(keep) if keep else -1
        self.parts.setCurrentIndex(max(0, at))
        self.parts.blockSignals(False)
        self.parts.setEnabled(bool(parts))
        self._on_part()

    def show_context(self, detail: Mapping[str, Any], branches: list[Branch], label: Callable[[str], str],
                     missing: Mapping[str, str] | None = None) -> None:
        """Say what is set (``detail``: ``BuildRecord.detail``; ``missing``: ``unseen``) and offer
        ``branches`` to bring in."""
        self.said.setText(detail_said(detail, label, missing))
        self.branches.clear()
        for node_id, name in branches:
            self.branches.addItem(name, node_id)
        if not branches:
            self.branches.addItem("No other branch in this session")
        self.branches.setEnabled(bool(branches))
        self.bring.setEnabled(bool(branches))
        self.take_out.setVisible(bool(detail.get("focus")))

    def current_key(self) -> str:
        """The chosen part's span or message id ("" when none)."""
        data = self.parts.currentData()
        return data if isinstance(data, str) else ""

    def select(self, key: str) -> bool:
        """Choose the part with this span or message id; False when the list has none."""
        at = self.parts.findData(key)
        if at >= 0:
            self.parts.setCurrentIndex(at)
        return at >= 0

    # ------------------------------------------------------------------ actions

    def _current(self) -> Part | None:
        at = self.parts.currentIndex()
        return self._parts[at] if self._parts and 0 <= at < len(self._parts) else None

    def _on_part(self, _index: int = -1) -> None:
        part = self._current()
        level = self._levels.get(part.key, "") if part is not None else ""
        self.more.setEnabled(part is not None and level != RAW)
        self.less.setEnabled(part is not None and level != HIDDEN)

    def _emit_part(self, kind: Literal["expand", "collapse"]) -> None:
        part = self._current()
        if part is not None:
            self.requested.emit(part.action(kind))

    def _emit_bring(self) -> None:
        node_id = self.branches.currentData()
        if isinstance(node_id, str) and node_id:
            self.requested.emit(DetailAction(kind="focus", node_id=node_id))
