"""GraphMirrorScene: a ``SessionGraph`` mirrored as graphics items, in step with its signals.

The scene owns one ``node_id -> NodeItem`` map (and one ``edge_id -> EdgeItem`` map) and changes
them only in its ``_on_<graph signal>`` handlers. It places nodes with the incremental
``TidyLayout`` (edges along ``routes.route``), keeps a block per conversation
(``conversations.ConversationBlocks``), and holds the per-node view states that
change what is drawn: collapsed subtrees and put-away answer versions (hidden), filtered-out
nodes (dimmed: by text, by kind, and to a set of node ids such as a topic's). A new version of a
turn takes its first version's place.
``CanvasScene`` adds the user interaction on top.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from PySide6.QtCore import QObject, QPointF, QRectF, QTimer
from PySide6.QtGui import QPainterPath
from PySide6.QtWidgets import QGraphicsScene

from app.core.session import versions
from app.core.session.graph import SessionGraph
from app.core.signals import Signal as CoreSignal
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.conversations import ConversationBlocks
from app.ui.canvas.edges import EdgeItem, MergeEdgeItem, stroke
from app.ui.canvas.items import NodeItem
from app.ui.canvas.layout import LayoutEdge, LayoutNode, Point, TidyLayout, lay_out
from app.ui.canvas.overview import OverviewPainter
from app.ui.canvas.routes import route
from app.ui.canvas.style import CanvasStyle, edge_kind, node_kind

DIM_OPACITY = 0.22
NO_FILTER: tuple[str, frozenset[NodeKind] | None, frozenset[str] | None] = ("", None, None)


#: Up to this many nodes an edge that would run behind a card is routed around it; beyond, each
#: check's scene query costs more than a frame (there the far-zoom overview is what one sees).
ROUTE_LIMIT = 1500


def _pinned_at(node: GraphNode) -> Point | None:
    return (node.x, node.y) if node.pinned and node.x is not None and node.y is not None else None


def _disconnect_all(connected: list[tuple[CoreSignal[Any], Callable[..., None]]], *_: object) -> None:
    """Disconnect every (graph signal, slot) pair in ``connected`` and empty it."""
    for signal, slot in connected:
        signal.disconnect(slot)
    connected.clear()


def _is_live(edge: GraphEdge) -> bool:
    """False for an edge the graph keeps only as history (a replaced ``continues`` edge)."""
    attrs = edge.attrs
    return not (attrs.get("valid_to") or attrs.get("removed") or attrs.get("live") is False)


class GraphMirrorScene(QGraphicsScene):
    """Items for every node and edge of one ``SessionGraph``; see the module docstring."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.canvas_style = CanvasStyle()
        self.setBackgroundBrush(self.canvas_style.background)
        self.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.BspTreeIndex)
        self._graph: SessionGraph | None = None
        self._connected: list[tuple[CoreSignal[Any], Callable[..., None]]] = []  # mutated in place
        # if the scene is deleted while still showing a graph, the graph must not call into it
        self.destroyed.connect(functools.partial(_disconnect_all, self._connected))
        self._items: dict[str, NodeItem] = {}
        self._edge_items: dict[str, EdgeItem] = {}
        self._node_edges: dict[str, dict[str, None]] = {}
        self._order: dict[str, int] = {}
        self._layout = TidyLayout()
        self._overview = OverviewPainter(self.canvas_style)
        self._conversations = ConversationBlocks(self, self.canvas_style)
        self._collapsed: set[str] = set()
        self._hidden: set[str] = set()
        self._dimmed: set[str] = set()
        # (text, kinds, node ids): what ``set_filter`` lets through undimmed; NO_FILTER lets all through
        self._filter: tuple[str, frozenset[NodeKind] | None, frozenset[str] | None] = NO_FILTER
        self._drag_start: dict[str, QPointF] = {}
        # Qt builds its item index on the first query; do it as soon as the loop is idle rather
        # than in the first frame that needs it (~50 ms for 10,000 items).
        self._index_timer = QTimer(self)
        self._index_timer.setSingleShot(True)
        self._index_timer.timeout.connect(self._warm_index)

    # ------------------------------------------------------------------ model

    @property
    def graph(self) -> SessionGraph | None:
        return self._graph

    def set_graph(self, graph: SessionGraph | None) -> None:
        """Show ``graph`` (stored positions kept, the rest laid out) and follow its signals;
        ``None`` clears the scene and disconnects. The text and kind filter carry over; a filter
        to node ids does not (they name nodes of the graph shown before)."""
        _disconnect_all(self._connected)
        self._reset()
        self._filter = (*self._filter[:2], None)
        self._graph = graph
        if graph is None:
            return
        self._populate(graph)
        self._index_timer.start(0)
        pairs: list[tuple[CoreSignal[Any], Callable[..., None]]] = [
            (graph.node_added, self._on_node_added), (graph.edge_added, self._on_edge_added),
            (graph.node_moved, self._on_node_moved), (graph.node_updated, self._on_node_updated),
        ]
        removed = getattr(graph, "edge_removed", None)
        if removed is not None:
            pairs.append((removed, self._on_edge_removed))
        for signal, slot in pairs:
            signal.connect(slot)
        self._connected.extend(pairs)

    def item(self, node_id: str) -> NodeItem | None:
        return self._items.get(node_id)

    def edge_item(self, edge_id: str) -> EdgeItem | None:
        return self._edge_items.get(edge_id)

    def node_ids(self) -> list[str]:
        return list(self._items)

    @property
    def layout(self) -> TidyLayout:
        return self._layout

    def node_count(self) -> int:
        return len(self._items)

    def _warm_index(self) -> None:
        self.items(QRectF(0.0, 0.0, 1.0, 1.0))

    def _reset(self) -> None:
        """Drop every item and view state (the graph connections are handled by set_graph)."""
        self.clear()
        self._conversations.clear()
        self._items, self._edge_items, self._node_edges, self._order = {}, {}, {}, {}
        self._layout = TidyLayout()
        self._collapsed, self._hidden, self._dimmed = set(), set(), set()
        self._drag_start = {}
        self._overview.dirty = True

    def _populate(self, graph: SessionGraph) -> None:
        nodes = graph.nodes()
        edges = [e for e in graph.edges() if _is_live(e)]
        self._layout = lay_out([LayoutNode(n.node_id, node_kind(n.kind), _pinned_at(n)) for n in nodes],
                               [LayoutEdge(e.src, e.dst, edge_kind(e.kind)) for e in edges])
        for node in nodes:
            item = self._new_item(node)
            group = str(node.attrs.get(versions.VERSION_OF) or "")  # versions share their first one's place
            x, y = _pinned_at(node) or self._layout.position(group if group in self._layout else node.node_id)
            item.setPos(x, y)
            self.addItem(item)
        self._refresh_piles(self._items)
        for edge in edges:  # drawn once all are in place (a curve's detour asks one index, not one per edge)
            self._add_edge_item(edge, draw=False)
        for edge_item in self._edge_items.values():
            self._update_edge(edge_item)
        for node in nodes:
            if node.attrs.get("collapsed"):
                self.set_collapsed(node.node_id, True)
            if node.attrs.get(versions.HIDDEN):
                self._refresh_visibility(node.node_id)
        if self._filter != NO_FILTER:
            text, kinds, _ = self._filter
            self.set_filter(text, set(kinds) if kinds is not None else None)
        self._overview.dirty = True
        self._conversations.sync(self._layout, self._items)

    def _new_item(self, node: GraphNode) -> NodeItem:
        item = NodeItem(node, self.canvas_style)
        self._items[node.node_id] = item
        self._order[node.node_id] = len(self._order)
        return item

    def _add_edge_item(self, edge: GraphEdge, *, draw: bool = True) -> EdgeItem | None:
        if edge.src not in self._items or edge.dst not in self._items or edge.edge_id in self._edge_items:
            return None
        item = (MergeEdgeItem if edge.kind == EdgeKind.MERGES else EdgeItem)(edge, self.canvas_style)
        self._edge_items[edge.edge_id] = item
        for end in (edge.src, edge.dst):
            self._node_edges.setdefault(end, {})[edge.edge_id] = None
        if draw:
            self._update_edge(item)
        self._style_edge(item)
        self.addItem(item)
        return item

    def _update_edge(self, edge: EdgeItem) -> None:
        start, end = edge.ends()
        a, b = self._items[start], self._items[end]
        if self._at_cell(a) and self._at_cell(b):
            corners = route(self._layout, start, end)
            if corners is not None:
                edge.update_geometry(a, b, route=corners)
                return
        detour = len(self._items) <= ROUTE_LIMIT  # a curve with a dragged end goes round the cards
        blocked = functools.partial(self._crosses_cards, {start, end}) if detour else None
        edge.update_geometry(a, b, blocked)

    def _at_cell(self, item: NodeItem) -> bool:
        """Whether the item stands where the layout put it (not dragged, not a version's spot)."""
        if item.node_id not in self._layout:
            return False
        x, y = self._layout.position(item.node_id)
        return item.x() == x and item.y() == y

    def _crosses_cards(self, ends: set[str], path: QPainterPath) -> bool:
        """Whether ``path`` runs into a shown card other than its ends."""
        others = [it for it in self.items(path.boundingRect()) if isinstance(it, NodeItem)
                  and it.node_id not in ends and it.isVisible()]
        if not others:
            return False
        line = stroke(path)
        return any(line.intersects(it.scene_rect()) for it in others)

    def _style_edge(self, edge: EdgeItem) -> None:
        visible = edge.src_id not in self._hidden and edge.dst_id not in self._hidden
        if edge.isVisible() != visible:
            edge.setVisible(visible)
        opacity = DIM_OPACITY if (edge.src_id in self._dimmed or edge.dst_id in self._dimmed) else 1.0
        if edge.opacity() != opacity:
            edge.setOpacity(opacity)

    # ------------------------------------------------------------------ graph signals

    def _on_node_added(self, node: GraphNode) -> None:
        if node.node_id in self._items:
            return
        item = self._new_item(node)
        spot = _pinned_at(node) or self._version_spot(node)
        moved = self._layout.add_node(LayoutNode(node.node_id, node_kind(node.kind), spot))
        x, y = spot or self._layout.position(node.node_id)
        item.setPos(x, y)
        self.addItem(item)
        if item.kind == NodeKind.TASK:
            self._overview.dirty = True  # a landmark: its label shows in the overview
        if self._filter != NO_FILTER and not self._matches(item):
            self._set_dimmed(node.node_id, True)
        self._overview.add_node(item, node.node_id in self._dimmed)
        moved.pop(node.node_id, None)
        self._apply_moves(moved)
        if moved or item.kind in (NodeKind.TURN, NodeKind.TASK):  # a conversation began or moved
            self._conversations.sync(self._layout, self._items)

    def _on_edge_added(self, edge: GraphEdge) -> None:
        if not _is_live(edge) or edge.edge_id in self._edge_items:
            return
        moved = self._layout.add_edge(LayoutEdge(edge.src, edge.dst, edge_kind(edge.kind)))
        self._apply_moves(moved)
        self._refresh_piles(moved)
        item = self._add_edge_item(edge)
        if edge.kind == EdgeKind.CONTINUES and edge.src in self._items:
            self._refresh_visibility(edge.src)
            if self._hidden:
                self._refresh_counts(edge.src)
        if item is not None:
            start, end = item.ends()
            self._overview.add_edge(item, self._items[start], self._items[end])
        if moved:
            self._conversations.sync(self._layout, self._items)
            self._conversations.place(moved, self._layout, self._items)

    def _on_edge_removed(self, edge: GraphEdge) -> None:
        item = self._edge_items.pop(edge.edge_id, None)
        if item is not None:
            for end in (item.src_id, item.dst_id):
                self._node_edges.get(end, {}).pop(edge.edge_id, None)
            self.removeItem(item)
        moved = self._layout.remove_edge(LayoutEdge(edge.src, edge.dst, edge_kind(edge.kind)))
        if edge.kind == EdgeKind.CONTINUES and edge.src in self._items:
            self._refresh_visibility(edge.src)
            if edge.dst in self._items and self._collapsed:
                self._refresh_counts(edge.dst)
        self._apply_moves(moved)
        self._overview.dirty = True
        self._conversations.sync(self._layout, self._items)

    def _on_node_moved(self, node: GraphNode) -> None:
        item = self._items.get(node.node_id)
        if item is None or node.x is None or node.y is None:
            return
        self._layout.pin(node.node_id, (node.x, node.y) if node.pinned else None)
        if item.pos() != QPointF(node.x, node.y):
            self._apply_moves({node.node_id: (node.x, node.y)})
        item.set_pile_count(0)  # dragged off its pile (or put back: the pile badges its top again)
        self._refresh_piles((node.node_id,))

    def cycle_pile(self, node_id: str) -> str | None:
        """Bring the satellite under ``node_id`` (the top of a pile) up, the top going to the
        bottom; returns the new top (None when ``node_id`` tops no pile)."""
        anchor = self._layout.anchor_of(node_id) if node_id in self._layout else None
        if anchor is None:
            return None
        moved = self._layout.cycle_pile(anchor)
        self._apply_moves(moved)
        self._refresh_piles(moved)
        pile = self._layout.pile(anchor)
        return pile[-1] if moved else None

    def _refresh_piles(self, node_ids: Iterable[str]) -> None:
        """Redraw the satellite piles that ``node_ids`` lie on: newest on top, and the top badged
        with how many lie under it."""
        anchors = {a for n in node_ids if n in self._layout and (a := self._layout.anchor_of(n)) is not None}
        for anchor in anchors:
            pile = self._layout.pile(anchor)
            for depth, node_id in enumerate(pile):
                item = self._items.get(node_id)
                if item is not None:
                    item.setZValue(1.0 + 0.001 * depth)
                    item.set_pile_count(len(pile) - 1 if depth == len(pile) - 1 else 0)

    def _version_spot(self, node: GraphNode) -> Point | None:
        """A new version of a turn takes the place of the version it joins (one shows at a time)."""
        first = self._items.get(str(node.attrs.get(versions.VERSION_OF) or ""))
        return (first.pos().x(), first.pos().y()) if first is not None else None

    def _on_node_updated(self, node: GraphNode) -> None:
        item = self._items.get(node.node_id)
        if item is None:
            return
        item.set_node(node)
        self._conversations.touch([self._layout.conversation_of(node.node_id)], self._items)
        if versions.HIDDEN in node.attrs:  # a version shown or put away, with what continues it
            self._refresh_visibility(node.node_id)
        if self._filter != NO_FILTER:
            self._set_dimmed(node.node_id, not self._matches(item))

    # ------------------------------------------------------------------ geometry

    def _update_edges_of(self, node_ids: Iterable[str]) -> None:
        """Redraw every edge touching these nodes, each once."""
        edges: dict[str, None] = {}
        for node_id in node_ids:
            edges.update(self._node_edges.get(node_id, {}))
        for edge_id in edges:
            self._update_edge(self._edge_items[edge_id])

    def _apply_moves(self, moved: dict[str, Point]) -> None:
        """Move items to new layout positions, then redraw each affected edge once."""
        if not moved:
            return
        for node_id, (x, y) in moved.items():
            item = self._items.get(node_id)
            if item is not None:
                item.setPos(x, y)
        self._update_edges_of(moved)
        if not all(self._overview.is_recent(n) for n in moved):
            self._overview.dirty = True

    def layout_all(self) -> None:
        """Lay the graph out afresh (closing gaps left by re-anchoring); pinned nodes stay."""
        if self._graph is None:
            return
        nodes = [n for n in self._graph.nodes() if n.node_id in self._items]
        edges = [e for e in self._graph.edges() if _is_live(e)]
        self._layout = lay_out([LayoutNode(n.node_id, node_kind(n.kind), _pinned_at(n)) for n in nodes],
                               [LayoutEdge(e.src, e.dst, edge_kind(e.kind)) for e in edges])
        moved = {n: self._layout.position(n) for n in self._items
                 if n in self._layout and not self._layout.is_pinned(n)}
        self._apply_moves(moved)
        self._refresh_piles(self._items)
        self._conversations.sync(self._layout, self._items)

    def newest_node(self) -> str | None:
        """The node added last that is shown (None without one)."""
        return next((n for n in reversed(self._order) if self._items[n].isVisible()), None)

    def content_rect(self) -> QRectF:
        """The box around every visible node (empty without nodes)."""
        rect = QRectF()
        for item in self._items.values():
            if item.isVisible():
                rect = rect.united(item.scene_rect())
        return rect

    def node_at(self, pos: QPointF, exclude: Iterable[str] = ()) -> NodeItem | None:
        """The topmost visible node under ``pos`` (scene coordinates) not in ``exclude``."""
        skip = set(exclude)
        for item in self.items(pos):
            if isinstance(item, NodeItem) and item.isVisible() and item.node_id not in skip:
                return item
        return None

    # ------------------------------------------------------------------ filter and collapse

    def set_filter(self, text: str, kinds: set[NodeKind] | None, only: Iterable[str] | None = None) -> list[str]:
        """Dim nodes whose label/body does not contain ``text`` (case-insensitive), whose kind is
        not in ``kinds``, or (``only`` given, e.g. a topic's nodes: ``canvas.topic_filter``) whose
        id is not in ``only``; returns the matching ids (all of them when the filter is empty). A
        node added later is dimmed when it does not match."""
        self._filter = (text.strip().lower(), frozenset(NodeKind(k) for k in kinds) if kinds is not None else None,
                        frozenset(only) if only is not None else None)
        matching: list[str] = []
        for node_id, item in self._items.items():
            match = self._matches(item)
            if match:
                matching.append(node_id)
            self._set_dimmed(node_id, not match)
        return matching

    def _matches(self, item: NodeItem) -> bool:
        needle, kinds, only = self._filter
        if (kinds is not None and item.kind not in kinds) or (only is not None and item.node_id not in only):
            return False
        return not needle or needle in item.text().lower()

    def _set_dimmed(self, node_id: str, dimmed: bool) -> None:
        if (node_id in self._dimmed) == dimmed:
            return
        if dimmed:
            self._dimmed.add(node_id)
        else:
            self._dimmed.discard(node_id)
        self._items[node_id].setOpacity(DIM_OPACITY if dimmed else 1.0)
        for edge_id in self._node_edges.get(node_id, ()):
            self._style_edge(self._edge_items[edge_id])
        self._overview.dirty = True

    def is_dimmed(self, node_id: str) -> bool:
        return node_id in self._dimmed

    def set_collapsed(self, node_id: str, collapsed: bool) -> None:
        """Hide (or show again) every node continuing ``node_id``, directly or not; the node shows
        a "+N" badge while collapsed (and the summary the window gives it, ``set_node_summary``)."""
        item = self._items.get(node_id)
        if item is None or node_id not in self._layout:
            return
        if collapsed:
            self._collapsed.add(node_id)
        else:
            self._collapsed.discard(node_id)
        for child in self._layout.children(node_id):
            self._refresh_visibility(child)
        item.set_collapsed_count(len(self._layout.descendants(node_id)) if collapsed else 0)
        if not collapsed:
            item.set_summary("")

    def set_node_summary(self, node_id: str, text: str) -> None:
        """Show what the subtree hidden under a collapsed node says, on the node ("" takes it off)."""
        item = self._items.get(node_id)
        if item is not None and (node_id in self._collapsed or not text):
            item.set_summary(text)

    def is_collapsed(self, node_id: str) -> bool:
        return node_id in self._collapsed

    def _refresh_visibility(self, root: str) -> None:
        """Recompute the hidden state of ``root`` and of everything continuing it."""
        if root not in self._layout:
            return
        parent = self._layout.parent(root)
        hidden = parent is not None and (parent in self._hidden or parent in self._collapsed)
        stack, seen, changed = [(root, hidden)], set(), []
        while stack:
            node_id, hide = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            hide = hide or bool(self._items[node_id].node.attrs.get(versions.HIDDEN))
            if self._set_hidden(node_id, hide):
                changed.append(node_id)
            for satellite in self._layout.satellites_of(node_id):
                if self._set_hidden(satellite, hide):
                    changed.append(satellite)
            below = hide or node_id in self._collapsed
            stack.extend((child, below) for child in self._layout.children(node_id))
        for node_id in changed:
            for edge_id in self._node_edges.get(node_id, ()):
                self._style_edge(self._edge_items[edge_id])
        if changed:
            self._overview.dirty = True

    def _set_hidden(self, node_id: str, hidden: bool) -> bool:
        if (node_id in self._hidden) == hidden:
            return False
        if hidden:
            self._hidden.add(node_id)
        else:
            self._hidden.discard(node_id)
        self._items[node_id].setVisible(not hidden)
        return True

    def _refresh_counts(self, node_id: str) -> None:
        """Update the "+N" badges of the collapsed nodes above ``node_id``."""
        current: str | None = node_id
        seen: set[str] = set()
        while current is not None and current not in seen:
            seen.add(current)
            if current in self._collapsed:
                self._items[current].set_collapsed_count(len(self._layout.descendants(current)))
            current = self._layout.parent(current)
