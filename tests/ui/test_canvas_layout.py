"""The canvas lane layout: pure functions over node/edge records, no Qt involved."""

from __future__ import annotations

import random

from app.core.types import EdgeKind, NodeKind
from app.ui.canvas.layout import LaneGeometry, LaneLayout, LayoutEdge, LayoutNode, lay_out

G = LaneGeometry()
TURN, TASK, ENV, MEMORY, ARTIFACT = NodeKind.TURN, NodeKind.TASK, NodeKind.ENV, NodeKind.MEMORY, NodeKind.ARTIFACT


def _cont(src: str, dst: str) -> LayoutEdge:
    return LayoutEdge(src, dst, EdgeKind.CONTINUES)


def _live(layout: LaneLayout, node_id: str, kind: NodeKind = TURN, parent: str | None = None) -> None:
    """Add a node then its continues edge, as the engine does (node_added, then edge_added)."""
    layout.add_node(LayoutNode(node_id, kind))
    if parent is not None:
        layout.add_edge(_cont(node_id, parent))


def test_a_chain_stays_in_its_lane_one_column_per_turn() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    for prev, node in zip("abc", "bcd", strict=True):
        _live(layout, node, parent=prev)
    assert [layout.lane_of(n) for n in "abcd"] == [0, 0, 0, 0]
    assert [layout.position(n) for n in "abcd"] == [(i * G.column_width, 0.0) for i in range(4)]
    assert layout.lane_count == 1  # the provisional lanes of b, c, d were given back


def test_a_second_continuation_branches_into_a_lane_below() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    _live(layout, "b", parent="a")
    _live(layout, "c", parent="b")
    _live(layout, "x", parent="a")  # a already has b: a branch
    _live(layout, "y", parent="x")  # the tip of the branch lane: stays in it
    assert layout.lane_of("x") == 1 and layout.column_of("x") == 1
    assert layout.lane_of("y") == 1 and layout.column_of("y") == 2
    ax, ay = layout.position("a")
    xx, xy = layout.position("x")
    assert xx > ax and xy > ay  # right of its parent (time flows right) and below (a new lane)
    assert layout.children("a") == ["b", "x"]
    assert layout.descendants("a") == ["b", "c", "x", "y"]


def test_a_branch_takes_the_nearest_row_that_is_free_from_its_column() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    for prev, node in zip(["a", "b", "c", "d"], ["b", "c", "d", "e"], strict=True):
        _live(layout, node, parent=prev)  # lane 0: a b c d e
    _live(layout, "r")  # a new root: lane 1, column 0
    _live(layout, "x", parent="d")  # branch from column 3: lane 1 is free from column 3 on
    assert layout.lane_of("r") == 1
    assert layout.lane_of("x") == 1 and layout.column_of("x") == 4
    _live(layout, "s", parent="r")  # r's next cell is free: r's lane goes on
    assert layout.lane_of("s") == 1 and layout.column_of("s") == 1
    _live(layout, "z", parent="b")  # lane 1 is taken at column 1: the next free row
    assert layout.lane_of("z") == 2 and layout.column_of("z") == 2


def test_roots_open_new_lanes_and_env_nodes_sit_in_a_lane_on_top() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    _live(layout, "e1", ENV)
    _live(layout, "b")
    _live(layout, "e2", ENV)
    assert layout.lane_of("a") == 0 and layout.lane_of("b") == 1
    (e1x, e1y), (e2x, e2y) = layout.position("e1"), layout.position("e2")
    assert e1y == e2y < 0 <= layout.position("a")[1]
    assert e2x > e1x


def test_an_env_event_moves_next_to_the_card_it_is_linked_to() -> None:
    layout = LaneLayout()
    for n in range(6):  # a task far below the env lane, on its own row
        _live(layout, f"r{n}")
    _live(layout, "task", TASK)
    _live(layout, "e1", ENV)
    _live(layout, "e2", ENV)
    waiting = layout.position("e2")
    moved = layout.add_edge(LayoutEdge("e2", "task", EdgeKind.REFERENCES))  # the edit the task watches
    (tx, ty), (ex, ey) = layout.position("task"), layout.position("e2")
    assert moved == {"e2": (ex, ey)} and (ex, ey) == (tx, ty + G.satellite_dy)
    assert layout.position("e1")[1] == G.env_y  # an unlinked event stays in the env lane
    _live(layout, "e3", ENV)  # the env lane's last place was given back
    assert layout.position("e3") == waiting


def test_tasks_spawned_from_a_turn_branch_off_it() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    _live(layout, "t", TASK)
    layout.add_edge(LayoutEdge("a", "t", EdgeKind.SPAWNED))
    assert layout.column_of("t") == 1 and layout.lane_of("t") == 1
    _live(layout, "b", parent="a")  # the turn lane itself goes on
    assert layout.lane_of("b") == 0


def test_memory_and_artifacts_hang_under_the_node_they_come_from() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    _live(layout, "m", MEMORY)
    loose = layout.position("m")
    assert loose[1] < 0  # waiting on top until linked
    moved = layout.add_edge(LayoutEdge("m", "a", EdgeKind.DERIVED_FROM))
    _live(layout, "doc", ARTIFACT)
    layout.add_edge(LayoutEdge("doc", "a", EdgeKind.DERIVED_FROM))
    (ax, ay), (mx, my), (dx, dy) = layout.position("a"), layout.position("m"), layout.position("doc")
    assert moved == {"m": (mx, my)}
    assert my == dy == ay + G.satellite_dy and mx == ax and dx > mx
    _live(layout, "b", parent="a")
    assert layout.position("b")[1] == ay  # satellites do not push the lane


