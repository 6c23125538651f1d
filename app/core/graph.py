"""The session task graph: turn, task, env, memory and artifact nodes joined by typed edges.

``SessionGraph`` wraps a networkx ``MultiDiGraph`` (two nodes may be joined by edges of several
kinds). Every mutation returns a ``GraphChange`` saying what changed and emits one of the signals
``node_added``, ``edge_added``, ``node_moved``, ``node_updated``; ``attach_sink`` connects those
signals to a persistence sink (the SQLite store) so the graph reloads identical.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import networkx as nx

from app.core.signals import Signal
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind, SessionGraphData


class GraphError(ValueError):
    """An invalid graph operation (unknown node, duplicate id, self loop)."""


@dataclass(frozen=True)
class GraphChange:
    """What a mutation changed, so a view can decide what to redraw."""

    added_nodes: tuple[str, ...] = ()
    added_edges: tuple[str, ...] = ()
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
        self._g: nx.MultiDiGraph = nx.MultiDiGraph()
        self._edges: dict[str, GraphEdge] = {}
        self._frontier: dict[str, None] = {}  # turn nodes nothing continues, in insertion order
        self._root: dict[str, str] = {}  # first node of each node's chain (edges only ever extend chains)
        self.node_added: Signal[[GraphNode]] = Signal("node_added")
        self.edge_added: Signal[[GraphEdge]] = Signal("edge_added")
        self.node_moved: Signal[[GraphNode]] = Signal("node_moved")
        self.node_updated: Signal[[GraphNode]] = Signal("node_updated")

    # ------------------------------------------------------------------ reading

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._g

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def node(self, node_id: str) -> GraphNode:
        try:
            return self._g.nodes[node_id]["record"]
        except KeyError:
            raise GraphError(f"unknown node {node_id!r}") from None

    def nodes(self, kind: NodeKind | None = None) -> list[GraphNode]:
        """Nodes in insertion order, optionally of one kind."""
        records = (data["record"] for _, data in self._g.nodes(data=True))
        return [n for n in records if kind is None or n.kind == kind]

    def edges(self, kind: EdgeKind | None = None) -> list[GraphEdge]:
        """Edges in insertion order, optionally of one kind."""
        return [e for e in self._edges.values() if kind is None or e.kind == kind]

    def edge(self, edge_id: str) -> GraphEdge:
        try:
            return self._edges[edge_id]
        except KeyError:
            raise GraphError(f"unknown edge {edge_id!r}") from None

    def out_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[GraphEdge]:
        return [
            self._edges[key]
            for _, _, key in self._g.out_edges(node_id, keys=True)
            if kind is None or self._edges[key].kind == kind
        ]

    def in_edges(self, node_id: str, kind: EdgeKind | None = None) -> list[GraphEdge]:
        return [
            self._edges[key]
            for _, _, key in self._g.in_edges(node_id, keys=True)
            if kind is None or self._edges[key].kind == kind
        ]

    def parent(self, node_id: str) -> str | None:
        """The node ``node_id`` continues (its ``continues`` edge target), if any."""
        edges = self.out_edges(node_id, EdgeKind.CONTINUES)
        return edges[0].dst if edges else None

    def children(self, node_id: str) -> list[str]:
        """Nodes that continue ``node_id``, in insertion order."""
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

    def root_of(self, node_id: str) -> str:
        """The first node of the chain ``node_id`` belongs to (O(1): kept as edges are added)."""
        if node_id not in self._g:
            raise GraphError(f"unknown node {node_id!r}")
        return self._root.get(node_id, node_id)

    def frontiers(self) -> list[str]:
        """Branch tips: turn nodes nothing continues yet, in insertion order."""
        return list(self._frontier)

    def neighbours(self, node_id: str) -> list[str]:
        """Nodes joined to ``node_id`` by an edge of any kind, either direction, without repeats."""
        seen: dict[str, None] = {}
        for other in list(self._g.successors(node_id)) + list(self._g.predecessors(node_id)):
            seen.setdefault(other, None)
        return list(seen)

    # ------------------------------------------------------------------ mutating

    def add_node(self, node: GraphNode) -> GraphChange:
        if node.node_id in self._g:
            raise GraphError(f"node {node.node_id!r} already exists")
        self.add_node_silently(node)
        self.node_added.emit(node)
        return GraphChange(added_nodes=(node.node_id,))

    def add_edge(self, edge: GraphEdge) -> GraphChange:
        for end in (edge.src, edge.dst):
            if end not in self._g:
                raise GraphError(f"edge {edge.kind} refers to unknown node {end!r}")
        if edge.src == edge.dst:
            raise GraphError(f"self loop on {edge.src!r}")
        if edge.edge_id in self._edges:
            raise GraphError(f"edge {edge.edge_id!r} already exists")
        if edge.kind == EdgeKind.CONTINUES and self.out_edges(edge.src, EdgeKind.CONTINUES):
            raise GraphError(f"node {edge.src!r} already continues another node")
        self.add_edge_silently(edge)
        self.edge_added.emit(edge)
        return GraphChange(added_edges=(edge.edge_id,))

    def move_node(self, node_id: str, x: float, y: float, *, pinned: bool = True) -> GraphChange:
        """Place a node; ``pinned`` marks a position the user chose (layout keeps it)."""
        node = self.node(node_id).model_copy(update={"x": float(x), "y": float(y), "pinned": pinned})
        self._g.nodes[node_id]["record"] = node
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
        self._g.nodes[node_id]["record"] = node
        self.node_updated.emit(node)
        return GraphChange(updated_nodes=(node_id,))

    # ------------------------------------------------------------------ persistence

    def to_data(self) -> SessionGraphData:
        return SessionGraphData(nodes=self.nodes(), edges=self.edges())

    def add_node_silently(self, node: GraphNode) -> None:
        """Insert a stored node without emitting a signal (loading, as-of views)."""
        self._g.add_node(node.node_id, record=node)
        self._root.setdefault(node.node_id, node.node_id)
        if node.kind == NodeKind.TURN and not self.in_edges(node.node_id, EdgeKind.CONTINUES):
            self._frontier[node.node_id] = None

    def add_edge_silently(self, edge: GraphEdge) -> None:
        """Insert a stored edge without emitting a signal (loading, as-of views)."""
        self._g.add_edge(edge.src, edge.dst, key=edge.edge_id)
        self._edges[edge.edge_id] = edge
        if edge.kind == EdgeKind.CONTINUES:
            self._frontier.pop(edge.dst, None)
            self._root[edge.src] = self._root.get(edge.dst, edge.dst)

    @classmethod
    def from_data(cls, session_id: str, data: SessionGraphData) -> "SessionGraph":
        """Rebuild a graph from stored records without emitting signals."""
        graph = cls(session_id)
        for node in data.nodes:
            graph.add_node_silently(node)
        for edge in data.edges:
            graph.add_edge_silently(edge)
        return graph

    def attach_sink(self, sink: GraphSink) -> None:
        """Persist every later change to ``sink`` (connect once per graph)."""
        self.node_added.connect(lambda n: sink.save_node(self.session_id, n))
        self.node_updated.connect(lambda n: sink.save_node(self.session_id, n))
        self.edge_added.connect(lambda e: sink.save_edge(self.session_id, e))
        self.node_moved.connect(
            lambda n: sink.set_node_position(n.node_id, n.x or 0.0, n.y or 0.0, n.pinned)
        )
