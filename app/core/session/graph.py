"""The session task graph: turn, task, env, memory and artifact nodes joined by typed edges.

``SessionGraph`` keeps nodes by id and live edges by id, with each node's adjacency (two nodes may
be joined by edges of several kinds). Every mutation returns a ``GraphChange`` saying what changed and emits one of the signals
``node_added``, ``edge_added``, ``edge_removed``, ``node_moved``, ``node_updated``; ``attach_sink``
connects those signals to a persistence sink (the SQLite store) so the graph reloads identical.

Edges are never deleted: ``retire_edge`` takes an edge out of the live graph and keeps its record
(with ``attrs["valid_to"]``/``attrs["valid_to_seq"]``) in ``edge_history()``. The ``*_seq`` bounds
count session turns: an edge is live for a turn of seq ``s`` when ``valid_from_seq <= s <
valid_to_seq`` (a missing bound is open), which is what ``SessionState.as_of`` rebuilds from.
Adjacency is kept per node in edge creation order, so a graph rebuilt from its history iterates
exactly like the live one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.errors import CoreError, NoRecordError
from app.core.signals import Signal
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind, SessionGraphData


class GraphError(CoreError, ValueError):
    """An invalid graph operation (unknown node, duplicate id, self loop, cycle)."""


class NoNodeError(GraphError, NoRecordError):
    """The id names no node (or no live edge) of the graph."""


def edge_live(edge: GraphEdge) -> bool:
    """Whether the edge record is live (not superseded: no ``attrs["valid_to"]``)."""
    return edge.attrs.get("valid_to") is None


def edge_live_at(edge: GraphEdge, seq: int) -> bool:
    """Whether the edge was live for the turn of session seq ``seq`` (its ``*_seq`` bounds)."""
    start, end = edge.attrs.get("valid_from_seq"), edge.attrs.get("valid_to_seq")
    return (start is None or start <= seq) and (end is None or seq < end)


@dataclass(frozen=True)
class GraphChange:
    """What a mutation changed, so a view can decide what to redraw."""

    added_nodes: tuple[str, ...] = ()
    added_edges: tuple[str, ...] = ()
    removed_edges: tuple[str, ...] = ()  # edges that stopped being live (kept in the history)
    moved_nodes: tuple[str, ...] = ()
    updated_nodes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


class GraphSink(Protocol):
    """Where graph changes are persisted (``app.store.sqlite.SqliteStore`` implements it)."""

    def save_node(self, session_id: str, node: GraphNode) -> None: ...

    def save_edge(self, session_id: str, edge: GraphEdge) -> None: ...

    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None: ...


class SessionGraph:
    """The graph of one session. Node and edge records are the pydantic types of ``core.types``."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._nodes: dict[str, GraphNode] = {}  # node id → record, in insertion order
        self._edges: dict[str, GraphEdge] = {}  # live edges, in creation order
        self._history: dict[str, GraphEdge] = {}  # every edge ever (live and retired), creation order
        self._out: dict[str, dict[str, str]] = {}  # node → {live edge leaving it: its dst}, creation order
        self._in: dict[str, dict[str, str]] = {}  # node → {live edge entering it: its src}, creation order
        self._node_index: dict[str, int] = {}  # node id → insertion index
        self._frontier: dict[str, None] = {}  # turn nodes nothing continues, in node insertion order
        self._root: dict[str, str] = {}  # first node of each node's chain (kept for whole subtrees)
        # Nodes whose edges changed (both ends of an edge added or retired, a node added), in
        # order: what a reader caching adjacency (``SessionState.neighbours``) reads to stay exact.
        self._touched: list[str] = []
        self.node_added: Signal[[GraphNode]] = Signal("node_added")
        self.edge_added: Signal[[GraphEdge]] = Signal("edge_added")
        self.edge_removed: Signal[[GraphEdge]] = Signal("edge_removed")  # the retired record
        self.node_moved: Signal[[GraphNode]] = Signal("node_moved")
        self.node_updated: Signal[[GraphNode]] = Signal("node_updated")

    # ------------------------------------------------------------------ reading

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def node(self, node_id: str) -> GraphNode:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise NoNodeError(f"unknown node {node_id!r}") from None

    def nodes(self, kind: NodeKind | None = None) -> list[GraphNode]:
        """Nodes in insertion order, optionally of one kind."""
        return [n for n in self._nodes.values() if kind is None or n.kind == kind]

    def edges(self, kind: EdgeKind | None = None) -> list[GraphEdge]:
        """Live edges in creation order, optionally of one kind."""
        return [e for e in self._edges.values() if kind is None or e.kind == kind]

    def edge_history(self) -> list[GraphEdge]:
        """Every edge the graph has had, live and retired, in creation order (latest records)."""
        return list(self._history.values())

    def has_edge(self, edge_id: str) -> bool:
        """Whether ``edge_id`` is a live edge (a retired one is only in ``edge_history()``)."""
        return edge_id in self._edges

    def edge(self, edge_id: str) -> GraphEdge:
        """The live edge ``edge_id``."""
        try:
            return self._edges[edge_id]
        except KeyError:
            raise NoNodeError(f"unknown edge {edge_id!r}") from None

    def _adjacent(self, keys: dict[str, str] | None, kind: EdgeKind | None) -> list[GraphEdge]:
        if not keys:
            return []
        edges = self._edges
        if kind is None:
            return [edges[k] for k in keys]
        return [e for e in (edges[k] for k in keys) if e.kind == kind]

    def out_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[GraphEdge]:
        """Live edges leaving ``node_id``, in creation order, optionally of one kind."""
        return self._adjacent(self._out.get(node_id), kind)

    def in_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[GraphEdge]:
        """Live edges entering ``node_id``, in creation order, optionally of one kind."""
        return self._adjacent(self._in.get(node_id), kind)

    def parent(self, node_id: str) -> str | None:
        """The node ``node_id`` continues (its ``continues`` edge target), if any."""
        for key in self._out.get(node_id, ()):
            edge = self._edges[key]
            if edge.kind == EdgeKind.CONTINUES:
                return edge.dst
        return None

    def children(self, node_id: str) -> list[str]:
        """Nodes that continue ``node_id``, in edge creation order."""
        return [e.src for e in self.in_edges(node_id, EdgeKind.CONTINUES)]

    def chain_back(self, node_id: str, limit: int | None = None) -> Iterator[str]:
        """Walk the main chain from ``node_id`` back along ``continues`` edges (itself first)."""
        seen: set[str] = set()
        current: str | None = node_id
        steps = 0
        while current is not None and current not in seen:
            if limit is not None and steps >= limit:
                return
            yield current
            seen.add(current)
            steps += 1
            current = self.parent(current)

    def descendants(self, node_id: str) -> list[str]:
        """Nodes that continue ``node_id`` directly or further down (depth first, itself excluded)."""
        out: list[str] = []
        seen = {node_id}
        stack = self.children(node_id)[::-1]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            out.append(current)
            stack.extend(self.children(current)[::-1])
        return out

    def root_of(self, node_id: str) -> str:
        """The first node of the chain ``node_id`` belongs to (O(1): kept as edges change)."""
        if node_id not in self._nodes:
            raise GraphError(f"unknown node {node_id!r}")
        return self._root.get(node_id, node_id)

    def frontiers(self) -> list[str]:
        """Branch tips: turn nodes nothing continues yet, in insertion order."""
        return list(self._frontier)

    def several_conversations(self) -> bool:
        """Whether the branches grow from more than one root (the session holds several
        conversations: trees grown by routing, where older turns may be another's)."""
        return len({self.root_of(n) for n in self._frontier}) > 1

    def touch_mark(self) -> int:
        """The mark ``touched_since`` would return now: no change is older than it."""
        return len(self._touched)

    def touched_since(self, mark: int) -> tuple[list[str], int]:
        """The nodes whose edges changed since ``mark`` (a value this returned before; 0: since the
        graph was made), and the mark to pass next time."""
        return self._touched[mark:], len(self._touched)

    def neighbours(self, node_id: str) -> list[str]:
        """Nodes joined to ``node_id`` by a live edge of any kind (targets, then sources), once each."""
        out, into = self._out.get(node_id), self._in.get(node_id)
        seen = dict.fromkeys(out.values()) if out else {}
        if into:
            for src in into.values():
                seen.setdefault(src, None)
        return list(seen)

    # ------------------------------------------------------------------ mutating

    def add_node(self, node: GraphNode) -> GraphChange:
        if node.node_id in self._nodes:
            raise GraphError(f"node {node.node_id!r} already exists")
        self.add_node_silently(node)
        self.node_added.emit(node)
        return GraphChange(added_nodes=(node.node_id,))

    def add_edge(self, edge: GraphEdge) -> GraphChange:
        for end in (edge.src, edge.dst):
            if end not in self._nodes:
                raise GraphError(f"edge {edge.kind} refers to unknown node {end!r}")
        if edge.src == edge.dst:
            raise GraphError(f"self loop on {edge.src!r}")
        if edge.edge_id in self._edges:
            raise GraphError(f"edge {edge.edge_id!r} already exists")
        if edge.edge_id in self._history:
            raise GraphError(f"edge {edge.edge_id!r} existed before (edges are never revived)")
        if edge.kind == EdgeKind.CONTINUES:
            if self.out_edges(edge.src, EdgeKind.CONTINUES):
                raise GraphError(f"node {edge.src!r} already continues another node")
            if self.creates_cycle(edge.src, edge.dst):
                raise GraphError(f"{edge.src!r} cannot continue {edge.dst!r}: it continues {edge.src!r} already")
        self.add_edge_silently(edge)
        self.edge_added.emit(edge)
        return GraphChange(added_edges=(edge.edge_id,))

    def creates_cycle(self, src: str, dst: str) -> bool:
        """Whether ``src`` continuing ``dst`` would close a cycle (``dst`` is ``src`` or below it)."""
        if src == dst:
            return True
        if not self.in_edges(src, EdgeKind.CONTINUES):  # the usual case: a new node, nothing below
            return False
        return src in self.chain_back(dst)

    def retire_edge(self, edge_id: str, attrs: dict[str, Any] | None = None) -> GraphChange:
        """Take a live edge out of the live graph; its record (``attrs`` merged in, e.g. ``valid_to``)
        stays in ``edge_history()``. Emits ``edge_removed`` with that record."""
        edge = self.retire_edge_silently(edge_id, attrs)
        self.edge_removed.emit(edge)
        return GraphChange(removed_edges=(edge_id,))

    def move_node(self, node_id: str, x: float, y: float, *, pinned: bool = True) -> GraphChange:
        """Place a node; ``pinned`` marks a position the user chose (layout keeps it)."""
        node = self.node(node_id).model_copy(update={"x": float(x), "y": float(y), "pinned": pinned})
        self._nodes[node_id] = node
        self.node_moved.emit(node)
        return GraphChange(moved_nodes=(node_id,))

    def update_node(
        self, node_id: str, *, label: str | None = None, attrs: dict[str, Any] | None = None
    ) -> GraphChange:
        """Change a node's label and/or merge ``attrs`` into its attributes."""
        current = self.node(node_id)
        update: dict[str, Any] = {}
        if label is not None:
            update["label"] = label
        if attrs:
            update["attrs"] = {**current.attrs, **attrs}
        node = current.model_copy(update=update)
        self._nodes[node_id] = node
        self.node_updated.emit(node)
        return GraphChange(updated_nodes=(node_id,))

    # ------------------------------------------------------------------ persistence

    def to_data(self) -> SessionGraphData:
        return SessionGraphData(nodes=self.nodes(), edges=self.edges())

    def add_node_silently(self, node: GraphNode) -> None:
        """Insert a stored node without emitting a signal (loading, as-of views)."""
        self._nodes[node.node_id] = node
        self._node_index.setdefault(node.node_id, len(self._node_index))
        self._root.setdefault(node.node_id, node.node_id)
        self._touched.append(node.node_id)
        if node.kind == NodeKind.TURN and not self.in_edges(node.node_id, EdgeKind.CONTINUES):
            self._frontier[node.node_id] = None

    def add_edge_silently(self, edge: GraphEdge) -> None:
        """Insert a stored live edge without emitting a signal (loading, as-of views)."""
        self._history[edge.edge_id] = edge
        self._edges[edge.edge_id] = edge
        self._out.setdefault(edge.src, {})[edge.edge_id] = edge.dst
        self._in.setdefault(edge.dst, {})[edge.edge_id] = edge.src
        self._touched += (edge.src, edge.dst)
        if edge.kind == EdgeKind.CONTINUES:
            self._frontier.pop(edge.dst, None)
            self._set_root(edge.src, self._root.get(edge.dst, edge.dst))

    def retire_edge_silently(self, edge_id: str, attrs: dict[str, Any] | None = None) -> GraphEdge:
        """``retire_edge`` without the signal; returns the retired record."""
        edge = self.edge(edge_id)
        if attrs:
            edge = edge.model_copy(update={"attrs": {**edge.attrs, **attrs}})
        del self._edges[edge_id], self._out[edge.src][edge_id], self._in[edge.dst][edge_id]
        self._history[edge_id] = edge
        self._touched += (edge.src, edge.dst)
        if edge.kind == EdgeKind.CONTINUES:
            self._set_root(edge.src, edge.src)  # the moved subtree starts a chain of its own
            if self.node(edge.dst).kind == NodeKind.TURN and not self.in_edges(edge.dst, EdgeKind.CONTINUES):
                tips = [*self._frontier, edge.dst]
                tips.sort(key=self._node_index.__getitem__)  # frontier order is node order, as a reload has it
                self._frontier = dict.fromkeys(tips)
        return edge

    def _set_root(self, top: str, root: str) -> None:
        """Give ``top`` and every node below it (along ``continues``) the chain root ``root``."""
        self._root[top] = root
        if self._in.get(top) and self.in_edges(top, EdgeKind.CONTINUES):  # only a moved node has a subtree
            for node in self.descendants(top):
                self._root[node] = root

    @classmethod
    def from_data(cls, session_id: str, data: SessionGraphData) -> "SessionGraph":
        """Rebuild a graph from stored records without emitting signals.

        Superseded edges (``attrs["valid_to"]`` set) go to ``edge_history()`` only.
        """
        graph = cls(session_id)
        for node in data.nodes:
            graph.add_node_silently(node)
        for edge in data.edges:
            if edge_live(edge):
                graph.add_edge_silently(edge)
            else:
                graph.keep_retired(edge)
        return graph

    def keep_retired(self, edge: GraphEdge) -> None:
        """Record an already superseded edge in the history only (loading, as-of views)."""
        self._history[edge.edge_id] = edge

    def attach_sink(self, sink: GraphSink) -> None:
        """Persist every later change to ``sink`` (connect once per graph)."""
        self.node_added.connect(lambda n: sink.save_node(self.session_id, n))
        self.node_updated.connect(lambda n: sink.save_node(self.session_id, n))
        self.edge_added.connect(lambda e: sink.save_edge(self.session_id, e))
        self.edge_removed.connect(lambda e: sink.save_edge(self.session_id, e))
        self.node_moved.connect(
            lambda n: sink.set_node_position(n.node_id, n.x or 0.0, n.y or 0.0, n.pinned)
        )
