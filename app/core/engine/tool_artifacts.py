"""A tool server's results on the canvas: one ARTIFACT node per call that returned something.

When a turn's tool round called a tool server (MCP) and got a result, ``tool_artifacts`` adds
an ARTIFACT node "Tool: server.tool" to the session graph — ``ref_id`` the call's first result
evidence, attrs ``tool``, ``server``, ``tool_call_id``, ``evidence_ids`` — with a
``derived_from`` edge to the turn's node, and returns the write that stores them (with an
``artifact.tool`` event log entry) inside the turn's own transaction. The nodes come after the
turn's node, so the turn's replay (the session as of the turn) never sees them, as its live build
did not; later turns see them live and in replay alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.pipeline.record import BuildRecord
from app.core.session.state import SessionState
from app.core.text.quoting import quote_label
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind


def tool_artifacts(state: SessionState, build: BuildRecord, turn_node: GraphNode,
                   store: Any) -> Callable[[], None] | None:
    """Add the artifact nodes of ``build``'s tool server results to ``state`` (after the turn's
    node); return their write (store thread, in the turn's transaction), or None when there are none."""
    round_ = build.tools
    if round_ is None:
        return None
    seq = {"valid_from_seq": len(state.turn_order)}
    made: list[tuple[GraphNode, GraphEdge, dict[str, Any]]] = []
    for outcome in round_.calls:
        call = outcome.call
        if call.provider.kind != "mcp" or not call.result_evidence_ids:
            continue
        attrs = {"tool": call.tool, "server": call.provider.name, "tool_call_id": call.tool_call_id,
                 "evidence_ids": list(call.result_evidence_ids)}
        node = GraphNode(kind=NodeKind.ARTIFACT, label=quote_label(f"Tool: {call.tool}", 60),
                         ref_id=call.result_evidence_ids[0], created_at=turn_node.created_at, attrs=attrs)
        edge = GraphEdge(src=node.node_id, dst=turn_node.node_id, kind=EdgeKind.DERIVED_FROM,
                         created_at=turn_node.created_at, attrs=dict(seq))
        state.add_node(node)
        state.add_edge(edge)
        made.append((node, edge, {"node_id": node.node_id, **attrs}))
    if not made:
        return None
    session_id = state.session_id

    def persist() -> None:
        for node, edge, entry in made:
            store.save_node(session_id, node)
            store.save_edge(session_id, edge)
            store.append_event(session_id, "artifact.tool", entry)

    return persist
