"""The session graph's rows: nodes (with their canvas positions) and edges.

A node or edge is saved in place (its insertion order kept). An edge superseded by a re-anchor
keeps its row with ``attrs["valid_to"]`` set, so ``as_of`` can read the graph a turn saw.
"""

from __future__ import annotations

from app.core.types import GraphEdge, GraphNode, SessionGraphData
from app.store import records as R
from app.store.connection import Database, NotFoundError


class GraphRecords:
    """Graph nodes and edges (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def save_node(self, session_id: str, node: GraphNode) -> GraphNode:
        """Insert the node, or update it in place (keeping its insertion order); return it."""
        self.db.upsert(R.GRAPH_NODES, session_id, node, "graph.node_saved")
        return node

    def save_edge(self, session_id: str, edge: GraphEdge) -> GraphEdge:
        """Insert the edge, or update it in place (keeping its insertion order); return it."""
        self.db.upsert(R.GRAPH_EDGES, session_id, edge, "graph.edge_saved")
        return edge

    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None:
        """Move a node on the canvas (a committed drag pins it by default)."""
        row = self.db.one("SELECT session_id FROM graph_nodes WHERE node_id = ?", (node_id,))
        if row is None:
            raise NotFoundError(f"no node {node_id!r}")
        with self.db.transaction():
            self.db.connection().execute("UPDATE graph_nodes SET x = ?, y = ?, pinned = ? WHERE node_id = ?",
                                         (x, y, int(pinned), node_id))
            self.db.log(row["session_id"], "graph.node_moved",
                        {"node_id": node_id, "x": x, "y": y, "pinned": pinned})

    def load_graph(self, session_id: str, *, include_superseded: bool = False) -> SessionGraphData:
        """Return the session's nodes and live edges in insertion order, as saved.

        An edge superseded by a re-anchor keeps its row with ``attrs["valid_to"]`` set; those
        are returned too (in their insertion order) only when asked.
        """
        edges: list[GraphEdge] = self.db.select(R.GRAPH_EDGES, "session_id = ?", (session_id,))
        if not include_superseded:
            edges = [e for e in edges if e.attrs.get("valid_to") is None]
        return SessionGraphData(nodes=self.db.select(R.GRAPH_NODES, "session_id = ?", (session_id,)),
                                edges=edges)
