"""Lane layout of the session graph: pure Python, no Qt, incremental.

Branches are lanes (rows) and time flows left to right (columns):

- a node that continues the tip of its lane takes the next column of that lane;
- a node that continues a node which is not its lane's tip (it already has a later node, i.e. an
  earlier child) opens a branch one column right of the node it continues, in the nearest row
  below whose nodes all end ``branch_headroom`` columns before that (a new row at the bottom if
  none is free within ``LaneGeometry.row_scan`` rows), so branches stay next to their parents;
- a tip that would end up right before such a later branch in its row continues as a branch too
  (its next two cells must be free), so that two lanes sharing a row never look like one chain;
- turn/task nodes that continue nothing open a new row at the bottom, at column 0;
- memory, artifact and env nodes are satellites: placed under the first lane node they are linked
  to, in the strip each lane reserves below its cards (one row; when it is full, the newer ones
  pile up on its last place, a few pixels apart, and ``pile`` tells the scene how deep the pile is
  for a count badge); until linked, memory and artifacts wait in a loose lane on top, and env
  nodes in an environment lane above lane 0, in arrival order, each no further left than the
  rightmost column used so far (in line with the conversation of their time).

``LaneLayout`` is incremental: adding a node never moves an existing node (a user's click on a
pile, ``cycle_pile``, reorders that pile). The one exception is a
node whose link arrives after it (``node_added`` then ``edge_added``): the newcomer moves from its
provisional place, and the lane it had opened is given back when it is the last one. When a
``continues`` edge is replaced (re-anchoring) the moved node and its subtree are re-placed.
Pinned nodes keep their position; their logical slot is still reserved so that nothing lands on
the slot the layout gave them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.core.types import EdgeKind, NodeKind

Point = tuple[float, float]

LANE_KINDS = frozenset({NodeKind.TURN, NodeKind.TASK})
SATELLITE_KINDS = frozenset({NodeKind.MEMORY, NodeKind.ARTIFACT})


@dataclass(frozen=True)
class LaneGeometry:
    """Sizes of the lane grid in scene units (cards are at most 240 x 148)."""

    column_width: float = 290.0
    lane_height: float = 260.0
    env_y: float = -110.0
    env_column_width: float = 170.0
    loose_y: float = -190.0
    loose_column_width: float = 150.0
    satellite_dy: float = 180.0  # from a lane node's top to its satellites' top
    satellite_width: float = 140.0
    satellites_per_row: int = 2
    pile_step: float = 5.0  # satellites beyond the row pile up on its last place, this far apart
    pile_steps: int = 3  # ...for this many steps; deeper ones lie under the top (the badge counts them)
    row_scan: int = 48  # rows searched below a branch point for a free place
    branch_headroom: int = 2  # free columns left after an idle tip when a branch shares its row


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
    lane: int = 0
    col: int = 0
    parent: str | None = None  # the node this one continues (lane nodes)
    anchor: str | None = None  # the lane node a satellite hangs under
    index: int = 0  # position among the anchor's satellites, or in the env/loose lane
    pinned_at: Point | None = None
    position: Point = (0.0, 0.0)
    children: dict[str, None] = field(default_factory=dict)  # continuations, insertion order
    satellites: list[str] = field(default_factory=list)


class LaneLayout:
    """Incremental lane layout. Each mutating call returns ``{node_id: (x, y)}`` for the nodes
    whose drawn position changed (pinned nodes never appear there)."""

    def __init__(self, geometry: LaneGeometry | None = None) -> None:
        self.geometry = geometry or LaneGeometry()
        self._slots: dict[str, _Slot] = {}
        self._lane_end: list[int] = []  # rightmost column used per row
        self._lane_count: list[int] = []  # lane nodes per row
        self._cells: list[set[int]] = []  # occupied columns per row
        self._env_count = 0
        self._env_next_x = 0.0
        self._max_col = 0
        self._loose: list[str] = []

    # ------------------------------------------------------------------ reading

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def lane_count(self) -> int:
        """Number of rows in use below the env lane (a row may hold several short branches)."""
        return len(self._lane_end)

    def position(self, node_id: str) -> Point:
        """Where the node is drawn: its pinned position, else its slot's position."""
        slot = self._slots[node_id]
        return slot.pinned_at if slot.pinned_at is not None else slot.position

    def lane_of(self, node_id: str) -> int | None:
        """The lane index of a lane node (None for env, loose and satellite nodes)."""
        slot = self._slots[node_id]
        return slot.lane if slot.role == "lane" else None

    def column_of(self, node_id: str) -> int:
        return self._slots[node_id].col

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

    def satellites_of(self, node_id: str) -> list[str]:
        """Memory/artifact nodes hanging under ``node_id``."""
        return list(self._slots[node_id].satellites)

    def anchor_of(self, node_id: str) -> str | None:
        """The lane node a satellite hangs under (None for other nodes)."""
        slot = self._slots.get(node_id)
        return slot.anchor if slot is not None and slot.role == "satellite" else None

    def pile(self, anchor_id: str) -> list[str]:
        """The satellites of ``anchor_id`` lying on the last place of its strip, bottom to top
        (one alone is no pile; a pinned one has been dragged off it)."""
        slot = self._slots.get(anchor_id)
        if slot is None:
            return []
        start = max(1, self.geometry.satellites_per_row) - 1
        return [s for s in slot.satellites[start:] if self._slots[s].pinned_at is None]

    def cycle_pile(self, anchor_id: str) -> dict[str, Point]:
        """Put the top of ``anchor_id``'s pile at its bottom, so the one under it shows (a user's
        click, not an arrival); returns the pile's new positions."""
        pile = self.pile(anchor_id)
        if len(pile) < 2:
            return {}
        slots = [self._slots[s].index for s in pile]
        for node_id, index in zip([pile[-1], *pile[:-1]], slots, strict=True):
            self._slots[node_id].index = index
            self._slots[anchor_id].satellites[index] = node_id
            self._position_satellite(node_id)
        return {node_id: self._slots[node_id].position for node_id in pile}

    def is_pinned(self, node_id: str) -> bool:
        return self._slots[node_id].pinned_at is not None

    def positions(self) -> dict[str, Point]:
        """Drawn positions of every node."""
        return {node_id: self.position(node_id) for node_id in self._slots}

    # ------------------------------------------------------------------ mutating

    def add_node(self, node: LayoutNode) -> dict[str, Point]:
        """Place a new node provisionally (a root lane, the env lane or the loose lane)."""
        if node.node_id in self._slots:
            return {}
        slot = _Slot(kind=node.kind, role="lane", pinned_at=node.pinned_at)
        self._slots[node.node_id] = slot
        if node.kind == NodeKind.ENV:
            slot.role, slot.index = "env", self._env_count
            self._env_count += 1
            x = max(self._env_next_x, self._max_col * self.geometry.column_width)
            self._env_next_x = x + self.geometry.env_column_width
            slot.position = (x, self.geometry.env_y)
        elif node.kind in SATELLITE_KINDS:
            slot.role, slot.index = "loose", len(self._loose)
            self._loose.append(node.node_id)
            slot.position = (slot.index * self.geometry.loose_column_width, self.geometry.loose_y)
        else:
            self._put_in_lane(slot, self._open_lane(), 0)
        return {} if slot.pinned_at is not None else {node.node_id: slot.position}

    def add_edge(self, edge: LayoutEdge) -> dict[str, Point]:
        """Take a new edge into account; returns the nodes that moved."""
        src, dst = self._slots.get(edge.src), self._slots.get(edge.dst)
        if src is None or dst is None or edge.src == edge.dst:
            return {}
        if edge.kind == EdgeKind.CONTINUES and src.role == "lane":
            if src.parent is not None:  # a second continues edge: the newest one wins
                self._slots[src.parent].children.pop(edge.src, None)
            src.parent = edge.dst
            dst.children[edge.src] = None
            return self._replace_subtree(edge.src)
        # a loose memory/artifact, or an env event, hangs under the first lane node it is linked to
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
                    return self._replace_subtree(task_id, branch_from=other_id)
        return {}

    def remove_edge(self, edge: LayoutEdge) -> dict[str, Point]:
        """Forget an edge. A removed ``continues`` edge detaches the node; nothing moves until a
        new edge places it again."""
        src = self._slots.get(edge.src)
        if edge.kind == EdgeKind.CONTINUES and src is not None and src.parent == edge.dst:
            src.parent = None
            dst = self._slots.get(edge.dst)
            if dst is not None:
                dst.children.pop(edge.src, None)
        return {}

    def pin(self, node_id: str, position: Point | None) -> None:
        """Pin a node at ``position`` (None unpins: it is drawn at its slot again)."""
        if node_id in self._slots:
            self._slots[node_id].pinned_at = position

    # ------------------------------------------------------------------ internals

    def _open_lane(self) -> int:
        self._lane_end.append(-1)
        self._lane_count.append(0)
        self._cells.append(set())
        return len(self._lane_end) - 1

    def _put_in_lane(self, slot: _Slot, lane: int, col: int) -> None:
        slot.role, slot.lane, slot.col = "lane", lane, col
        self._lane_end[lane] = max(self._lane_end[lane], col)
        self._lane_count[lane] += 1
        self._cells[lane].add(col)
        self._max_col = max(self._max_col, col)
        slot.position = (col * self.geometry.column_width, lane * self.geometry.lane_height)

    def _leave_lane(self, slot: _Slot) -> None:
        self._lane_count[slot.lane] -= 1
        self._cells[slot.lane].discard(slot.col)
        if slot.lane == len(self._lane_end) - 1 and self._lane_count[slot.lane] == 0:
            # give back trailing empty lanes (a provisional root that has just been attached)
            while self._lane_count and self._lane_count[-1] == 0:
                self._lane_count.pop()
                self._lane_end.pop()
                self._cells.pop()

    def _place_under(self, node_id: str, parent_id: str | None, *, branch: bool = False) -> None:
        slot = self._slots[node_id]
        parent = self._slots[parent_id] if parent_id is not None else None
        if parent is None or parent.role != "lane":
            self._put_in_lane(slot, self._open_lane(), 0)
        elif not branch and not {parent.col + 1, parent.col + 2} & self._cells[parent.lane]:
            self._put_in_lane(slot, parent.lane, parent.col + 1)
        else:
            self._put_in_lane(slot, self._free_row(parent.lane, parent.col), parent.col + 1)

    def _free_row(self, parent_row: int, parent_col: int) -> int:
        """The nearest row below ``parent_row`` whose nodes end ``branch_headroom`` columns before
        ``parent_col`` (or a new row)."""
        last = min(len(self._lane_end), parent_row + 1 + self.geometry.row_scan)
        limit = parent_col - self.geometry.branch_headroom
        for row in range(parent_row + 1, last):
            if self._lane_end[row] < limit:
                return row
        return self._open_lane()

    def _replace_subtree(self, node_id: str, *, branch_from: str | None = None) -> dict[str, Point]:
        """Re-place ``node_id`` under its parent (or as a branch of ``branch_from``) and every
        node continuing it, parents before children; satellites follow their anchors."""
        subtree = [node_id, *self.descendants(node_id)]
        before = {n: self.position(n) for n in subtree}
        lane_nodes = [n for n in subtree if self._slots[n].role == "lane"]
        for n in reversed(lane_nodes):
            self._leave_lane(self._slots[n])
        for n in lane_nodes:
            slot = self._slots[n]
            if n == node_id and branch_from is not None:
                self._place_under(n, branch_from, branch=True)
            else:
                self._place_under(n, slot.parent)
        moved: dict[str, Point] = {}
        for n in lane_nodes:
            for sat_id in self._slots[n].satellites:
                self._position_satellite(sat_id)
                if self._slots[sat_id].pinned_at is None:
                    moved[sat_id] = self._slots[sat_id].position
        for n in subtree:
            if self._slots[n].pinned_at is None and self.position(n) != before[n]:
                moved[n] = self.position(n)
        return moved

    def _make_satellite(self, node_id: str, anchor_id: str) -> dict[str, Point]:
        slot, anchor = self._slots[node_id], self._slots[anchor_id]
        if self._loose and self._loose[-1] == node_id:
            self._loose.pop()  # give back the loose slot when it was the last one
        if slot.role == "env" and slot.index == self._env_count - 1:  # likewise the env lane's last place
            self._env_count -= 1
            self._env_next_x = slot.position[0]
        slot.role, slot.anchor, slot.index = "satellite", anchor_id, len(anchor.satellites)
        anchor.satellites.append(node_id)
        self._position_satellite(node_id)
        return {} if slot.pinned_at is not None else {node_id: slot.position}

    def _position_satellite(self, node_id: str) -> None:
        g = self.geometry
        slot = self._slots[node_id]
        ax, ay = self._slots[slot.anchor].position if slot.anchor else (0.0, 0.0)
        col = min(slot.index, max(1, g.satellites_per_row) - 1)
        step = min(slot.index - col, g.pile_steps) * g.pile_step
        slot.position = (ax + col * g.satellite_width + step, ay + g.satellite_dy + step)


def lay_out(
    nodes: Sequence[LayoutNode], edges: Iterable[LayoutEdge], geometry: LaneGeometry | None = None
) -> LaneLayout:
    """Lay out a whole graph as if it had arrived live: nodes in order, each edge right after the
    later of its two ends. Returns the ``LaneLayout`` (read ``positions()``; keep adding to it)."""
    layout = LaneLayout(geometry)
    order = {node.node_id: i for i, node in enumerate(nodes)}
    buckets: dict[int, list[LayoutEdge]] = {}
    for edge in edges:
        i, j = order.get(edge.src), order.get(edge.dst)
        if i is not None and j is not None:
            buckets.setdefault(max(i, j), []).append(edge)
    for i, node in enumerate(nodes):
        layout.add_node(node)
        for edge in buckets.get(i, ()):
            layout.add_edge(edge)
    return layout
