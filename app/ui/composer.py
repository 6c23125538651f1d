"""Where input is typed, and where the routing of the last input is shown.

``ComposerWidget`` is the text box with a per-turn budget, an anchor chip, a paperclip button
("Attach file…", the File menu's action: ``attach_actions``), Send, and Stop beside it while any
answer streams or waits (Ctrl+. too; it says "Stopping…" at once, before the answers end). Until
the models are ready it keeps what is typed and says why Send is off. The anchor chip ("pending
input") can be dragged onto a canvas node to choose where the next input goes (the engine then
takes that node as the user's override), or cleared to let routing decide.

``RoutingBanner`` shows, for the latest input, the turn it continues and why in words (the one
or two features that weighed most: "close in meaning and recent"), with the runner-up candidates'
scores, or that it starts a new branch; the router's own reason is the tooltip. When routing was
ambiguous it offers the choice inline (one button per branch, and "New branch"), which
re-anchors the turn.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QMimeData, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QDrag,
    QIcon,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

PENDING_MIME = "application/x-pcm-pending-input"
STOP, STOPPING = "Stop", "Stopping…"


def paperclip_icon(color: QColor | str = "#6b7785", size: int = 32) -> QIcon:
    """A paperclip drawn with lines and arcs (no emoji font needed), for "Attach file…"."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    k = size / 32
    path = QPainterPath(QPointF(20 * k, 10 * k))  # the inner wire, then round the bottom, up and over the top
    path.lineTo(20 * k, 22 * k)
    path.arcTo(12 * k, 18 * k, 8 * k, 8 * k, 0, -180)
    path.lineTo(12 * k, 7 * k)
    path.arcTo(12 * k, 2 * k, 12 * k, 10 * k, 180, -180)
    path.lineTo(24 * k, 24 * k)
    path.arcTo(8 * k, 17 * k, 16 * k, 14 * k, 0, -180)
    path.lineTo(8 * k, 12 * k)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(QPen(QColor(color), 2.4 * k, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    painter.drawPath(path)
    painter.end()
    return QIcon(pixmap)


class _InputEdit(QPlainTextEdit):
    """Enter sends, Shift+Enter breaks the line."""

    send_requested = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (event.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.send_requested.emit()
            return
        super().keyPressEvent(event)


class PendingChip(QLabel):
    """The next input's anchor; drag it onto a canvas node to choose where the input goes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._press: QPoint | None = None
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self.setToolTip("Drag onto a node on the canvas to continue that branch with your next input")
        self.setObjectName("pendingChip")

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = event.position().toPoint()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if self._press is None or (event.position().toPoint() - self._press).manhattanLength() < 6:
            return
        self._press = None
        drag = QDrag(self)
        mime = QMimeData()
        mime.setData(PENDING_MIME, b"pending-input")
        drag.setMimeData(mime)
        drag.setPixmap(self.grab())
        drag.exec(Qt.DropAction.LinkAction)


class ComposerWidget(QWidget):
    """Input box, per-turn budget, anchor chip, the paperclip, Send and Stop."""

    submitted = Signal(str, object, int)  # (text, anchor node id or None, budget)
    stop_requested = Signal()  # Stop was clicked: stop every answer streaming or waiting
    attach_requested = Signal()  # the paperclip was clicked (the window runs File › Attach file…)

    def __init__(self, default_budget: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.anchor: str | None = None
        self.edit = _InputEdit(self)
        self.edit.setPlaceholderText("Type your input — Enter sends, Shift+Enter for a new line")
        self.edit.setMaximumHeight(96)
        self.edit.send_requested.connect(self._on_send)
        self.chip = PendingChip(self)
        self.clear_anchor = QToolButton(self)
        self.clear_anchor.setText("×")
        self.clear_anchor.setToolTip("Let routing choose the anchor")
        self.clear_anchor.clicked.connect(lambda: self.set_anchor(None, ""))
        self.budget = QSpinBox(self)
        self.budget.setRange(128, 32768)
        self.budget.setSingleStep(128)
        self.budget.setValue(default_budget)
        self.budget.setSuffix(" tok")
        self.budget.setToolTip("Context budget for this input (tokens)")
        self.attach = QToolButton(self)
        self.attach.setObjectName("attachButton")
        self.attach.setText("Attach file…")
        self.attach.setIcon(paperclip_icon(self.palette().color(QPalette.ColorRole.ButtonText)))
        self.attach.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.attach.setToolTip("Attach a text file to this session (Ctrl+Shift+A): it is kept as evidence the "
                               "answers can use, and shown on the canvas")
        self.attach.clicked.connect(self.attach_requested)
        self.send = QPushButton("Send", self)
        self.send.setDefault(True)
        self.send.clicked.connect(self._on_send)
        self.stop = QPushButton(STOP, self)
        self.stop.setObjectName("stopButton")
        self.stop.setToolTip("Stop every answer that is streaming or waiting (Ctrl+.)")
        self.stop.clicked.connect(self.stop_requested)
        self.stop.setVisible(False)
        self.reason = QLabel(self)
        self.reason.setObjectName("composerReason")
        self.reason.setWordWrap(True)
        # Why an input was not sent: stays until dismissed or the next send, with a fix to offer.
        self.notice = QLabel(self)
        self.notice.setObjectName("composerNotice")
        self.notice.setWordWrap(True)
        self.notice.setTextFormat(Qt.TextFormat.PlainText)
        self.notice_fix = QPushButton(self)
        self.notice_close = QToolButton(self)
        self.notice_close.setText("×")
        self.notice_close.setToolTip("Dismiss")
        self.notice_close.clicked.connect(self.hide_notice)
        self._fix: Callable[[], None] | None = None
        self.notice_fix.clicked.connect(self._apply_fix)
        notice_row = QHBoxLayout()
        notice_row.addWidget(self.notice, 1)
        notice_row.addWidget(self.notice_fix)
        notice_row.addWidget(self.notice_close)

        row = QHBoxLayout()
        row.addWidget(self.chip)
        row.addWidget(self.clear_anchor)
        row.addStretch(1)
        row.addWidget(self.attach)
        row.addWidget(QLabel("Budget", self))
        row.addWidget(self.budget)
        row.addWidget(self.send)
        row.addWidget(self.stop)
        box = QVBoxLayout(self)
        box.setContentsMargins(6, 4, 6, 6)
        box.addLayout(notice_row)
        box.addWidget(self.edit)
        box.addLayout(row)
        box.addWidget(self.reason)
        self.hide_notice()
        self.set_anchor(None, "")
        self.set_ready(False, "Loading models…")

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        attach = getattr(self, "attach", None)  # not yet there while __init__ runs
        if event.type() == QEvent.Type.PaletteChange and attach is not None:  # the theme changed: so does the clip
            attach.setIcon(paperclip_icon(self.palette().color(QPalette.ColorRole.ButtonText)))
        super().changeEvent(event)

    def set_ready(self, ready: bool, reason: str) -> None:
        """Enable Send, or disable it and say why (typing stays possible)."""
        self.send.setEnabled(ready)
        self.reason.setText("" if ready else reason)
        self.reason.setVisible(not ready)

    def set_busy(self, busy: bool) -> None:
        """Show Stop while any answer streams or waits; hide it (and end "Stopping…") when none does."""
        self.stop.setVisible(busy)
        if not busy:
            self.stop.setText(STOP)
            self.stop.setEnabled(True)

    def set_stopping(self) -> None:
        """Acknowledge a stop at once: Stop reads "Stopping…" until the answers have ended."""
        self.stop.setText(STOPPING)
        self.stop.setEnabled(False)

    def set_anchor(self, node_id: str | None, label: str) -> None:
        """Pin the next input to ``node_id`` (None: routing decides)."""
        self.anchor = node_id
        if node_id is None:
            self.chip.setText("⇢ next input: routed automatically (drag me onto a node)")
        else:
            self.chip.setText(f"⇢ next input continues: «{label[:40]}»")
        self.clear_anchor.setVisible(node_id is not None)

    def show_notice(self, text: str, fix_label: str = "", fix: Callable[[], None] | None = None) -> None:
        """Say ``text`` above the box until dismissed (or the next send); ``fix`` is offered as a button."""
        self.notice.setText(text)
        self._fix = fix
        self.notice_fix.setText(fix_label)
        for widget in (self.notice, self.notice_close):
            widget.setVisible(True)
        self.notice_fix.setVisible(fix is not None)

    def hide_notice(self) -> None:
        self._fix = None
        for widget in (self.notice, self.notice_fix, self.notice_close):
            widget.setVisible(False)

    def _apply_fix(self) -> None:
        fix = self._fix
        self.hide_notice()
        if fix is not None:
            fix()

    def restore(self, text: str) -> None:
        """Put an input that was not sent back into the box (before anything typed since)."""
        typed = self.edit.toPlainText().strip()
        self.edit.setPlainText(text + ("\n\n" + typed if typed else ""))
        self.edit.setFocus()

    def _on_send(self) -> None:
        text = self.edit.toPlainText().strip()
        if not text or not self.send.isEnabled():
            return
        self.hide_notice()
        self.submitted.emit(text, self.anchor, self.budget.value())
        self.edit.clear()
        self.set_anchor(None, "")


#: What each routing feature means for the user, when it weighed most in a choice.
_FEATURE_WORDS = {"sem": "close in meaning", "task": "the same task", "recency": "recent",
                  "focus": "where you were working", "address": "you named its author",
                  "reply": "it was waiting for your answer", "author": "your own latest turn",
                  "override": "where you put such inputs before"}


def _why(components: dict[str, float]) -> str:
    """The one or two features that weighed most in a routing choice, in words ("" for none)."""
    top = sorted(((v, k) for k, v in components.items() if v > 0 and k in _FEATURE_WORDS), reverse=True)[:2]
    return " and ".join(_FEATURE_WORDS[k] for _, k in top)


class RoutingBanner(QFrame):
    """The anchor of the latest input with the runner-ups' scores; an inline choice when ambiguous."""

    choice_made = Signal(str, object)  # (turn_id, chosen node id or None for a new branch)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("routingBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.turn_id: str | None = None
        self.summary = QLabel(self)
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.choices = QHBoxLayout()
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 4, 8, 4)
        box.addWidget(self.summary)
        box.addLayout(self.choices)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.hide()

    def show_routing(self, turn_id: str, routing: dict[str, Any], labels: dict[str, str], *,
                     version: bool = False) -> None:
        """Show where ``turn_id`` went: chosen anchor, runner-ups with scores, a choice if ambiguous
        (``version``: the turn answers an earlier input again, where that turn is)."""
        self.turn_id = turn_id
        while self.choices.count():
            item = self.choices.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        cands = sorted(routing.get("candidates", []), key=lambda c: -float(c.get("score", 0.0)))
        anchor = routing.get("anchor_id")

        def name(node_id: str | None) -> str:  # a turn by its text (escaped: it is the user's)
            return "a new branch" if node_id is None else f"«{html.escape(labels.get(node_id, node_id[:8])[:32])}»"

        others = [c for c in cands if c["node_id"] != anchor][:3]
        chosen = next((c for c in cands if c["node_id"] == anchor), None)
        runner = ", ".join(f"{name(c['node_id'])} {c['score']:.2f}" for c in others)
        if chosen is not None:
            why = _why(chosen.get("components") or {})
            head = f"<b>Continues {name(anchor)}</b>" + (f" — {why}" if why else "") + f" (score {chosen['score']:.2f}"
            text = head + (f"; next: {runner})" if runner else ")")
        else:  # a new branch: nothing earlier came close enough
            text = "<b>Starts a new branch</b> — no earlier turn was close enough" + (
                f" (closest: {runner})" if runner else "")
        if routing.get("override"):
            text = f"<b>Continues {name(routing['override'])}</b> — your choice"
        if version:
            after = routing.get("override")
            text = "<b>Answering again</b> — a new version of this turn" + (f", continuing {name(after)}" if after else "")
        self.summary.setToolTip(routing.get("reason", ""))  # the router's own figures, for the curious
        if routing.get("ambiguous"):
            asked = routing.get("clarification") or ""  # names the two rivals by id
            rivals = sorted((c["node_id"] for c in cands if c["node_id"] and c["node_id"] in asked), key=asked.index)
            ask = (f"does this continue {name(rivals[0])} or {name(rivals[1])}, or start something new?"
                   if len(rivals) == 2 else "which branch does this continue?")
            text += f"<br><b>Not sure:</b> {ask}"
            for cand in [c for c in cands if c["node_id"]][:3]:
                button = QPushButton(f"{name(cand['node_id'])} {cand['score']:.2f}", self)
                button.clicked.connect(lambda _=False, n=cand["node_id"]: self._choose(n))
                self.choices.addWidget(button)
            new = QPushButton("New branch", self)
            new.clicked.connect(lambda: self._choose(None))
            self.choices.addWidget(new)
            self.choices.addStretch(1)
        self.summary.setText(text)
        self.show()

    def _choose(self, node_id: str | None) -> None:
        if self.turn_id is not None:
            self.choice_made.emit(self.turn_id, node_id)
        while self.choices.count():
            item = self.choices.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
