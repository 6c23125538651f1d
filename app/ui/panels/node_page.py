"""The inspector's page for a node that is not a turn: an environment event (its content, source
and where it was routed), a task (status, progress, result), a memory or artifact node.

``node_details`` reads what to show from the session graph (and, for an env event, the stored
event); ``NodePage`` shows it as a few labelled lines and the content, as plain text.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from app.core.types import EdgeKind, NodeKind
from app.ui import theme

KIND_TITLES = {NodeKind.ENV: "Environment event", NodeKind.TASK: "Task", NodeKind.MEMORY: "Memory",
               NodeKind.ARTIFACT: "Artifact"}
# attrs shown for a node kind, in order, with the label each gets
SHOWN_ATTRS: dict[NodeKind, tuple[tuple[str, str], ...]] = {
    NodeKind.ENV: (("kind", "Kind"), ("source", "Source"), ("uri", "Item"), ("change", "Change"), ("at", "When")),
    NodeKind.TASK: (("status", "Status"), ("progress", "Progress"), ("steps", "Steps"), ("tokens", "Tokens")),
    NodeKind.ARTIFACT: (("path", "File"), ("version", "Version"), ("size", "Bytes"), ("lines", "Lines")),
}


def _routed(graph: Any, node_id: str) -> str:
    edges = graph.out_edges(node_id, EdgeKind.REFERENCES)
    if not edges:
        return "the environment lane (no task or turn named it)"
    edge = edges[-1]
    target = graph.node(edge.dst) if edge.dst in graph else None
    how = edge.attrs.get("route")
    return f"«{target.label if target is not None else edge.dst[:8]}»" + (f" ({how})" if how else "")


def node_details(graph: Any, node_id: str, event: Any | None = None) -> tuple[str, list[tuple[str, str]], str]:
    """(title, labelled lines, content) for the node; ``event`` is the stored ``EnvEvent`` of an
    env node, or of an attached file's artifact node, when known (its content and notes)."""
    node = graph.node(node_id)
    title = f"{KIND_TITLES.get(node.kind, node.kind.value.title())}: {node.label}"
    lines: list[tuple[str, str]] = []
    for key, label in SHOWN_ATTRS.get(node.kind, ()):
        value = node.attrs.get(key)
        if value not in (None, ""):
            lines.append((label, str(value)))
    if node.kind == NodeKind.ENV:
        lines.append(("Routed to", _routed(graph, node_id)))
    content = ""
    if node.kind == NodeKind.ARTIFACT and node.attrs.get("attached"):
        lines.append(("Attached", "by you: kept as evidence the answers can use"))
    if event is not None:
        content = event.content or str(event.payload.get("message") or "")
        skipped = event.payload.get("skipped")
        if skipped and not content:
            content = f"(not read: {str(skipped).replace('_', ' ')})"
    elif node.kind != NodeKind.ENV:
        extra = {k: v for k, v in node.attrs.items() if k not in dict(SHOWN_ATTRS.get(node.kind, ()))}
        content = "\n".join(f"{k}: {v}" for k, v in extra.items() if v not in (None, "", [], {}))
    return title, lines, content


class NodePage(QWidget):
    """Title, labelled lines, and the content (read-only, monospace)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel(self)
        self.heading.setWordWrap(True)
        self.heading.setTextFormat(Qt.TextFormat.PlainText)
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.form = QFormLayout()
        self.content = QPlainTextEdit(self)
        self.content.setReadOnly(True)
        self.content.setFont(theme.monospace_font())
        box = QVBoxLayout(self)
        box.addWidget(self.heading)
        box.addLayout(self.form)
        box.addWidget(self.content, 1)

    def show_details(self, title: str, lines: list[tuple[str, str]], content: str) -> None:
        self.heading.setText(title)
        while self.form.rowCount():
            self.form.removeRow(0)
        for label, value in lines:
            shown = QLabel(value, self)
            shown.setTextFormat(Qt.TextFormat.PlainText)
            shown.setWordWrap(True)
            shown.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.form.addRow(label, shown)
        self.content.setPlainText(content or "(no content)")

    def lines(self) -> list[tuple[str, str]]:
        """The labelled lines shown (tests)."""
        out = []
        for row in range(self.form.rowCount()):
            label = self.form.itemAt(row, QFormLayout.ItemRole.LabelRole).widget()
            value = self.form.itemAt(row, QFormLayout.ItemRole.FieldRole).widget()
            out.append((label.text(), value.text()))
        return out
