"""The scene's conversations: one ``ConversationBlockItem`` per conversation of the layout, the
focused conversation (Fit), and what a block says.

``ConversationBlocks.sync`` follows the layout (a block per conversation, over its cells);
``set_focus`` folds every other conversation into its dimmed block (its cards are ``covered``:
they paint nothing). A block's text is made again, when it is next drawn, after its conversation
changed (``touch``): the title of the conversation's first turn, the words its turns share
(``titles.topic_words``), how many turns it holds and how many are being answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from PySide6.QtCore import QPointF, QRectF
from PySide6.QtWidgets import QGraphicsScene

from app.core.session.titles import topic_words
from app.core.types import NodeKind
from app.ui.canvas.blocks import BlockText, ConversationBlockItem
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import TidyLayout
from app.ui.canvas.style import CanvasStyle

RUNNING = frozenset({"building", "streaming"})


def _block_text_of(members: list[str], items: Mapping[str, NodeItem]) -> BlockText:
    """``block_text`` of the members still drawn (read when the block is next painted)."""
    return block_text([items[n] for n in members if n in items])


def block_text(members: list[NodeItem]) -> BlockText:
    """What the block of a conversation whose lane nodes are ``members`` (preorder) says."""
    turns = [m for m in members if m.kind == NodeKind.TURN]
    title = members[0].heading() if members else ""
    topics = topic_words([m.full_text or m.heading() for m in turns], k=4, skip=title)
    answering = sum(1 for m in turns if m.status in RUNNING)
    active = sum(1 for m in members if m.kind == NodeKind.TASK and m.task_status == "active")
    running = ", ".join(part for part in (f"{answering} answering" if answering else "",
                                         f"{active} task{'s' if active > 1 else ''} active" if active else "") if part)
    return BlockText(title, " · ".join(topics), len(turns), running)


class ConversationBlocks:
    """The blocks of one scene (see the module docstring)."""

    def __init__(self, scene: QGraphicsScene, style: CanvasStyle) -> None:
        self._scene = scene
        self._style = style
        self._blocks: dict[str, ConversationBlockItem] = {}
        self._members: dict[str, list[str]] = {}
        self._stale: set[str] = set()
        self.focus: str | None = None

    def clear(self) -> None:
        """Forget every block (the scene has removed its items)."""
        self._blocks, self._members, self._stale, self.focus = {}, {}, set(), None

    def blocks(self) -> list[ConversationBlockItem]:
        return list(self._blocks.values())

    def block(self, root: str) -> ConversationBlockItem | None:
        return self._blocks.get(root)

    def sync(self, layout: TidyLayout, items: Mapping[str, NodeItem]) -> None:
        """A block for each conversation of ``layout``, over its cells; the focus kept (dropped
        when its conversation is gone)."""
        conversations = dict(layout.conversations())
        for root in [r for r in self._blocks if r not in conversations]:
            self._scene.removeItem(self._blocks.pop(root))
            self._members.pop(root, None)
        for root, members in conversations.items():
            block = self._blocks.get(root)
            if block is None:
                block = self._blocks[root] = ConversationBlockItem(root, self._style)
                self._scene.addItem(block)
            block.set_box(QRectF(*layout.conversation_box(root)))
            if self._members.get(root) != members:
                self._members[root] = members
                self._stale.add(root)
        if self.focus is not None and self.focus not in conversations:
            self.focus = None
            self._apply_focus(layout, items)
        self._refresh_texts(items)

    def place(self, node_ids: Iterable[str], layout: TidyLayout, items: Mapping[str, NodeItem]) -> None:
        """Cover (or uncover) nodes that have just arrived or joined a conversation, as the focus
        says (only they: a burst of events costs one look each)."""
        if self.focus is None:
            return
        for node_id in node_ids:
            item = items.get(node_id)
            root = layout.conversation_of(node_id) if node_id in layout else None
            if item is not None and item.covered != (root is not None and root != self.focus):
                item.covered = not item.covered
                item.update()

    def touch(self, roots: Iterable[str | None], items: Mapping[str, NodeItem]) -> None:
        """Make the texts of these conversations' blocks again (a status or a title changed)."""
        self._stale.update(r for r in roots if r is not None and r in self._blocks)
        self._refresh_texts(items)

    def _refresh_texts(self, items: Mapping[str, NodeItem]) -> None:
        for root in self._stale:
            block = self._blocks.get(root)
            if block is not None:
                members = list(self._members.get(root, []))
                block.set_text_source(partial(_block_text_of, members, items))
        self._stale.clear()

    def set_focus(self, root: str | None, layout: TidyLayout, items: Mapping[str, NodeItem]) -> None:
        """Focus ``root``'s conversation (None: none): the others fold into their blocks."""
        self.focus = root if root in self._blocks else None
        self._apply_focus(layout, items)

    def _apply_focus(self, layout: TidyLayout, items: Mapping[str, NodeItem]) -> None:
        for root, block in self._blocks.items():
            folded = self.focus is not None and root != self.focus
            block.set_folded(folded)
            for node_id in self._covered(root, layout):
                item = items.get(node_id)
                if item is not None and item.covered != folded:
                    item.covered = folded
                    item.update()

    def _covered(self, root: str, layout: TidyLayout) -> Iterable[str]:
        for member in self._members.get(root, ()):
            yield member
            yield from layout.satellites_of(member)

    def block_at(self, pos: QPointF, scale: float) -> str | None:
        """The conversation whose block shows at ``pos`` (scene coordinates) at ``scale``."""
        for root, block in self._blocks.items():
            if block.shows_at(scale) and block.box().contains(pos):
                return root
        return None

    def apply_style(self, style: CanvasStyle) -> None:
        self._style = style
        for block in self._blocks.values():
            block.apply_style(style)
