"""Transient overlays of the canvas: anchor candidates with their scores, node context actions."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QStyleOptionGraphicsItem, QWidget

from app.core.types import NodeKind
from app.ui.canvas.edges import edge_path
from app.ui.canvas.items import NodeItem
from app.ui.canvas.style import CanvasStyle

ACTIONS = ("reply", "checkpoint", "restore", "focus", "inject", "collapse", "expand", "undo_reanchor", "regenerate",
           "pause_task", "resume_task", "amend_task", "cancel_task")
TASK_OPEN = ("pending", "active", "blocked", "paused")  # a task card's statuses that take steering
ACTION_TEXT = {
    "reply": "Reply from here (branch)",
    "checkpoint": "Mark as checkpoint",
    "restore": "Restore: new branch from this checkpoint",
    "focus": "Focus",
    "inject": "Inject selected nodes here",
    "collapse": "Collapse branch",
    "expand": "Expand branch",
    "undo_reanchor": "Undo re-anchoring",
    "regenerate": "Regenerate answer",
    "pause_task": "Pause task (keeps its work)",
    "resume_task": "Resume task",
    "amend_task": "Amend task…",
    "cancel_task": "Cancel task",
}
# A node offers "undo_reanchor" when one of these attributes is set (the engine records a re-anchor).
UNDO_REANCHOR_ATTRS = ("reanchored",)  # set by the engine while a re-anchor can be undone


def node_actions(item: NodeItem, *, others_selected: bool, has_children: bool, collapsed: bool) -> list[str]:
    """The context actions that make sense for a node in its current state, in menu order."""
    kind = item.kind
    actions: list[str] = []
    if kind in (NodeKind.TURN, NodeKind.TASK):
        actions.append("reply")
    if kind == NodeKind.TURN:
        actions.append("regenerate")
    if kind in (NodeKind.TURN, NodeKind.TASK):
        actions.append("checkpoint")
        if item.checkpoint:
            actions.append("restore")
    actions.append("focus")
    if others_selected and kind in (NodeKind.TURN, NodeKind.TASK):
        actions.append("inject")
    if collapsed:
        actions.append("expand")
    elif has_children:
        actions.append("collapse")
    if kind == NodeKind.TURN and any(item.node.attrs.get(key) for key in UNDO_REANCHOR_ATTRS):
        actions.append("undo_reanchor")
    if kind == NodeKind.TASK and item.task_status in TASK_OPEN:
        actions += ["resume_task" if item.task_status == "paused" else "pause_task", "amend_task", "cancel_task"]
    return actions


def action_text(action: str, item: NodeItem) -> str:
    if action == "checkpoint" and item.checkpoint:
        return "Remove checkpoint"
    return ACTION_TEXT.get(action, action)


class ScoreLabelItem(QGraphicsItem):
    """A small pill with a candidate's score; keeps its size on screen at every zoom."""

    def __init__(self, text: str, chosen: bool, style: CanvasStyle, parent: QGraphicsItem | None = None) -> None:
        super().__init__(parent)
        self.text = text
        self.chosen = chosen
        self._style = style
        width = style.metrics_small.horizontalAdvance(text) + 12
        self._rect = QRectF(-width / 2, -9, width, 18)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)

    def boundingRect(self) -> QRectF:
        return self._rect

    def paint(self, painter: QPainter, _option: QStyleOptionGraphicsItem, _widget: QWidget | None = None) -> None:
        s = self._style
        painter.setPen(s.chosen_pen if self.chosen else s.candidate_pen)
        painter.setBrush(s.background)
        painter.drawRoundedRect(self._rect, 8, 8)
        painter.setFont(s.font_small)
        painter.setPen(s.text_pen)
        painter.drawText(self._rect, Qt.AlignmentFlag.AlignCenter, self.text)


class CandidateItem(QGraphicsPathItem):
    """A dashed line from a node to one of its anchor candidates; ``label`` (a separate item, so it
    can sit above the cards while the line passes under them) shows the score."""

    def __init__(self, source: NodeItem, target: NodeItem, score: float, chosen: bool, style: CanvasStyle) -> None:
        super().__init__()
        self.source_id = source.node_id
        self.target_id = target.node_id
        self.score = score
        self.chosen = chosen
        self.label_text = f"{score:.2f}" + (" \u2713" if chosen else "")
        path = edge_path(target.scene_rect(), target.port_y(), source.scene_rect(), source.port_y(), arrow=False)
        self.setPath(path)
        self.setPen(style.chosen_pen if chosen else style.candidate_pen)
        self.setZValue(0.6 if chosen else 0.5)  # above edges, below cards
        self.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.label = ScoreLabelItem(self.label_text, chosen, style)  # added next to the line, on top
        self.label.setZValue(0.7)  # over the lines, under every card: a pill never covers one
        self.label.setPos(path.pointAtPercent(0.5))

    def apply_style(self, style: CanvasStyle) -> None:
        self.setPen(style.chosen_pen if self.chosen else style.candidate_pen)
        self.label._style = style
        self.label.update()
