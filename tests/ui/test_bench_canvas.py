"""``pcm bench canvas``: the legibility figures of a laid out session, on the real scene and view."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from app.bench_canvas import conversations_for, generated_messages
from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.cards import CardText
from app.ui.canvas.legibility import measure

KEYS = ("overlaps", "edges_through_cards", "readable_titles", "layout_ms", "moved_on_add", "coverage", "scene_ms")


def test_generated_sessions_interleave_three_to_eight_conversations_with_branches() -> None:
    messages, parents = generated_messages(200)
    roots = [m for m in messages if parents[m.message_id] is None]
    assert len(messages) == 200 and len(roots) == conversations_for(200) == 6
    order = {m.message_id: i for i, m in enumerate(messages)}
    branches = [m for i, m in enumerate(messages) if parents[m.message_id] is not None
                and any(parents[o.message_id] == parents[m.message_id] for o in messages[:i])]
    assert branches and all(order[p] < order[m] for m, p in parents.items() if p is not None)
    assert [conversations_for(n) for n in (20, 60, 200, 1000)] == [3, 4, 6, 8]


def test_measure_reports_the_legibility_of_a_session(qtbot) -> None:
    g = SessionGraph("s")
    texts = {}
    for c in range(3):
        for t in range(12):
            node = GraphNode(node_id=f"c{c}t{t}", kind=NodeKind.TURN, label=f"c{c} t{t}")
            g.add_node(node)
            texts[node.node_id] = CardText(f"Topic {c} step {t}", f"What about step {t} of topic {c}?")
            if t:
                g.add_edge(GraphEdge(src=node.node_id, dst=f"c{c}t{t - 1 if t % 5 else 0}", kind=EdgeKind.CONTINUES))
        memory = GraphNode(node_id=f"m{c}", kind=NodeKind.MEMORY, label="a fact")
        g.add_node(memory)
        g.add_edge(GraphEdge(src=memory.node_id, dst=f"c{c}t3", kind=EdgeKind.DERIVED_FROM))
    report = measure(g, texts, adds=3)
    assert all(key in report for key in KEYS)
    assert report["overlaps"] == 0 and report["edges_through_cards"] == 0
    assert report["turns"] == 36 and report["conversations"] == 3 and report["readable_titles"] == 1.0
    assert 0 < report["coverage"] <= 1 and report["adds"] == 3 and len(g.nodes()) == 39 + 3
    assert report["moved_on_add"] <= report["card_height"]


def test_pcm_bench_canvas_prints_the_figures_as_json(tmp_path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run([sys.executable, "-m", "app.cli", "--data-dir", str(tmp_path), "bench", "canvas",
                             "--turns", "20", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    (report,) = json.loads(result.stdout)
    assert report["generated"] == 20 and report["turns"] == 20 and all(key in report for key in KEYS)
    assert report["overlaps"] == 0 and report["edges_through_cards"] == 0
