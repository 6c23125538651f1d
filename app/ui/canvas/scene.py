"""CanvasScene: the session graph on the canvas, and what the user does with it.

``GraphMirrorScene`` keeps the items in step with the graph; this class adds the view states the
window drives (answers, status badges, anchor candidates, evidence highlight, theme) and turns
the user's actions into Qt signals for the controller. A drag is committed once, on release:
onto another node it becomes ``node_dropped`` (re-anchor request; the item snaps back and the
graph's signals move the edge), onto empty canvas it becomes ``node_moved`` (pin request).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (
    QGraphicsSceneContextMenuEvent,
    QGraphicsSceneDragDropEvent,
    QGraphicsSceneMouseEvent,
    QMenu,
    QWidget,
)

from app.core.types import NodeKind
from app.ui.canvas.cards import CardText
from app.ui.canvas.conversations import ConversationBlocks
from app.ui.canvas.items import NodeItem
from app.ui.canvas.mirror import GraphMirrorScene
from app.ui.canvas.overlay import CandidateItem, action_text, node_actions
from app.ui.canvas.style import legend_items

PENDING_MIME = "application/x-pcm-pending-input"


class CanvasScene(GraphMirrorScene):
    """The canvas scene the window shows; signals report the user's actions."""

    node_selected = Signal(str)
    selection_changed = Signal(list)
    node_dropped = Signal(str, str)
    node_moved = Signal(str, float, float)
    node_action = Signal(str, str)
    pending_dropped = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._resetting = False
        self._candidate_items: list[CandidateItem] = []
        self._highlighted: set[str] = set()
        self._primary = ""
        self._pressed = ""
        self._drag_primary = ""
        self.selectionChanged.connect(self._on_qt_selection_changed)

    def _reset(self) -> None:
        had_selection = bool(self._primary)
        self._resetting = True
        self.clear_candidates()
        super()._reset()
        self._resetting = False
        self._highlighted = set()
        self._primary = self._pressed = self._drag_primary = ""
        if had_selection:
            self.selection_changed.emit([])
            self.node_selected.emit("")

    # ------------------------------------------------------------------ view state

    def set_node_body(self, node_id: str, text: str, *, streaming: bool = False) -> None:
        """Show the answer under the turn's label; called per token batch."""
        item = self._items.get(node_id)
        if item is None:
            return
        item.set_body(text, streaming=streaming)
        if self._filter[0]:
            self._set_dimmed(node_id, not self._matches(item))

    def set_node_status(self, node_id: str, status: str) -> None:
        """Badge: building | streaming | answered | stopped | failed | interrupted | ambiguous."""
        item = self._items.get(node_id)
        if item is not None and item.status != status:
            item.set_status(status)
            self._conversations.touch([self.conversation_of(node_id)], self._items)

    def set_card_texts(self, texts: Mapping[str, CardText]) -> None:
        """Give turn cards their title, whole input and answer (``cards.card_texts``): what a card
        shows after a restart is what it showed before."""
        for node_id, card in texts.items():
            item = self._items.get(node_id)
            if item is None:
                continue
            item.set_card_text(card.title, card.question, card.question)
            if card.answer and not item.streaming:
                item.set_body(card.answer)
        self._conversations.touch({self.conversation_of(n) for n in texts}, self._items)
        if self._filter[0]:
            self.set_filter(self._filter[0], set(self._filter[1]) if self._filter[1] is not None else None,
                            self._filter[2])

    def mark_off_machine(self, node_ids: list[str]) -> None:
        """Mark turn cards whose answer came from a provider off this machine."""
        for node_id in node_ids:
            item = self._items.get(node_id)
            if item is not None:
                item.set_off_machine(True)

    def set_node_statuses(self, statuses: dict[str, str]) -> None:
        """Badge several nodes (node id → status), e.g. the stored ones of a session just opened."""
        for node_id, status in statuses.items():
            self.set_node_status(node_id, status)

    def show_candidates(self, node_id: str, candidates: list[tuple[str, float]], chosen: str | None) -> None:
        """Dashed, scored lines from ``node_id`` to each anchor candidate; ``chosen`` emphasised."""
        self.clear_candidates()
        source = self._items.get(node_id)
        if source is None:
            return
        for candidate_id, score in candidates:
            target = self._items.get(candidate_id)
            if target is None or candidate_id == node_id:
                continue
            line = CandidateItem(source, target, float(score), candidate_id == chosen, self.canvas_style)
            self.addItem(line)
            self.addItem(line.label)
            self._place_label(line)
            self._candidate_items.append(line)

    def _place_label(self, line: CandidateItem) -> None:
        """Put the score pill on its line where it covers no card (its size on screen measured at
        the view's zoom); it stays under the cards, so a card that arrives later, or a line that
        runs over cards all along, never has a pill over it."""
        label, path = line.label, line.path()
        views = self.views()
        scale = views[0].transform().m11() if views else 1.0
        box = label.boundingRect()
        box = QRectF(box.left() / scale, box.top() / scale, box.width() / scale, box.height() / scale)
        for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.1, 0.9):
            point = path.pointAtPercent(t)
            if not any(isinstance(it, NodeItem) and it.isVisible() for it in self.items(box.translated(point))):
                label.setPos(point)
                return
        label.setPos(path.pointAtPercent(0.5))

    def clear_candidates(self) -> None:
        for line in self._candidate_items:
            for item in (line, line.label):
                if item.scene() is self:
                    self.removeItem(item)
        self._candidate_items = []

    def candidate_items(self) -> list[CandidateItem]:
        return list(self._candidate_items)

    def highlight(self, node_ids: Iterable[str]) -> None:
        """Outline these nodes (evidence hover); an empty iterable clears."""
        wanted = {n for n in node_ids if n in self._items}
        for node_id in self._highlighted - wanted:
            self._items[node_id].set_highlighted(False)
        for node_id in wanted - self._highlighted:
            self._items[node_id].set_highlighted(True)
        self._highlighted = wanted

    def highlighted(self) -> set[str]:
        return set(self._highlighted)

    def set_theme(self, dark: bool) -> None:
        self.canvas_style.apply(dark)
        self.setBackgroundBrush(self.canvas_style.background)
        for edge in self._edge_items.values():
            edge.apply_style(self.canvas_style)
        for line in self._candidate_items:
            line.apply_style(self.canvas_style)
        self._overview.apply_style(self.canvas_style)
        self._conversations.apply_style(self.canvas_style)
        self.update()

    def legend(self) -> list[tuple[str, str, str]]:
        """(group, name, colour) rows for a legend of shapes and edge styles."""
        return legend_items(self.canvas_style)

    # ------------------------------------------------------------------ conversations

    def conversation_of(self, node_id: str) -> str | None:
        """The root of the conversation the node belongs to (None for a node waiting on top)."""
        return self._layout.conversation_of(node_id) if node_id in self._layout else None

    def conversation_rect(self, root: str) -> QRectF:
        """The box around the shown cards of a conversation and their satellites."""
        rect = QRectF()
        for member in dict(self._layout.conversations()).get(root, []):
            for node_id in (member, *self._layout.satellites_of(member)):
                item = self._items.get(node_id)
                if item is not None and item.isVisible():
                    rect = rect.united(item.scene_rect())
        return rect

    def conversation_blocks(self) -> ConversationBlocks:
        return self._conversations

    def focus(self) -> str | None:
        """The conversation the view focuses (the others show as blocks), or None."""
        return self._conversations.focus

    def set_focus(self, root: str | None) -> None:
        """Focus a conversation (its root; None: none): the others fold into dimmed blocks."""
        self._conversations.set_focus(root, self._layout, self._items)

    # ------------------------------------------------------------------ selection and pointer

    def selected_ids(self) -> list[str]:
        """Selected node ids in graph order."""
        ids = [it.node_id for it in self.selectedItems() if isinstance(it, NodeItem)]
        return sorted(ids, key=lambda n: self._order.get(n, 0))

    def selected_node_ids(self) -> list[str]:
        """Alias of ``selected_ids`` (the window's name for it)."""
        return self.selected_ids()

    def select(self, node_ids: Iterable[str]) -> None:
        """Make exactly these nodes selected."""
        wanted = [n for n in node_ids if n in self._items]
        self.clearSelection()
        for node_id in wanted:
            self._items[node_id].setSelected(True)

    def primary_id(self) -> str:
        return self._primary

    def _on_qt_selection_changed(self) -> None:
        if self._resetting:
            return
        ids = self.selected_ids()
        if self._pressed in ids:
            primary = self._pressed
        elif self._primary in ids:
            primary = self._primary
        else:
            primary = ids[-1] if ids else ""
        self.selection_changed.emit(ids)
        if primary != self._primary:
            self._primary = primary
            self.node_selected.emit(primary)

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        node = self.node_at(event.scenePos()) if event.button() == Qt.MouseButton.LeftButton else None
        self._pressed = node.node_id if node is not None else ""
        super().mousePressEvent(event)
        if node is not None:
            dragged = [it for it in self.selectedItems() if isinstance(it, NodeItem)]
            self._drag_start = {it.node_id: QPointF(it.pos()) for it in dragged}
            self._drag_start.setdefault(node.node_id, QPointF(node.pos()))
            self._drag_primary = node.node_id

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mouseMoveEvent(event)
        if self._drag_start:  # edges follow the dragged nodes; the overview waits for the release
            self._update_edges_of(self._drag_start)

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        starts, primary = self._drag_start, self._drag_primary
        self._drag_start, self._drag_primary, self._pressed = {}, "", ""
        if event.button() != Qt.MouseButton.LeftButton or not starts:
            return
        moved = {n: p for n, p in starts.items()
                 if n in self._items and (self._items[n].pos() - p).manhattanLength() > 0.5}
        if not moved:
            item = self._items.get(primary)
            if item is not None and item.pile_count and item.pile_badge_rect().contains(item.mapFromScene(event.scenePos())):
                top = self.cycle_pile(primary)  # a click on a pile's "+N": the next one up, and shown
                if top is not None:
                    self.select([top])
            return
        self._overview.dirty = True
        target = self.node_at(event.scenePos(), exclude=set(moved) | {primary})
        if target is not None and primary in moved and self._items[primary].kind == NodeKind.TURN:
            for node_id, start in moved.items():  # the engine decides; graph signals redraw
                self._items[node_id].setPos(start)
            self._update_edges_of(moved)
            self.node_dropped.emit(primary, target.node_id)
            return
        for node_id in moved:
            pos = self._items[node_id].pos()
            self.node_moved.emit(node_id, pos.x(), pos.y())

    def node_actions(self, node_id: str) -> list[str]:
        """The context-menu actions offered for ``node_id``."""
        item = self._items[node_id]
        return node_actions(
            item,
            others_selected=any(n != node_id for n in self.selected_ids()),
            has_children=node_id in self._layout and bool(self._layout.children(node_id)),
            collapsed=node_id in self._collapsed,
        )

    def build_node_menu(self, node_id: str, parent: QWidget | None = None) -> QMenu:
        """A context menu whose actions emit ``node_action(action, node_id)``."""
        menu = QMenu(parent)
        item = self._items[node_id]
        for action in self.node_actions(node_id):
            act = menu.addAction(action_text(action, item))
            act.setData(action)
            act.triggered.connect(lambda _=False, a=action: self.node_action.emit(a, node_id))
        return menu

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:
        node = self.node_at(event.scenePos())
        if node is None:
            super().contextMenuEvent(event)
            return
        menu = self.build_node_menu(node.node_id, event.widget())
        menu.exec(event.screenPos())
        event.accept()

    def _pending_target(self, event: QGraphicsSceneDragDropEvent) -> NodeItem | None:
        if not event.mimeData().hasFormat(PENDING_MIME):
            return None
        return self.node_at(event.scenePos())

    def dragEnterEvent(self, event: QGraphicsSceneDragDropEvent) -> None:
        event.setAccepted(event.mimeData().hasFormat(PENDING_MIME))

    def dragMoveEvent(self, event: QGraphicsSceneDragDropEvent) -> None:
        target = self._pending_target(event)
        event.setAccepted(target is not None)
        if target is not None:
            event.acceptProposedAction()

    def dragLeaveEvent(self, event: QGraphicsSceneDragDropEvent) -> None:
        event.accept()

    def dropEvent(self, event: QGraphicsSceneDragDropEvent) -> None:
        target = self._pending_target(event)
        if target is None:
            event.ignore()
            return
        event.acceptProposedAction()
        self.pending_dropped.emit(target.node_id)

    # ------------------------------------------------------------------ far zoom

    def _is_landmark(self, item: NodeItem) -> bool:
        """Labelled in the overview: tasks, checkpoints and the first turn of each conversation and branch."""
        if item.kind == NodeKind.TASK or item.checkpoint:
            return True
        if item.kind != NodeKind.TURN or item.node_id not in self._layout:
            return False
        return self._layout.is_branch_start(item.node_id)

    def paint_overview(self, painter: QPainter, scale: float, *, labels: bool = True) -> None:
        """Draw the whole scene in batches (``painter`` in scene coordinates); used by views
        below ``overview.OVERVIEW_SCALE`` instead of painting thousands of items, and by the
        minimap (without ``labels``)."""
        if self._overview.dirty:
            edges = ((e, self._items[e.ends()[0]], self._items[e.ends()[1]]) for e in self._edge_items.values())
            self._overview.rebuild(self._items.values(), edges, self._dimmed, self._is_landmark)
        selected = [it for it in self.selectedItems() if isinstance(it, NodeItem)]
        highlighted = [self._items[n] for n in self._highlighted]
        candidates = [(self._items[c.source_id], self._items[c.target_id], c.label_text, c.chosen)
                      for c in self._candidate_items]
        self._overview.paint(painter, scale, selected=selected, highlighted=highlighted, candidates=candidates,
                             labels=labels)
        if labels:  # the view's far zoom: each conversation as its block (the minimap keeps the cards)
            for block in self._conversations.blocks():
                block.paint(painter, None)
