"""Answer again on a turn that started a task, in the window on the real Engine (SQLite + LanceDB,
scripted model): the task gets a new version, not a second task node beside the first — one task
node shows at a time with its own result, and flipping the answer's versions flips the task's."""

from __future__ import annotations

from app.config import Settings
from app.core.session import versions
from app.core.types import NodeKind
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until

TASK = "Write a project plan for migrating the billing service to PostgreSQL."


def _shown(window: MainWindow, kind: NodeKind) -> list[str]:
    scene = window.scene
    return [n.node_id for n in window.controller.state.graph.nodes(kind)
            if scene.item(n.node_id) is not None and scene.item(n.node_id).isVisible()]


def test_answer_again_on_a_task_turn_makes_a_version_of_the_task(qtbot, aloop, settings: Settings) -> None:
    window = MainWindow(settings, fake_services(["Plan: one, two, three.", "Plan: first, then second."]))
    qtbot.addWidget(window)
    window.show()
    c, panel = window.controller, window.inspector.turn
    assert drive(aloop, c.load())
    c.submit(TASK)
    drive(aloop, until(lambda: len(c.state.turn_order) == 1 and not c.busy(), 30, "the task's answer"))
    first = c.state.turn_order[0]
    graph = c.state.graph
    [task_node] = [n.node_id for n in graph.nodes(NodeKind.TASK)]
    drive(aloop, until(lambda: len(_shown(window, NodeKind.ARTIFACT)) == 1, 10, "the first result"))

    window._select_turn(first, drive(aloop, c.engine.turn_record(first)))
    panel.again_button.click()
    drive(aloop, until(lambda: len(c.state.turn_order) == 2 and not c.busy(), 30, "the second version"))
    second_node = c.state.node_of(c.state.turn_order[1])
    first_node = c.state.node_of(first)
    assert versions.versions(graph, first_node) == [first_node, second_node]
    drive(aloop, until(lambda: len(_shown(window, NodeKind.ARTIFACT)) == 1, 10, "one result shown"))
    [second_task] = _shown(window, NodeKind.TASK)  # one task node on the canvas, not two side by side
    assert second_task != task_node and graph.node(second_task).attrs.get(versions.VERSION_OF) == task_node
    assert versions.versions(graph, task_node) == [task_node, second_task]
    assert window.scene.item(second_task).pos() == window.scene.item(task_node).pos()  # in its place
    [artifact] = _shown(window, NodeKind.ARTIFACT)
    assert graph.node(artifact).attrs.get("version") == 2 or "v2" in graph.node(artifact).label

    window._select_turn(c.state.turn_order[1], drive(aloop, c.engine.turn_record(c.state.turn_order[1])))
    panel.older.click()  # flip back to the first version: its task and result show again
    drive(aloop, until(lambda: c.state.graph.node(first_node).attrs.get(versions.HIDDEN) is False, 10, "flipped"))
    drive(aloop, until(lambda: _shown(window, NodeKind.TASK) == [task_node], 10, "the first task shown"))
    [artifact] = _shown(window, NodeKind.ARTIFACT)
    assert "v1" in graph.node(artifact).label
