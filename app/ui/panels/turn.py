"""The Turn panel: a turn's input, its answer with live citations, and the context lines it saw.

``[n]`` markers in the answer link to the evidence they stand for (see
:mod:`app.ui.panels.citations`); hovering a marker, a cited-evidence row or a context line emits
``evidence_hovered`` with the evidence ids (``[]`` when the mouse leaves) so the canvas can
highlight the turns that hold that evidence. ``set_streaming_text`` shows an answer still arriving.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QUrl, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.ui import theme
from app.ui.panels.citations import Citation, citation_map, context_lines, evidence_texts, split_citations
from app.ui.panels.plain import MODE_WORDS, TASK_WORDS
from app.ui.panels.widgets import IDS_ROLE, HoverTracker, empty_label, section_label, set_role, short_id

if TYPE_CHECKING:
    from app.core.pipeline.record import TurnRecord

EMPTY_HINT = "Select a turn on the canvas to see its input, its answer and the evidence it cites."


def finish_line(record: TurnRecord, answer: str) -> str:
    """How the answer ended, in one line; an interrupted or failed one says why and what was kept."""
    finish = record.finish_reason or "no answer recorded"
    tokens = record.usage.get("completion_tokens")
    line = f"finish: {finish}" + (f" · {tokens} tokens" if tokens is not None else "")
    if finish in ("interrupted", "error"):
        why = " ".join(str(record.usage.get("error") or "").split())
        kept = f"the {len(answer)} characters above are what had streamed" if answer else "no answer text was kept"
        line = f"{finish}: {why or 'no reason recorded'}; {kept}"
    if record.usage.get("off_machine"):
        line += f" · answered off the machine by {record.usage.get('provider', '?')}"
    return line


class TurnPanel(QWidget):
    """Shows one turn's input and answer; citations and context lines report the evidence hovered."""

    evidence_hovered = Signal(list)
    continue_requested = Signal(str)  # node id of a turn whose answer was cut at its length limit
    edit_requested = Signal(str, str)  # the input's text, the node it continued ("" for a new branch)
    version_requested = Signal(str)  # node id of another version of the turn shown, to show instead
    regenerate_requested = Signal(str)  # node id of the turn shown: answer its input again (a new version)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._record: TurnRecord | None = None
        self._citations: dict[int, Citation] = {}
        self._texts: dict[str, str] = {}  # evidence id → its context line, for the cited list
        self._known: set[str] = set()  # every evidence id the turn shows or numbers
        self._answer = ""
        self._streaming = False
        self._links: dict[str, list[str]] = {}
        self._last_hover: list[str] = []
        self.label_of: Callable[[str], str] | None = None  # a node's label, to name the anchor (the window's)

        self.stack = QStackedWidget()
        self.empty = empty_label(EMPTY_HINT)
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.input = QLabel()
        self.input.setTextFormat(Qt.TextFormat.PlainText)  # the user's words, never markup
        self.input.setWordWrap(True)
        self.input.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.answer = QTextBrowser()
        self.answer.setOpenLinks(False)
        self.answer.setOpenExternalLinks(False)
        self.answer.setMouseTracking(True)
        self.answer.setPlaceholderText("No answer yet.")
        self.status = set_role(QLabel(), "muted")
        self.cited = QListWidget()
        self.cited.setWordWrap(True)
        self.lines = QListWidget()
        self.lines.setFont(theme.monospace_font())
        self.lines.setWordWrap(True)
        self.cited_hover = HoverTracker(self.cited)
        self.lines_hover = HoverTracker(self.lines)

        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        self.continue_button = QPushButton("Continue the answer")
        self.continue_button.setToolTip("The answer reached its length limit: ask for the rest (a new turn on this one)")
        self.continue_button.clicked.connect(
            lambda: self._record is not None and self.continue_requested.emit(self._record.node_id or ""))
        self._versions: list[str] = []
        self._version_at = 0
        self.older = QPushButton("‹")
        self.newer = QPushButton("›")
        self.older.setToolTip("The previous version of this answer")
        self.newer.setToolTip("The next version of this answer")
        self.version_label = QLabel()
        self.again_button = QPushButton("Answer again")
        self.again_button.setToolTip("Answer this input again as a new version of the turn; ‹ › flips between versions")
        for button in (self.older, self.newer):
            button.setFixedWidth(button.fontMetrics().horizontalAdvance("›") + 24)
        self.older.clicked.connect(lambda: self._flip(-1))
        self.newer.clicked.connect(lambda: self._flip(1))
        self.again_button.clicked.connect(
            lambda: self._record is not None and bool(self._record.node_id)
            and self.regenerate_requested.emit(self._record.node_id or ""))
        versions_row = QWidget()
        row = QHBoxLayout(versions_row)
        row.setContentsMargins(0, 0, 0, 0)
        for widget in (self.older, self.version_label, self.newer):
            row.addWidget(widget)
        row.addStretch(1)
        row.addWidget(self.again_button)
        self.edit_button = QPushButton("Edit and send again")
        self.edit_button.setToolTip("Put this input back in the composer, on the same branch, to change and resend it")
        self.edit_button.clicked.connect(
            lambda: self._record is not None and self.edit_requested.emit(
                self._record.build.text, self._record.build.anchor_node or ""))
        for widget in (self.header, section_label("Input"), self.input, self.edit_button, section_label("Answer"),
                       versions_row, self.answer, self.status, self.continue_button):
            top_layout.addWidget(widget)
        bottom = QWidget()
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(0, 0, 0, 0)
        bottom_layout.addWidget(section_label("Cited evidence"))
        bottom_layout.addWidget(self.cited, 1)
        bottom_layout.addWidget(section_label("Context sent (hover a line to find its evidence on the canvas)"))
        bottom_layout.addWidget(self.lines, 3)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        self.stack.addWidget(self.empty)
        self.stack.addWidget(split)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.stack)

        self.set_versions([], "")
        self.answer.highlighted.connect(self._on_link_highlighted)
        self.answer.viewport().installEventFilter(self)
        self.cited_hover.hovered.connect(self._set_hovered)
        self.lines_hover.hovered.connect(self._set_hovered)

    # ------------------------------------------------------------------ public API

    @property
    def record(self) -> TurnRecord | None:
        """The turn shown, or None."""
        return self._record

    def streaming_text(self) -> str | None:
        """The answer text shown while it streams, or None when no answer is streaming."""
        return self._answer if self._streaming else None

    def citations(self) -> dict[int, Citation]:
        """``[n]`` → the evidence it stands for, for the turn shown."""
        return dict(self._citations)

    def show_record(self, record: TurnRecord | None) -> None:
        """Show ``record`` (None: the empty state). A record of the turn being streamed that has no
        output yet keeps the streamed text."""
        keep_stream = (record is not None and self._record is not None and self._streaming
                       and record.turn_id == self._record.turn_id and not record.output)
        self._record = record
        self._set_hovered([])
        if record is None:
            self.continue_button.setVisible(False)
            self._citations, self._texts, self._known = {}, {}, set()
            self._answer, self._streaming = "", False
            self.stack.setCurrentWidget(self.empty)
            return
        self.stack.setCurrentIndex(1)
        self._citations = citation_map(record)
        self._texts = evidence_texts(record)
        self._known = {c.evidence_id for c in self._citations.values()}
        self._known.update(r.evidence_id for b in record.build.context.blocks for r in b.refs)
        if not keep_stream:
            self._answer, self._streaming = record.output, False
        b = record.build
        label = self.label_of(b.anchor_node) if self.label_of is not None and b.anchor_node else ""
        anchor = ("starts a new branch" if b.anchor_node is None else
                  f"continues «{html.escape(label[:40])}»" if label else f"continues {short_id(b.anchor_node)}")
        kind = TASK_WORDS.get(str(b.intent.get("task_type")), "")
        self.header.setText(
            f"<b>Turn {short_id(record.turn_id)}</b> · {b.at[:19].replace('T', ' ')} · {anchor} · "
            f"{MODE_WORDS.get(str(b.intent.get('mode')), 'an input')}{f', {kind}' if kind else ''}"
        )
        self.input.setText(b.text)
        self._fill_lines(record)
        self._render_answer()
        self.continue_button.setVisible(record.finish_reason == "length" and bool(record.node_id))

    def set_versions(self, node_ids: list[str], current: str) -> None:
        """The versions of the turn shown, oldest first, and which one it is: "‹ 2 of 3 ›"."""
        self._versions = list(node_ids)
        self._version_at = self._versions.index(current) if current in self._versions else 0
        several = len(self._versions) > 1
        for widget in (self.older, self.newer, self.version_label):
            widget.setVisible(several)
        self.version_label.setText(f"Version {self._version_at + 1} of {len(self._versions)}" if several else "")
        self.older.setEnabled(several and self._version_at > 0)
        self.newer.setEnabled(several and self._version_at < len(self._versions) - 1)

    def _flip(self, step: int) -> None:
        at = self._version_at + step
        if 0 <= at < len(self._versions):
            self.version_requested.emit(self._versions[at])

    def set_streaming_text(self, text: str, turn_id: str | None = None) -> None:
        """Show ``text`` as the answer still arriving (ignored when ``turn_id`` names another turn)."""
        if turn_id is not None and (self._record is None or self._record.turn_id != turn_id):
            return
        if self._record is None:
            self.stack.setCurrentIndex(1)
        self._answer, self._streaming = text, True
        self._render_answer()

    # ------------------------------------------------------------------ rendering

    def _render_answer(self) -> None:
        colors = theme.colors_for()
        self._links = {}
        parts: list[str] = []
        for piece in split_citations(self._answer, self._known):
            if piece.ids:
                href = f"ev:{piece.ids[0]}"
                self._links[href] = list(piece.ids)
                parts.append(f'<a href="{href}" title="{piece.ids[0]}">{html.escape(piece.text)}</a>')
            elif piece.numbers:
                grouped = len(piece.numbers) > 1  # "[1, 2]": one link per number inside the brackets
                links = [self._cite_link(n, colors.error, colors.warn, bare=grouped) for n in piece.numbers]
                parts.append("[" + ", ".join(links) + "]" if grouped else links[0])
            else:
                parts.append(html.escape(piece.text))
        self.answer.setHtml(f'<div style="white-space: pre-wrap;">{"".join(parts)}</div>')
        if self._streaming:
            self.status.setText(f"Streaming… {len(self._answer)} characters so far")
            bar = self.answer.verticalScrollBar()
            bar.setValue(bar.maximum())
        elif self._record is not None:
            self.status.setText(finish_line(self._record, self._answer))
        self._fill_cited()

    def _cite_link(self, number: int, error: str, warn: str, *, bare: bool = False) -> str:
        """One number as a link to its evidence (or flagged when it stands for nothing); ``bare``
        leaves out the brackets (the number is part of a group)."""
        shown = str(number) if bare else f"[{number}]"
        citation = self._citations.get(number)
        if citation is None:
            return f'<span style="color:{error}" title="no evidence [{number}] in this turn\'s context">{shown}</span>'
        href = f"cite:{number}"
        self._links[href] = [citation.evidence_id]
        title = citation.evidence_id + ("" if citation.in_prompt else f" ({citation.note})")
        if citation.where:  # a document's part: the citation names the page or section
            shown = f"{shown[:-1]} · {citation.where}]" if shown.endswith("]") else f"{shown} · {citation.where}"
            title = f"{citation.where} — {title}"
        style = "" if citation.in_prompt else f' style="color:{warn}"'
        return f'<a href="{href}" title="{html.escape(title)}"{style}>{html.escape(shown)}</a>'

    def _fill_cited(self) -> None:
        self.cited.clear()
        if self._record is None:
            return
        texts = self._texts
        colors = theme.colors_for()
        seen: set[int] = set()
        for piece in split_citations(self._answer):
            for n in piece.numbers:
                if n in seen:
                    continue
                seen.add(n)
                citation = self._citations.get(n)
                if citation is None:
                    item = QListWidgetItem(f"[{n}] — no such evidence number in this turn's context")
                    item.setForeground(QColor(colors.error))
                else:
                    text = texts.get(citation.evidence_id, "")
                    tail = "" if citation.in_prompt else f" — {citation.note}"
                    where = f"{citation.where} · " if citation.where else ""
                    item = QListWidgetItem(f"[{n}] {where}{short_id(citation.evidence_id)}  {text}{tail}")
                    item.setData(IDS_ROLE, [citation.evidence_id])
                    item.setToolTip(citation.evidence_id)
                    if not citation.in_prompt:
                        item.setForeground(QColor(colors.warn))
                self.cited.addItem(item)
        if not seen:
            item = QListWidgetItem("The answer cites no evidence." if not self._streaming else "No citation yet.")
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.cited.addItem(item)

    def _fill_lines(self, record: TurnRecord) -> None:
        self.lines.clear()
        bold = QFont(self.lines.font())
        bold.setBold(True)
        block = -1
        for line in context_lines(record):
            if line.block_index != block and block >= 0:  # a blank line between blocks, as in the prompt
                spacer = QListWidgetItem("")
                spacer.setFlags(Qt.ItemFlag.NoItemFlags)
                self.lines.addItem(spacer)
            block = line.block_index
            item = QListWidgetItem(line.text)
            if line.header:
                item.setFont(bold)
                item.setForeground(theme.segment_color(line.block_type))
            if line.evidence_ids:
                item.setData(IDS_ROLE, list(line.evidence_ids))
                item.setToolTip("evidence: " + ", ".join(line.evidence_ids))
            self.lines.addItem(item)
        if self.lines.count() == 0:
            self.lines.addItem("(the compiled context is empty)")

    # ------------------------------------------------------------------ hover

    def _on_link_highlighted(self, url: QUrl) -> None:
        self._set_hovered(list(self._links.get(url.toString(), [])))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.answer.viewport() and event.type() == QEvent.Type.Leave:
            self._set_hovered([])
        return super().eventFilter(watched, event)

    def _set_hovered(self, ids: list[str]) -> None:
        if ids != self._last_hover:
            self._last_hover = ids
            self.evidence_hovered.emit(ids)
