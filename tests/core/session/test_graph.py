"""SessionGraph: structure, signals, change objects, and data round trips (no store)."""

from __future__ import annotations

import pytest

from app.core.session.graph import GraphError, SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind


def _turn(node_id: str, label: str = "") -> GraphNode:
    return GraphNode(node_id=node_id, kind=NodeKind.TURN, label=label or node_id)


def _continue(graph: SessionGraph, src: str, dst: str) -> None:
    graph.add_edge(GraphEdge(src=src, dst=dst, kind=EdgeKind.CONTINUES))


@pytest.fixture()
def branched() -> SessionGraph:
    """a ← b ← c and a ← d (a branch from a), plus a task t spawned by a."""
    g = SessionGraph("s1")
    for n in "abcd":
        g.add_node(_turn(n))
    g.add_node(GraphNode(node_id="t", kind=NodeKind.TASK, label="task"))
    _continue(g, "b", "a")
    _continue(g, "c", "b")
    _continue(g, "d", "a")
    g.add_edge(GraphEdge(src="a", dst="t", kind=EdgeKind.SPAWNED))
    return g


def test_chain_back_follows_continues_only(branched: SessionGraph) -> None:
    assert list(branched.chain_back("c")) == ["c", "b", "a"]
    assert list(branched.chain_back("c", limit=2)) == ["c", "b"]
    assert branched.root_of("d") == "a"
    assert branched.parent("a") is None


def test_frontiers_are_branch_tips(branched: SessionGraph) -> None:
    assert branched.frontiers() == ["c", "d"]
    assert branched.children("a") == ["b", "d"]


def test_neighbours_span_all_edge_kinds(branched: SessionGraph) -> None:
    assert set(branched.neighbours("a")) == {"b", "d", "t"}


def test_signals_and_change_objects() -> None:
    g = SessionGraph("s1")
    seen: list[tuple[str, str]] = []
    g.node_added.connect(lambda n: seen.append(("node_added", n.node_id)))
    g.edge_added.connect(lambda e: seen.append(("edge_added", e.kind)))
    g.node_moved.connect(lambda n: seen.append(("node_moved", f"{n.x},{n.y},{n.pinned}")))
    g.node_updated.connect(lambda n: seen.append(("node_updated", n.label)))
    assert g.add_node(_turn("a")).added_nodes == ("a",)
    g.add_node(_turn("b"))
    change = g.add_edge(GraphEdge(edge_id="e1", src="b", dst="a", kind=EdgeKind.CONTINUES))
    assert change.added_edges == ("e1",)
    assert g.move_node("a", 10, -5.5).moved_nodes == ("a",)
    assert g.update_node("b", label="renamed", attrs={"k": 1}).updated_nodes == ("b",)
    assert seen == [
        ("node_added", "a"),
        ("node_added", "b"),
        ("edge_added", "continues"),
        ("node_moved", "10.0,-5.5,True"),
        ("node_updated", "renamed"),
    ]
    assert g.node("b").attrs == {"k": 1}
    g.update_node("b", attrs={"j": 2})
    assert g.node("b").attrs == {"k": 1, "j": 2}


def test_invalid_operations_raise() -> None:
    g = SessionGraph("s1")
    g.add_node(_turn("a"))
    g.add_node(_turn("b"))
    g.add_node(_turn("c"))
    with pytest.raises(GraphError):
        g.add_node(_turn("a"))
    with pytest.raises(GraphError):
        g.add_edge(GraphEdge(src="a", dst="zzz", kind=EdgeKind.REFERENCES))
    with pytest.raises(GraphError):
        g.add_edge(GraphEdge(src="a", dst="a", kind=EdgeKind.REFERENCES))
    _continue(g, "b", "a")
    with pytest.raises(GraphError, match="already continues"):
        _continue(g, "b", "c")
    with pytest.raises(GraphError):
        g.node("zzz")


