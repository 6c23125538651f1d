"""The canvas's topic filter: which nodes a topic keeps (pure, on a hand-made session), and the
topic chooser of the real window after a few turns (real SQLite + LanceDB, scripted model)."""

from __future__ import annotations

from app.config import Settings
from app.core.memory.topics import TopicIndex
from app.core.session.state import SessionState
from app.core.types import EdgeKind, GraphEdge, GraphNode, Message, NodeKind, Role
from app.ui.canvas.topic_filter import session_topics, topic_label, topic_messages, topic_nodes
from app.ui.window import MainWindow
from tests.ui.conftest import answer, drive, fake_services, until


def _session() -> SessionState:
    """t1 → t2 → t3 on a branch; t2 spawned task k (with a result r); t4 continues k; memories m1 (of
    t1) and m3 (of t3); t5 starts a branch of its own."""
    state = SessionState("s")
    for n, text in enumerate(["Plan the Kubernetes move", "Sort the photos", "Kubernetes pods restart?",
                              "Which Kubernetes version?", "Bake bread"], start=1):
        state.add_message(Message(message_id=f"u{n}", role=Role.USER, content=text, turn_id=f"turn{n}"))
        state.add_node(GraphNode(node_id=f"t{n}", kind=NodeKind.TURN, ref_id=f"turn{n}"))
    for node_id, kind in (("k", NodeKind.TASK), ("r", NodeKind.ARTIFACT), ("m1", NodeKind.MEMORY),
                          ("m3", NodeKind.MEMORY), ("e", NodeKind.ENV)):
        state.add_node(GraphNode(node_id=node_id, kind=kind))
    for src, dst, kind in (("t2", "t1", EdgeKind.CONTINUES), ("t3", "t2", EdgeKind.CONTINUES),
                           ("t2", "k", EdgeKind.SPAWNED), ("t4", "k", EdgeKind.CONTINUES),
                           ("r", "k", EdgeKind.DERIVED_FROM), ("m1", "t1", EdgeKind.DERIVED_FROM),
                           ("m3", "t3", EdgeKind.DERIVED_FROM), ("e", "t4", EdgeKind.REFERENCES)):
        state.graph.add_edge(GraphEdge(src=src, dst=dst, kind=kind))
    return state


def test_a_topic_keeps_its_turns_the_tasks_holding_them_and_what_they_left() -> None:
    state = _session()
    index = TopicIndex()
    for mid in state.order:
        index.observe("s", mid, state.messages[mid].text, "2026-01-01T00:00:00Z")
    index.observe("other", "x1", "Is Kubernetes hard to learn?", "2026-01-01T00:00:00Z")
    rows = session_topics(index, "s")
    assert [(name, n) for _, name, n in rows][0] == ("Kubernetes", 3)  # the most mentioned first
    assert topic_label("Kubernetes", 3) == "Kubernetes (3)"
    kubernetes = rows[0][0]
    assert topic_messages(index, kubernetes, "s") == ["u1", "u3", "u4"]  # not the other session's
    # Turns that mention it; task k holds t4 (t2 between t1 and t3 stays dimmed), k's result, and
    # the memories of t1 and t3. The env event and the unrelated turns are left out.
    assert topic_nodes(state, ["u1", "u3", "u4"]) == {"t1", "t3", "t4", "k", "r", "m1", "m3"}
    assert topic_nodes(state, ["u2"]) == {"t2", "k", "r"}  # the task it spawned, and its result
    assert topic_nodes(state, ["u5", "nope"]) == {"t5"}


def test_choosing_a_topic_dims_the_turns_that_do_not_mention_it(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Noted."] * 4))
    qtbot.addWidget(window)
    window.show()
    c, bar, scene = window.controller, window.toolbar, window.scene
    assert drive(aloop, c.load())
    assert not bar.topic.isEnabled() and bar.topic.currentText() == "No topics yet"
    for text in ("We decided to run the billing API on Kubernetes.",
                 "Explain how Quicksort partitions an array in Python.",
                 "Does Kubernetes restart a failed pod by itself?"):
        drive(aloop, answer(window, text))
    drive(aloop, until(lambda: bar.topic.count() > 1 and "Kubernetes (2)" in
                       [bar.topic.itemText(n) for n in range(bar.topic.count())], 30, "the topics listed"))
    assert bar.topic.itemText(0) == "All topics" and bar.topic.itemText(1) == "Kubernetes (2)"
    state = c.state
    deploy, sort, pods = (state.node_of(t) for t in state.turn_order)
    [memory] = [n.node_id for n in state.graph.nodes() if n.kind == NodeKind.MEMORY]  # the decision, of turn 1

    bar.topic.setCurrentIndex(1)
    assert [scene.is_dimmed(n) for n in (deploy, sort, pods, memory)] == [False, True, False, False]
    window.search.setText("restart")  # combined with the text filter
    assert [scene.is_dimmed(n) for n in (deploy, sort, pods)] == [True, True, False]
    window.search.clear()
    window.kind_actions[NodeKind.MEMORY].setChecked(False)  # and with the kind toggles
    assert scene.is_dimmed(memory) and not scene.is_dimmed(deploy)
    window.kind_actions[NodeKind.MEMORY].setChecked(True)

    drive(aloop, answer(window, "How many replicas should Kubernetes keep for billing?"))
    new = state.node_of(state.turn_order[-1])
    drive(aloop, until(lambda: bar.topic.currentText() == "Kubernetes (3)", 30, "the list read again"))
    assert not scene.is_dimmed(new) and scene.is_dimmed(sort)  # the chosen topic stays chosen
    bar.topic.setCurrentIndex(0)
    assert not any(scene.is_dimmed(n) for n in scene.node_ids())

    bar.topic.setCurrentIndex(1)
    drive(aloop, c.open_session(None))  # a new session: its own topics, nothing chosen
    drive(aloop, until(lambda: not bar.topic.isEnabled(), 30, "the new session's topics"))
    assert bar.topic.currentIndex() == 0 and bar._nodes is None
    window.close()
    drive(aloop, until(lambda: window._shut, 30, "shutdown"))
