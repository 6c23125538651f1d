"""The canvas's tidy layout: pure functions over node/edge records, no Qt involved."""

from __future__ import annotations

import random

from app.core.types import EdgeKind, NodeKind
from app.ui.canvas.layout import (
    CARD_HEIGHT,
    CARD_WIDTH,
    NODE_SIZES,
    LayoutEdge,
    LayoutNode,
    TidyGeometry,
    TidyLayout,
    lay_out,
)
from app.ui.canvas.routes import route
from app.ui.canvas.tidy import tidy_cells

G = TidyGeometry()
TURN, TASK, ENV, MEMORY, ARTIFACT = NodeKind.TURN, NodeKind.TASK, NodeKind.ENV, NodeKind.MEMORY, NodeKind.ARTIFACT
Box = tuple[float, float, float, float]


def _cont(src: str, dst: str) -> LayoutEdge:
    return LayoutEdge(src, dst, EdgeKind.CONTINUES)


def _live(layout: TidyLayout, node_id: str, kind: NodeKind = TURN, parent: str | None = None) -> dict:
    """Add a node then its continues edge, as the engine does (node_added, then edge_added)."""
    moved = layout.add_node(LayoutNode(node_id, kind))
    if parent is not None:
        moved.update(layout.add_edge(_cont(node_id, parent)))
    return moved


def _box(layout: TidyLayout, node_id: str, kind: NodeKind) -> Box:
    x, y = layout.position(node_id)
    w, h = NODE_SIZES[kind]
    return x, y, x + w, y + h


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _segment_hits(p: tuple[float, float], q: tuple[float, float], box: Box) -> bool:
    """Whether an axis-parallel segment runs through the inside of the box."""
    (x1, y1), (x2, y2) = p, q
    left, top, right, bottom = box
    if y1 == y2:  # horizontal
        return top < y1 < bottom and min(x1, x2) < right and left < max(x1, x2)
    assert x1 == x2, "routes are made of horizontal and vertical runs"
    return left < x1 < right and min(y1, y2) < bottom and top < max(y1, y2)


def test_a_chain_reads_downwards_and_folds_into_the_next_band() -> None:
    layout = TidyLayout()
    _live(layout, "n0")
    rows = G.rows_for(G.rows + 2)
    for i in range(1, G.rows + 2):
        _live(layout, f"n{i}", parent=f"n{i - 1}")
    assert [layout.position(f"n{i}") for i in range(rows)] == [(0.0, i * G.row_pitch) for i in range(rows)]
    assert layout.position(f"n{rows}") == (G.column_pitch, 0.0)  # the next band, at the top
    assert layout.position(f"n{rows + 1}") == (G.column_pitch, G.row_pitch)
    assert len(layout.conversations()) == 1  # the provisional conversations were given back


def test_long_conversations_fold_into_more_rows_in_steps() -> None:
    assert [G.rows_for(n) for n in (1, 20, 40, 41, 70, 150, 300, 5000)] == [8, 8, 12, 12, 12, 16, 24, 32]
    layout = lay_out([LayoutNode(f"n{i}", TURN) for i in range(70)],
                     [_cont(f"n{i}", f"n{i - 1}") for i in range(1, 70)])
    x, y, w, h = layout.conversation_box("n0")
    assert h == 12 * G.row_pitch - G.channel and w == 6 * G.column_pitch - G.gutter  # 70 turns: 6 bands of 12


def test_branches_stand_beside_their_siblings_as_close_as_the_tree_allows() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    _live(layout, "b", parent="a")
    _live(layout, "c", parent="b")
    _live(layout, "x", parent="a")  # a second continuation of a: the next column, b's row
    _live(layout, "y", parent="x")
    assert layout.position("x") == (G.column_pitch, G.row_pitch)
    assert layout.position("y") == (G.column_pitch, 2 * G.row_pitch)
    moved = _live(layout, "z", parent="b")  # b's second continuation: right of c, clear of x's subtree
    assert layout.position("z")[0] >= G.column_pitch and layout.position("z")[1] == 2 * G.row_pitch
    assert layout.position("z") != layout.position("y")
    assert set(moved) <= {"z", "x", "y"}  # only the subtree right of it made room
    assert layout.children("a") == ["b", "x"] and layout.descendants("a") == ["b", "c", "z", "x", "y"]
    assert not layout.is_branch_start("b") and layout.is_branch_start("x") and layout.is_branch_start("a")


def test_tidy_cells_put_a_parent_above_its_first_child_and_never_two_nodes_in_a_cell() -> None:
    rng = random.Random(3)
    children: dict[str, list[str]] = {"r": []}
    nodes = ["r"]
    for i in range(300):
        parent = rng.choice(nodes[-20:]) if rng.random() < 0.3 else nodes[-1]
        children.setdefault(parent, []).append(f"n{i}")
        children[f"n{i}"] = []
        nodes.append(f"n{i}")
    cells = tidy_cells("r", children)
    assert len(set(cells.values())) == len(cells) == 301
    for parent, kids in children.items():
        if kids:
            assert cells[kids[0]] == (cells[parent][0] + 1, cells[parent][1])
            cols = [cells[k][1] for k in kids]
            assert cols == sorted(cols)  # siblings left to right in arrival order