def test_parallel_edges_of_different_kinds(branched: SessionGraph) -> None:
    branched.add_edge(GraphEdge(src="b", dst="a", kind=EdgeKind.REFERENCES))
    kinds = sorted(e.kind for e in branched.out_edges("b"))
    assert kinds == ["continues", "references"]
    assert [e.kind for e in branched.out_edges("b", EdgeKind.REFERENCES)] == ["references"]


def test_data_round_trip_is_identical_and_silent(branched: SessionGraph) -> None:
    branched.move_node("b", 1.5, 2.5)
    data = branched.to_data()
    emitted: list[object] = []
    rebuilt = SessionGraph.from_data("s1", data)
    rebuilt.node_added.connect(emitted.append)
    assert rebuilt.to_data().model_dump() == data.model_dump()
    assert [n.node_id for n in rebuilt.nodes()] == ["a", "b", "c", "d", "t"]
    assert rebuilt.node("b").pinned and rebuilt.node("b").x == 1.5
    assert emitted == []


class _RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def save_node(self, session_id: str, node: GraphNode) -> None:
        self.calls.append(("node", node.node_id))

    def save_edge(self, session_id: str, edge: GraphEdge) -> None:
        self.calls.append(("edge", edge.edge_id))

    def set_node_position(self, node_id: str, x: float, y: float, pinned: bool = True) -> None:
        self.calls.append(("pos", f"{node_id}:{x}:{y}:{pinned}"))


def test_attach_sink_persists_every_change() -> None:
    g = SessionGraph("s1")
    sink = _RecordingSink()
    g.attach_sink(sink)
    g.add_node(_turn("a"))
    g.add_node(_turn("b"))
    g.add_edge(GraphEdge(edge_id="e", src="b", dst="a", kind=EdgeKind.CONTINUES))
    g.move_node("a", 3, 4, pinned=False)
    g.update_node("a", label="x")
    assert sink.calls == [
        ("node", "a"),
        ("node", "b"),
        ("edge", "e"),
        ("pos", "a:3.0:4.0:False"),
        ("node", "a"),
    ]


# --------------------------------------------------------------------------- replacing edges


def _caches(g: SessionGraph) -> tuple[list[str], dict[str, str], dict[str, list[str]], dict[str, list[str]]]:
    """Frontier, roots, adjacency and neighbour order: what a rebuild must reproduce exactly."""
    ids = [n.node_id for n in g.nodes()]
    return (
        g.frontiers(),
        {n: g.root_of(n) for n in ids},
        {n: [e.edge_id for e in g.out_edges(n)] + [e.edge_id for e in g.in_edges(n)] for n in ids},
        {n: g.neighbours(n) for n in ids},
    )


