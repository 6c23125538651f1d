"""The session state's cached neighbours stay what a fresh walk of the state gives."""

from __future__ import annotations

import random

from app.core.session.state import SessionState
from app.core.types import EdgeKind, GraphEdge, GraphNode, Message, NodeKind, Role


def _fresh(state: SessionState) -> dict[str, list[str]]:
    """Every message's neighbours as a state loaded anew from the same records gives them."""
    again = SessionState(state.session_id)
    for node in state.graph.nodes():
        again.graph.add_node_silently(node)
    for edge in state.graph.edges():
        again.graph.add_edge_silently(edge)
    for message_id in state.order:
        view = state.messages[message_id]
        again.add_message(Message(message_id=message_id, role=view.role, content=view.text, turn_id=view.turn_id,
                                  at=view.at))
    for node in again.graph.nodes():
        again.note_node(node)
    return {m: list(again.neighbours(m)) for m in again.order}


def _cached(state: SessionState) -> dict[str, list[str]]:
    return {m: list(state.neighbours(m)) for m in state.order}


def test_neighbours_follow_new_messages_nodes_and_edges() -> None:
    state = SessionState("s")
    rng = random.Random(3)
    nodes: list[str] = []
    edges: list[str] = []
    for step in range(120):
        action = rng.random()
        if action < 0.45 or not nodes:  # a new turn: its input, a node continuing some earlier one
            turn = f"t{step}"
            state.add_message(Message(message_id=f"{turn}-in", role=Role.USER, content="q", turn_id=turn))
            node = GraphNode(kind=NodeKind.TURN, label=turn, ref_id=turn)
            state.add_node(node)
            if nodes:
                edge = GraphEdge(src=node.node_id, dst=rng.choice(nodes), kind=EdgeKind.CONTINUES)
                state.add_edge(edge)
                edges.append(edge.edge_id)
            nodes.append(node.node_id)
        elif action < 0.7:  # an answer joins an earlier turn
            turn = state.graph.node(rng.choice(nodes)).ref_id
            state.add_message(Message(role=Role.ASSISTANT, content="a", turn_id=turn))
        elif action < 0.85 and edges:  # a re-anchor: an edge retired, the node moved elsewhere
            edge = state.graph.edge(edges.pop(rng.randrange(len(edges))))
            state.graph.retire_edge(edge.edge_id, {"valid_to": "later"})
            target = rng.choice([n for n in nodes if not state.graph.creates_cycle(edge.src, n)] or [None])
            if target is not None:
                moved = GraphEdge(src=edge.src, dst=target, kind=EdgeKind.CONTINUES)
                state.add_edge(moved)
                edges.append(moved.edge_id)
        else:  # a turn recorded before its node (a node added later)
            turn = f"late{step}"
            state.add_message(Message(message_id=f"{turn}-in", role=Role.USER, content="q", turn_id=turn))
            _cached(state)
            state.add_message(Message(message_id=f"{turn}-out", role=Role.ASSISTANT, content="a", turn_id=turn))
            node = GraphNode(kind=NodeKind.TURN, label=turn, ref_id=turn)
            state.add_node(node)
            state.add_edge(GraphEdge(src=node.node_id, dst=rng.choice(nodes), kind=EdgeKind.CONTINUES))
            nodes.append(node.node_id)
        assert _cached(state) == _fresh(state), f"step {step}"


def test_a_view_with_notes_shares_the_cache_and_stays_exact() -> None:
    state = SessionState("s")
    for n in range(3):
        state.add_message(Message(message_id=f"m{n}", role=Role.USER, content="q", turn_id=f"t{n}"))
        node = GraphNode(kind=NodeKind.TURN, label=str(n), ref_id=f"t{n}")
        state.add_node(node)
        if n:
            state.add_edge(GraphEdge(src=node.node_id, dst=state.node_of(f"t{n - 1}") or "", kind=EdgeKind.CONTINUES))
    assert list(state.neighbours("m1")) == ["m0", "m2"]
    view = state.with_notes([])
    state.add_message(Message(message_id="a1", role=Role.ASSISTANT, content="a", turn_id="t1"))
    assert list(view.neighbours("m1")) == ["a1", "m0", "m2"]
    assert list(state.neighbours("m2")) == ["a1"]  # the last message of the turn it continues


def test_what_is_derived_from_every_note_is_made_again_only_after_a_note_or_a_message() -> None:
    from app.core.session.state import NoteView

    state = SessionState("s")
    made: list[int] = []

    def count() -> int:
        made.append(1)
        return len(state.notes) + len(state.messages)

    assert state.derived("n", count) == 0 and state.derived("n", count) == 0 and len(made) == 1
    state.add_note(NoteView("n1", "memory", "a fact", "2024-01-01T10:00:00"))
    assert state.derived("n", count) == 1 and len(made) == 2
    state.add_message(Message(message_id="m1", role=Role.USER, content="hi", at="2024-01-01T10:00:00", turn_id="t1"))
    assert state.derived("n", count) == 2 and state.derived("n", count) == 2 and len(made) == 3
    view = state.with_notes([NoteView("n2", "memory", "another", "2024-01-02T10:00:00")])
    assert view.derived("n", lambda: len(view.notes)) == 2 and state.derived("n", count) == 2 and len(made) == 3
