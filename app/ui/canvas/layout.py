"""Tidy layout of the session graph: pure Python, no Qt, incremental per conversation.

- A **conversation** is a root lane node (a turn or task continuing nothing) with every lane node
  that continues it, directly or not. Conversations stand side by side, left to right in the
  order they started (a new one is appended on the right, so older ones keep their place).
- Each conversation's tree is laid out **tidily**: depth downwards (a continuation goes one row
  down), siblings side by side; a node stands above its first continuation and a later branch
  takes the nearest columns right of what is already there, as far as the subtrees' contours
  allow (a left-aligned Reingold–Tilford: appending never moves what is above or left).
- Long conversations **fold**: depth ``rows`` and deeper continues at the top of a band to the
  right (depth d is row ``d % rows`` of band ``d // rows``), as text runs on in the next column.
  ``rows`` grows in steps with the conversation (``TidyGeometry.rows_for``: 8 up to ~40 nodes,
  then 12, 16, ...), so a long one stays about as wide as it is tall; it reflows at a step only.
  Every conversation uses the same row grid, so the channels between rows and the gutters
  between columns are free of cards: ``routes.route`` runs edges through them, never across one.
- **Satellites** (env, memory and artifact nodes linked to a lane node) stand in a strip beside
  their node (a column that holds any widens by the strip): two places, then a pile on the
  second whose top ``pile`` names for a "+N" badge. Until linked, env nodes wait in a strip above
  the conversations, memory and artifacts in one above that.
- **Pinned** nodes (a user's drag) are drawn where they were put; their cell stays theirs.

``TidyLayout`` is incremental: a change re-lays out only the conversation it touches, and the
conversations right of it move (sideways) only when its width changed. Each mutating call
returns ``{node_id: (x, y)}`` for the nodes whose drawn position changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.core.types import EdgeKind, NodeKind
from app.ui.canvas.tidy import tidy_cells

Point = tuple[float, float]

SATELLITE_KINDS = frozenset({NodeKind.MEMORY, NodeKind.ARTIFACT})

# Node sizes in scene units (the canvas's items draw at these sizes).
CARD_WIDTH = 240.0
CARD_HEIGHT = 120.0  # every turn card: a title, a preview of four lines, badges
NODE_SIZES: dict[NodeKind, tuple[float, float]] = {
    NodeKind.TURN: (CARD_WIDTH, CARD_HEIGHT), NodeKind.TASK: (240.0, 92.0), NodeKind.ENV: (150.0, 40.0),
    NodeKind.MEMORY: (132.0, 54.0), NodeKind.ARTIFACT: (112.0, 62.0),
}


@dataclass(frozen=True)
class TidyGeometry:
    """Sizes of the grid in scene units."""

    rows: int = 8  # rows per band at the least: deeper turns continue in the next band, to the right
    max_rows: int = 32
    gutter: float = 40.0  # between columns (edges run in it)
    channel: float = 36.0  # between rows (edges run in it)
    conversation_gap: float = 100.0  # added to the gutter between two conversations
    satellite_gap: float = 12.0  # between a card and its satellites' strip
    satellite_width: float = 168.0  # the strip: the widest satellite and its pile's offsets
    pile_step: float = 6.0  # satellites beyond the second place pile up, this far apart
    pile_steps: int = 3  # ...for this many steps; deeper ones lie under the top (the badge counts them)
    env_y: float = -90.0
    env_pitch: float = 170.0
    loose_y: float = -170.0
    loose_pitch: float = 150.0

    def rows_for(self, nodes: int) -> int:
        """Rows per band of a conversation of ``nodes`` lane nodes: about 1.3 √n (a block about
        1.6 times as wide as tall, branches counted), in steps of 4, between ``rows`` and
        ``max_rows``."""
        return min(self.max_rows, max(self.rows, 4 * math.ceil(1.3 * math.sqrt(nodes) / 4)))

    @property
    def row_pitch(self) -> float:
        return CARD_HEIGHT + self.channel

    @property
    def column_pitch(self) -> float:
        return CARD_WIDTH + self.gutter


@dataclass(frozen=True)
class LayoutNode:
    """What the layout needs of a graph node; ``pinned_at`` is a position the user chose."""

    node_id: str
    kind: NodeKind
    pinned_at: Point | None = None


@dataclass(frozen=True)
class LayoutEdge:
    """What the layout needs of a graph edge."""

    src: str
    dst: str
    kind: EdgeKind


@dataclass
class _Slot:
    kind: NodeKind
    role: str  # "lane" | "env" | "loose" | "satellite"
    parent: str | None = None  # the node this one continues (lane nodes)
    anchor: str | None = None  # the lane node a satellite stands beside
    index: int = 0  # place among the anchor's satellites, or in the env/loose strip
    pinned_at: Point | None = None
    position: Point = (0.0, 0.0)
    children: dict[str, None] = field(default_factory=dict)  # continuations, in arrival order
    satellites: list[str] = field(default_factory=list)
    cell: tuple[int, float, float] = (0, 0.0, 0.0)  # lane nodes: (row, column left, column width)


@dataclass
class _Conversation:
    root: str
    x: float = 0.0  # left edge
    width: float = 0.0
    members: list[str] = field(default_factory=list)  # lane nodes, preorder


class TidyLayout:
    """Incremental tidy layout (see the module docstring). Each mutating call returns
    ``{node_id: (x, y)}`` for the nodes whose drawn position changed (pinned nodes never)."""

    def __init__(self, geometry: TidyGeometry | None = None) -> None:
        self.geometry = geometry or TidyGeometry()
        self._slots: dict[str, _Slot] = {}
        self._order: list[str] = []  # conversation roots, left to right
        self._convs: dict[str, _Conversation] = {}
        self._conv_of: dict[str, str] = {}  # lane node → its conversation's root
        self._env: list[str] = []
        self._loose: list[str] = []
        self._batch = False
        self._moved: dict[str, Point] = {}  # collected while placing
        self._placed: set[str] = set()  # nodes placed at least once (a first placement is a move)

    # ------------------------------------------------------------------ reading

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def position(self, node_id: str) -> Point:
        """Where the node is drawn: its pinned position, else its cell's position."""
        slot = self._slots[node_id]
        return slot.pinned_at if slot.pinned_at is not None else slot.position

    def positions(self) -> dict[str, Point]:
        """Drawn positions of every node."""
        return {node_id: self.position(node_id) for node_id in self._slots}

    def is_pinned(self, node_id: str) -> bool:
        return self._slots[node_id].pinned_at is not None

    def parent(self, node_id: str) -> str | None:
        return self._slots[node_id].parent

    def children(self, node_id: str) -> list[str]:
        """Nodes continuing ``node_id``, in arrival order."""
        return list(self._slots[node_id].children)

    def descendants(self, node_id: str) -> list[str]:
        """Every node reached from ``node_id`` along continuations (itself excluded), preorder."""
        out: list[str] = []
        stack = list(reversed(self._slots[node_id].children))
        seen = {node_id}
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            out.append(current)
            stack.extend(reversed(self._slots[current].children))
        return out

    def is_branch_start(self, node_id: str) -> bool:
        """Whether the node opens a conversation or a branch (it is not its parent's first
        continuation)."""
        parent = self._slots[node_id].parent
        return parent is None or next(iter(self._slots[parent].children), None) != node_id

    def satellites_of(self, node_id: str) -> list[str]:
        """Env/memory/artifact nodes standing beside ``node_id``."""
        return list(self._slots[node_id].satellites)

    def anchor_of(self, node_id: str) -> str | None:
        """The lane node a satellite stands beside (None for other nodes)."""
        slot = self._slots.get(node_id)
        return slot.anchor if slot is not None and slot.role == "satellite" else None

    def conversation_of(self, node_id: str) -> str | None:
        """The root of the conversation a lane node or satellite belongs to (None for the nodes
        waiting in the strips on top)."""
        slot = self._slots.get(node_id)
        if slot is None:
            return None
        return self._conv_of.get(slot.anchor if slot.role == "satellite" and slot.anchor else node_id)

    def conversations(self) -> list[tuple[str, list[str]]]:
        """(root, lane nodes in preorder) of every conversation, left to right."""
        return [(root, list(self._convs[root].members)) for root in self._order]

    def conversation_box(self, root: str) -> tuple[float, float, float, float]:
        """(x, y, width, height) of the cells a conversation uses."""
        conv, g = self._convs[root], self.geometry
        rows = 1 + max((self._slots[m].cell[0] for m in conv.members), default=0)
        return conv.x, 0.0, max(CARD_WIDTH, conv.width - g.gutter), rows * g.row_pitch - g.channel

    def pile(self, anchor_id: str) -> list[str]:
        """The satellites of ``anchor_id`` lying on its strip's second place, bottom to top (one
        alone is no pile; a pinned one has been dragged off it)."""
        slot = self._slots.get(anchor_id)
        if slot is None:
            return []
        return [s for s in slot.satellites[1:] if self._slots[s].pinned_at is None]

    def cycle_pile(self, anchor_id: str) -> dict[str, Point]:
        """Put the top of ``anchor_id``'s pile at its bottom, so the one under it shows (a user's
        click, not an arrival); returns the pile's new positions."""
        pile = self.pile(anchor_id)
        if len(pile) < 2:
            return {}
        places = [self._slots[s].index for s in pile]
        for node_id, index in zip([pile[-1], *pile[:-1]], places, strict=True):
            self._slots[node_id].index = index
            self._slots[anchor_id].satellites[index] = node_id
            self._place_satellite(node_id)
        self._moved = {}
        return {node_id: self._slots[node_id].position for node_id in pile}

    # ------------------------------------------------------------------ mutating

    def add_node(self, node: LayoutNode) -> dict[str, Point]:
        """Place a new node: a lane node as a new conversation on the right (its ``continues``
        edge usually follows at once), env and memory/artifact nodes in their strips on top."""
        if node.node_id in self._slots:
            return {}
        slot = _Slot(kind=node.kind, role="lane", pinned_at=node.pinned_at)
        self._slots[node.node_id] = slot
        g = self.geometry
        if node.kind == NodeKind.ENV:
            slot.role, slot.index = "env", len(self._env)
            self._env.append(node.node_id)
            slot.position = (slot.index * g.env_pitch, g.env_y)
        elif node.kind in SATELLITE_KINDS:
            slot.role, slot.index = "loose", len(self._loose)
            self._loose.append(node.node_id)
            slot.position = (slot.index * g.loose_pitch, g.loose_y)
        else:
            self._order.append(node.node_id)
            self._convs[node.node_id] = _Conversation(node.node_id)
            return self._relayout([node.node_id])
        return {} if slot.pinned_at is not None else {node.node_id: slot.position}

    def add_edge(self, edge: LayoutEdge) -> dict[str, Point]:
        """Take a new edge into account; returns the nodes that moved."""
        src, dst = self._slots.get(edge.src), self._slots.get(edge.dst)
        if src is None or dst is None or edge.src == edge.dst:
            return {}
        if edge.kind == EdgeKind.CONTINUES and src.role == "lane" and dst.role == "lane":
            return self._attach(edge.src, edge.dst)
        # a waiting memory/artifact or env event stands beside the first lane node it is linked to
        for loose_id, other_id in ((edge.src, edge.dst), (edge.dst, edge.src)):
            loose, other = self._slots[loose_id], self._slots[other_id]
            if loose.role in ("loose", "env") and other.role == "lane":
                return self._make_satellite(loose_id, other_id)
        # a task spawned from a lane node branches off it while it is still a bare root
        if edge.kind == EdgeKind.SPAWNED:
            for task_id, other_id in ((edge.src, edge.dst), (edge.dst, edge.src)):
                task, other = self._slots[task_id], self._slots[other_id]
                if (task.kind == NodeKind.TASK and task.role == "lane" and task.parent is None
                        and not task.children and other.role == "lane"):
                    return self._attach(task_id, other_id)
        return {}

    def remove_edge(self, edge: LayoutEdge) -> dict[str, Point]:
        """Forget an edge. A removed ``continues`` edge makes the node (and what continues it) a
        conversation of its own until another edge places it."""
        src = self._slots.get(edge.src)
        if edge.kind != EdgeKind.CONTINUES or src is None or src.parent != edge.dst:
            return {}
        old = self._conv_of.get(edge.src)
        self._slots[edge.dst].children.pop(edge.src, None)
        src.parent = None
        self._order.append(edge.src)
        self._convs[edge.src] = _Conversation(edge.src)
        return self._relayout([r for r in (old, edge.src) if r is not None])

    def pin(self, node_id: str, position: Point | None) -> None:
        """Pin a node at ``position`` (None unpins: it is drawn at its cell again)."""
        if node_id in self._slots:
            self._slots[node_id].pinned_at = position

    def build(self, nodes: Sequence[LayoutNode], edges: Iterable[LayoutEdge]) -> None:
        """Take a whole graph as if it had arrived live (nodes in order, each edge right after
        the later of its ends), laying it out once at the end."""
        order = {node.node_id: i for i, node in enumerate(nodes)}
        buckets: dict[int, list[LayoutEdge]] = {}
        for edge in edges:
            i, j = order.get(edge.src), order.get(edge.dst)
            if i is not None and j is not None:
                buckets.setdefault(max(i, j), []).append(edge)
        self._batch = True
        try:
            for i, node in enumerate(nodes):
                self.add_node(node)
                for edge in buckets.get(i, ()):
                    self.add_edge(edge)
        finally:
            self._batch = False
        self._relayout(list(self._order))

    # ------------------------------------------------------------------ structure

    def _attach(self, node_id: str, parent_id: str) -> dict[str, Point]:
        """``node_id`` continues ``parent_id`` now (the newest ``continues`` edge wins)."""
        slot = self._slots[node_id]
        if parent_id == node_id or parent_id in self.descendants(node_id):
            return {}  # a cycle: the tree keeps its shape
        touched: list[str] = []
        start = len(self._order)
        if slot.parent is not None:
            self._slots[slot.parent].children.pop(node_id, None)
            touched.append(self._conv_of.get(node_id, node_id))
        elif node_id in self._convs:  # a root (often provisional) joins another conversation
            start = self._order.index(node_id)
            self._order.remove(node_id)
            del self._convs[node_id]
        slot.parent = parent_id
        self._slots[parent_id].children[node_id] = None
        if self._batch:
            return {}
        return self._relayout([*touched, self._root(parent_id)], start=start)

    def _root(self, node_id: str) -> str:
        current = node_id
        while (parent := self._slots[current].parent) is not None:
            current = parent
        return current

    def _make_satellite(self, node_id: str, anchor_id: str) -> dict[str, Point]:
        slot, anchor = self._slots[node_id], self._slots[anchor_id]
        strip = self._env if slot.role == "env" else self._loose
        if strip and strip[-1] == node_id:
            strip.pop()  # give back its place on top when it was the last one
        slot.role, slot.anchor, slot.index = "satellite", anchor_id, len(anchor.satellites)
        anchor.satellites.append(node_id)
        if self._batch:
            return {}
        return self._relayout([self._root(anchor_id)])  # its column may widen; it is placed with it

    # ------------------------------------------------------------------ geometry

    def _relayout(self, roots: Sequence[str], start: int | None = None) -> dict[str, Point]:
        """Lay out the conversations of ``roots`` again and move the ones right of them (from
        index ``start`` on, where a conversation was dropped) when a width changed; returns what
        moved."""
        if self._batch:
            return {}
        touched = {r for r in roots if r in self._convs}
        first = min([self._order.index(r) for r in touched] + ([start] if start is not None else []),
                    default=len(self._order))
        self._moved = {}
        for root in touched:
            self._shape(self._convs[root])
        x = self._right_edge(first)
        for root in self._order[first:]:
            conv = self._convs[root]
            if conv.x != x or root in touched:
                conv.x = x
                self._place_members(conv)
            x += conv.width + self.geometry.conversation_gap
        moved, self._moved = self._moved, {}
        return moved

    def _right_edge(self, index: int) -> float:
        """The x where the conversation at ``index`` starts."""
        if index == 0:
            return 0.0
        prev = self._convs[self._order[index - 1]]
        return prev.x + prev.width + self.geometry.conversation_gap

    def _shape(self, conv: _Conversation) -> None:
        """Cells of a conversation relative to its left edge (row, column left, column width),
        and its width."""
        g = self.geometry
        children = {n: list(s.children) for n, s in self._iter_tree(conv.root)}
        cells = tidy_cells(conv.root, children)
        conv.members = list(cells)
        rows = g.rows_for(len(cells))
        bands: dict[int, dict[int, bool]] = {}  # band → column → holds satellites
        for node, (depth, col) in cells.items():
            column = bands.setdefault(depth // rows, {})
            column[col] = column.get(col, False) or self._has_strip(node)
        left: dict[tuple[int, int], tuple[float, float]] = {}
        x = 0.0
        for band in sorted(bands):
            for col in sorted(bands[band]):
                width = g.column_pitch + (g.satellite_gap + g.satellite_width if bands[band][col] else 0.0)
                left[(band, col)] = (x, width)
                x += width
        conv.width = x
        for node, (depth, col) in cells.items():
            cx, width = left[(depth // rows, col)]
            self._slots[node].cell = (depth % rows, cx, width)
            self._conv_of[node] = conv.root

    def _iter_tree(self, root: str) -> Iterable[tuple[str, _Slot]]:
        stack = [root]
        while stack:
            node = stack.pop()
            slot = self._slots[node]
            yield node, slot
            stack.extend(slot.children)

    def _has_strip(self, node_id: str) -> bool:
        return any(self._slots[s].pinned_at is None for s in self._slots[node_id].satellites)

    def _place_members(self, conv: _Conversation) -> None:
        pitch = self.geometry.row_pitch
        for member in conv.members:
            slot = self._slots[member]
            row, cx, _ = slot.cell
            self._put(member, slot, (conv.x + cx, row * pitch))
            for sat in slot.satellites:
                self._place_satellite(sat)

    def _put(self, node_id: str, slot: _Slot, position: Point) -> None:
        if position != slot.position or node_id not in self._placed:
            slot.position = position
            if slot.pinned_at is None:
                self._moved[node_id] = position
        self._placed.add(node_id)

    def _place_satellite(self, node_id: str) -> None:
        g = self.geometry
        slot = self._slots[node_id]
        ax, ay = self._slots[slot.anchor].position if slot.anchor else (0.0, 0.0)
        place = min(slot.index, 1)
        step = min(slot.index - place, g.pile_steps) * g.pile_step
        y = ay if place == 0 else ay + CARD_HEIGHT - NODE_SIZES[slot.kind][1]
        self._put(node_id, slot, (ax + CARD_WIDTH + g.satellite_gap + step, y))

    # ------------------------------------------------------------------ for the edge router

    def kind(self, node_id: str) -> NodeKind:
        return self._slots[node_id].kind

    def cell(self, node_id: str) -> tuple[int, float, float] | None:
        """(row, column left, column width) in the scene of a node laid out in a conversation (a
        satellite: of its node), not pinned, nor standing beside a pinned node; else None."""
        slot = self._slots.get(node_id)
        if slot is None or slot.pinned_at is not None or self.conversation_of(node_id) is None:
            return None
        lane = self._slots[slot.anchor] if slot.role == "satellite" and slot.anchor else slot
        if lane.pinned_at is not None:
            return None
        return lane.cell[0], lane.position[0], lane.cell[2]


def lay_out(nodes: Sequence[LayoutNode], edges: Iterable[LayoutEdge],
            geometry: TidyGeometry | None = None) -> TidyLayout:
    """Lay out a whole graph at once (``TidyLayout.build``); keep adding to the result."""
    layout = TidyLayout(geometry)
    layout.build(nodes, edges)
    return layout