def test_retiring_and_replacing_an_edge_moves_the_whole_subtree() -> None:
    """a ← b ← c ← e, a ← d; x a second root. Move b (with c, e below it) onto x, then back."""
    g = SessionGraph("s1")
    for n in "abcdex":
        g.add_node(_turn(n))
    for edge_id, src, dst in [("ab", "b", "a"), ("bc", "c", "b"), ("ad", "d", "a"), ("ce", "e", "c")]:
        g.add_edge(GraphEdge(edge_id=edge_id, src=src, dst=dst, kind=EdgeKind.CONTINUES))
    g.add_edge(GraphEdge(edge_id="ref", src="b", dst="a", kind=EdgeKind.REFERENCES))
    assert g.frontiers() == ["d", "e", "x"] and {g.root_of(n) for n in "bce"} == {"a"}
    seen: list[tuple[str, str]] = []
    g.edge_removed.connect(lambda e: seen.append(("removed", e.edge_id)))
    g.edge_added.connect(lambda e: seen.append(("added", e.edge_id)))

    change = g.retire_edge("ab", {"valid_to": "t1", "valid_to_seq": 3})
    assert change.removed_edges == ("ab",) and seen == [("removed", "ab")]
    assert {g.root_of(n) for n in "bce"} == {"b"}  # the moved subtree is a chain of its own now
    assert g.parent("b") is None and g.children("a") == ["d"]
    assert g.neighbours("a") == ["d", "b"]  # by edge age: ad, then the references edge b → a
    g.add_edge(GraphEdge(edge_id="xb", src="b", dst="x", kind=EdgeKind.CONTINUES, attrs={"valid_from_seq": 3}))
    assert {g.root_of(n) for n in "bcex"} == {"x"} and g.root_of("d") == "a"
    assert g.frontiers() == ["d", "e"]
    assert list(g.chain_back("e")) == ["e", "c", "b", "x"]
    assert [e.edge_id for e in g.edges()] == ["bc", "ad", "ce", "ref", "xb"]
    assert [e.edge_id for e in g.edge_history()] == ["ab", "bc", "ad", "ce", "ref", "xb"]
    assert g.edge_history()[0].attrs == {"valid_to": "t1", "valid_to_seq": 3}

    # A root again: a becomes a frontier at its node position (as a reload would place it).
    g.retire_edge("xb", {"valid_to": "t2", "valid_to_seq": 4})
    assert g.frontiers() == ["d", "e", "x"] and {g.root_of(n) for n in "bce"} == {"b"}
    g.retire_edge("ad", {"valid_to": "t2", "valid_to_seq": 4})
    assert g.frontiers() == ["a", "d", "e", "x"]
    g.add_edge(GraphEdge(edge_id="ab2", src="b", dst="a", kind=EdgeKind.CONTINUES, attrs={"valid_from_seq": 4}))
    assert g.frontiers() == ["d", "e", "x"] and {g.root_of(n) for n in "bce"} == {"a"}
    # Adjacency reads in creation order: "ref" (older) before "ab2", although ab2 joins b and a anew.
    assert [e.edge_id for e in g.out_edges("b")] == ["ref", "ab2"]

    # Every cache equals that of a graph rebuilt from the stored records (live + superseded).
    data = g.to_data().model_copy(update={"edges": g.edge_history()})
    rebuilt = SessionGraph.from_data("s1", data)
    assert _caches(rebuilt) == _caches(g)
    assert [e.edge_id for e in rebuilt.edges()] == [e.edge_id for e in g.edges()]
    assert [e.edge_id for e in rebuilt.edge_history()] == [e.edge_id for e in g.edge_history()]


def test_continues_cycles_and_revived_edges_are_rejected() -> None:
    g = SessionGraph("s1")
    for n in "abc":
        g.add_node(_turn(n))
    _continue(g, "b", "a")
    g.add_edge(GraphEdge(edge_id="cb", src="c", dst="b", kind=EdgeKind.CONTINUES))
    g.retire_edge(g.out_edges("b", EdgeKind.CONTINUES)[0].edge_id, {"valid_to": "t"})
    assert g.creates_cycle("b", "c") and g.creates_cycle("b", "b") and not g.creates_cycle("b", "a")
    with pytest.raises(GraphError, match="cycle|continues"):
        _continue(g, "b", "c")
    g.retire_edge("cb", {"valid_to": "t"})
    with pytest.raises(GraphError, match="never revived"):
        g.add_edge(GraphEdge(edge_id="cb", src="c", dst="b", kind=EdgeKind.CONTINUES))
    with pytest.raises(GraphError):
        g.retire_edge("cb")


def test_attach_sink_persists_retired_edges() -> None:
    g = SessionGraph("s1")
    sink = _RecordingSink()
    g.add_node(_turn("a"))
    g.add_node(_turn("b"))
    g.add_edge(GraphEdge(edge_id="e", src="b", dst="a", kind=EdgeKind.CONTINUES))
    g.attach_sink(sink)
    g.retire_edge("e", {"valid_to": "t"})
    assert sink.calls == [("edge", "e")]