def test_satellites_beyond_the_row_pile_up_on_its_last_place() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    for n in range(6):
        _live(layout, f"m{n}", MEMORY)
        layout.add_edge(LayoutEdge(f"m{n}", "a", EdgeKind.DERIVED_FROM))
    ax, ay = layout.position("a")
    assert layout.position("m0") == (ax, ay + G.satellite_dy)
    last = (ax + G.satellite_width, ay + G.satellite_dy)
    assert layout.position("m1") == last  # the row is full: the rest pile on its last place
    steps = [layout.position(f"m{n}")[0] - last[0] for n in range(1, 6)]
    assert steps == [0, G.pile_step, 2 * G.pile_step, 3 * G.pile_step, 3 * G.pile_step]  # bounded
    assert layout.pile("a") == ["m1", "m2", "m3", "m4", "m5"] and layout.anchor_of("m3") == "a"
    layout.pin("m5", (900.0, 900.0))  # dragged off the pile
    assert layout.pile("a") == ["m1", "m2", "m3", "m4"]
    assert layout.anchor_of("a") is None


def test_adding_nodes_never_moves_placed_nodes() -> None:
    rng = random.Random(11)
    layout = LaneLayout()
    ids: list[str] = []
    seen: dict[str, tuple[float, float]] = {}
    for i in range(400):
        node_id = f"n{i}"
        kind = rng.choice([TURN] * 8 + [ENV, MEMORY, TASK])
        layout.add_node(LayoutNode(node_id, kind))
        if ids and kind == TURN and rng.random() < 0.9:
            layout.add_edge(_cont(node_id, rng.choice(ids[-15:])))
        elif ids and kind == MEMORY:
            layout.add_edge(LayoutEdge(node_id, rng.choice(ids[-5:]), EdgeKind.DERIVED_FROM))
        for other, pos in seen.items():
            assert layout.position(other) == pos, f"{other} moved when {node_id} arrived"
        seen[node_id] = layout.position(node_id)
        ids.append(node_id)
    positions = [p for n, p in seen.items()]
    lane_nodes = [seen[n] for n in ids if layout.lane_of(n) is not None]
    assert len(set(lane_nodes)) == len(lane_nodes)  # no two lane nodes share a slot
    assert len(positions) == 400


def test_batch_layout_equals_the_live_sequence() -> None:
    nodes = [LayoutNode(n, TURN) for n in "abcdef"] + [LayoutNode("v", ENV)]
    edges = [_cont("b", "a"), _cont("c", "b"), _cont("d", "a"), _cont("e", "d"), _cont("f", "b")]
    batch = lay_out(nodes, edges)
    live = LaneLayout()
    _live(live, "a")
    _live(live, "b", parent="a")
    _live(live, "c", parent="b")
    _live(live, "d", parent="a")
    _live(live, "e", parent="d")
    _live(live, "f", parent="b")
    assert {n: batch.position(n) for n in "abcdef"} == {n: live.position(n) for n in "abcdef"}


def test_pinned_nodes_keep_their_place_and_their_slot() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    layout.add_node(LayoutNode("b", TURN, pinned_at=(999.0, -40.0)))
    moved = layout.add_edge(_cont("b", "a"))
    assert "b" not in moved
    assert layout.position("b") == (999.0, -40.0)
    _live(layout, "c", parent="b")  # continues b's logical slot: lane 0, column 2
    assert layout.lane_of("c") == 0 and layout.column_of("c") == 2
    layout.pin("b", None)
    assert layout.position("b") == (G.column_width, 0.0)


def test_reanchoring_moves_the_node_and_its_subtree_only() -> None:
    layout = LaneLayout()
    _live(layout, "a")
    _live(layout, "b", parent="a")
    _live(layout, "c", parent="b")
    _live(layout, "d", parent="c")
    _live(layout, "r")  # another root, lane 1
    _live(layout, "s", parent="r")
    before = layout.positions()
    assert layout.remove_edge(_cont("c", "b")) == {}  # detached: nothing moves yet
    moved = layout.add_edge(_cont("c", "s"))
    assert set(moved) == {"c", "d"}
    assert layout.lane_of("c") == layout.lane_of("s") and layout.column_of("c") == layout.column_of("s") + 1
    assert layout.column_of("d") == layout.column_of("c") + 1
    for other in "abrs":
        assert layout.position(other) == before[other]
    assert layout.children("b") == [] and layout.children("s") == ["c"]


def test_lay_out_handles_five_thousand_nodes() -> None:
    rng = random.Random(5)
    nodes = [LayoutNode(f"n{i}", TURN) for i in range(5000)]
    edges = [_cont(f"n{i}", f"n{rng.randrange(max(0, i - 50), i)}") for i in range(1, 5000) if rng.random() < 0.97]
    layout = lay_out(nodes, edges)
    assert len(layout) == 5000
    slots = {layout.position(n.node_id) for n in nodes}
    assert len(slots) == 5000