def test_conversations_stand_side_by_side_in_the_order_they_started() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    _live(layout, "e1", ENV)
    _live(layout, "b")
    _live(layout, "b2", parent="b")
    assert [root for root, _ in layout.conversations()] == ["a", "b"]
    assert layout.position("b")[0] == G.column_pitch + G.conversation_gap and layout.position("b")[1] == 0.0
    assert layout.position("e1")[1] < 0 <= layout.position("a")[1]  # waiting on top
    assert layout.conversation_of("b2") == "b" and layout.conversation_of("e1") is None
    x, y, w, h = layout.conversation_box("b")
    assert (x, y) == layout.position("b") and h == 2 * G.row_pitch - G.channel and w == CARD_WIDTH


def test_satellites_stand_beside_their_card_and_widen_its_column() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    _live(layout, "b", parent="a")
    _live(layout, "r")  # another conversation, to the right
    r_before = layout.position("r")
    _live(layout, "m", MEMORY)
    moved = layout.add_edge(LayoutEdge("m", "b", EdgeKind.DERIVED_FROM))
    _live(layout, "doc", ARTIFACT)
    layout.add_edge(LayoutEdge("doc", "b", EdgeKind.DERIVED_FROM))
    (bx, by), (mx, my), (dx, dy) = layout.position("b"), layout.position("m"), layout.position("doc")
    assert mx == dx == bx + CARD_WIDTH + G.satellite_gap
    assert my == by and dy + NODE_SIZES[ARTIFACT][1] == by + CARD_HEIGHT  # two places, within the row
    assert moved["m"] == (mx, my) and layout.anchor_of("m") == "b" and layout.conversation_of("doc") == "a"
    assert layout.position("r")[0] == r_before[0] + G.satellite_gap + G.satellite_width  # room was made
    assert route(layout, "b", "m") == [(bx + CARD_WIDTH, my + NODE_SIZES[MEMORY][1] / 2), (mx, my + NODE_SIZES[MEMORY][1] / 2)]


def test_satellites_beyond_two_pile_up_on_the_second_place() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    for n in range(6):
        _live(layout, f"m{n}", MEMORY)
        layout.add_edge(LayoutEdge(f"m{n}", "a", EdgeKind.DERIVED_FROM))
    second = layout.position("m1")
    steps = [layout.position(f"m{n}")[0] - second[0] for n in range(1, 6)]
    assert steps == [0, G.pile_step, 2 * G.pile_step, 3 * G.pile_step, 3 * G.pile_step]  # bounded
    assert layout.pile("a") == ["m1", "m2", "m3", "m4", "m5"] and layout.anchor_of("m3") == "a"
    layout.pin("m5", (900.0, 900.0))  # dragged off the pile
    assert layout.pile("a") == ["m1", "m2", "m3", "m4"]
    moved = layout.cycle_pile("a")
    assert layout.pile("a")[-1] == "m3" and set(moved) == {"m1", "m2", "m3", "m4"}


def test_a_spawned_task_branches_off_its_turn() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    _live(layout, "t", TASK)
    layout.add_edge(LayoutEdge("a", "t", EdgeKind.SPAWNED))
    assert layout.parent("t") == "a" and layout.conversation_of("t") == "a"
    assert layout.position("t") == (0.0, G.row_pitch)


def _random_session(seed: int, n: int) -> tuple[list[LayoutNode], list[LayoutEdge]]:
    rng = random.Random(seed)
    nodes: list[LayoutNode] = []
    edges: list[LayoutEdge] = []
    tips: list[str] = []
    for i in range(n):
        kind = rng.choice([TURN] * 8 + [ENV, MEMORY, TASK])
        node_id = f"n{i}"
        nodes.append(LayoutNode(node_id, kind))
        turns = [x.node_id for x in nodes[:-1] if x.kind == TURN]
        if kind == TURN:
            if not tips or rng.random() < 0.08:
                tips.append(node_id)
            else:
                k = rng.randrange(len(tips))
                parent = rng.choice(turns[-30:]) if rng.random() < 0.1 else tips[k]
                edges.append(_cont(node_id, parent))
                tips[k] = node_id
        elif turns and kind in (ENV, MEMORY):
            edges.append(LayoutEdge(node_id, rng.choice(turns[-10:]), EdgeKind.DERIVED_FROM))
        elif turns:
            edges.append(LayoutEdge(rng.choice(turns[-10:]), node_id, EdgeKind.SPAWNED))
        if len(turns) > 5 and rng.random() < 0.05:
            edges.append(LayoutEdge(rng.choice(turns), rng.choice(turns), EdgeKind.REFERENCES))
    return nodes, edges


def test_no_two_cards_overlap_and_no_route_crosses_a_card() -> None:
    nodes, edges = _random_session(11, 400)
    layout = lay_out(nodes, edges)
    boxes = {n.node_id: _box(layout, n.node_id, n.kind) for n in nodes}
    placed = [n.node_id for n in nodes if layout.conversation_of(n.node_id) is not None]
    stack = {n: layout.anchor_of(n) for n in placed if n in layout.pile(layout.anchor_of(n) or "")}
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            same_pile = a in stack and stack.get(b) == stack[a]  # a pile is one stack of cards, by design
            assert same_pile or not _overlap(boxes[a], boxes[b]), (a, b)
    routed = 0
    for edge in edges:
        corners = route(layout, edge.dst, edge.src) if edge.kind == EdgeKind.CONTINUES else route(layout, edge.src, edge.dst)
        if corners is None:
            continue
        routed += 1
        for p, q in zip(corners, corners[1:], strict=False):
            ends = {edge.src, edge.dst}
            piles = {stack[e] for e in ends if e in stack}
            for other in placed:
                if other not in ends and stack.get(other, "-") not in piles:  # into a pile: through its stack
                    assert not _segment_hits(p, q, boxes[other]), (edge, other, p, q)
    assert routed > len(edges) * 0.8


def test_a_new_turn_moves_nothing_in_its_own_conversation_above_or_left_of_it() -> None:
    nodes, edges = _random_session(5, 300)
    layout = lay_out(nodes, edges)
    last_root = layout.conversations()[-1][0]
    tip = layout.conversations()[-1][1][-1]
    moved = _live(layout, "new", parent=tip)
    assert set(moved) == {"new"}, "a turn at the end of the newest conversation moved another card"
    before = layout.positions()
    older = layout.conversations()[0][1][-1]
    moved = _live(layout, "new2", parent=older)
    first = {m for m in layout.conversations()[0][1]} | {s for m in layout.conversations()[0][1] for s in layout.satellites_of(m)}
    for node_id in moved:
        if node_id != "new2" and node_id not in first:
            assert layout.position(node_id)[1] == before[node_id][1]  # other conversations only slide sideways
    assert layout.conversation_of("new") == last_root


def test_batch_layout_equals_the_live_sequence() -> None:
    nodes, edges = _random_session(7, 200)
    batch = lay_out(nodes, edges)
    live = TidyLayout()
    order = {n.node_id: i for i, n in enumerate(nodes)}
    buckets: dict[int, list[LayoutEdge]] = {}
    for e in edges:
        buckets.setdefault(max(order[e.src], order[e.dst]), []).append(e)
    for i, node in enumerate(nodes):
        live.add_node(node)
        for e in buckets.get(i, ()):
            live.add_edge(e)
    assert batch.positions() == live.positions()


def test_pinned_nodes_keep_their_place_and_their_cell() -> None:
    layout = TidyLayout()
    _live(layout, "a")
    layout.add_node(LayoutNode("b", TURN, pinned_at=(999.0, -40.0)))
    moved = layout.add_edge(_cont("b", "a"))
    assert "b" not in moved and layout.position("b") == (999.0, -40.0)
    _live(layout, "c", parent="b")  # continues b's cell: two rows down
    assert layout.position("c") == (0.0, 2 * G.row_pitch)
    assert route(layout, "b", "c") is None  # a pinned end: the canvas draws a curve
    layout.pin("b", None)
    assert layout.position("b") == (0.0, G.row_pitch)


def test_reanchoring_moves_the_node_and_its_subtree() -> None:
    layout = TidyLayout()
    for node, parent in (("a", None), ("b", "a"), ("c", "b"), ("d", "c"), ("r", None), ("s", "r")):
        _live(layout, node, parent=parent)
    before = layout.positions()
    layout.remove_edge(_cont("c", "b"))  # detached: a conversation of its own for now
    assert layout.conversation_of("d") == "c"
    moved = layout.add_edge(_cont("c", "s"))
    assert {"c", "d"} <= set(moved) and layout.conversation_of("d") == "r"
    assert layout.position("c") == (layout.position("s")[0], layout.position("s")[1] + G.row_pitch)
    for other in "abrs":
        assert layout.position(other) == before[other]
    assert layout.children("b") == [] and layout.children("s") == ["c"]
    assert [root for root, _ in layout.conversations()] == ["a", "r"]


def test_lay_out_handles_five_thousand_nodes() -> None:
    rng = random.Random(5)
    nodes = [LayoutNode(f"n{i}", TURN) for i in range(5000)]
    edges = [_cont(f"n{i}", f"n{rng.randrange(max(0, i - 50), i)}") for i in range(1, 5000) if rng.random() < 0.97]
    layout = lay_out(nodes, edges)
    assert len(layout) == 5000
    assert len({layout.position(n.node_id) for n in nodes}) == 5000
