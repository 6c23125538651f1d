"""Pan/zoom frame-time benchmark of the canvas (``pcm bench ui`` calls ``measure_pan_zoom``).

A synthetic session graph (turn-heavy, branching, with tasks, env, memory and artifact nodes) is
shown in a ~1280 x 800 ``CanvasView``; the view is then panned and zoomed frame by frame across
every level of detail, from the whole graph down to readable cards and back. Two phases:

- frames: each step is applied and the viewport repainted synchronously (``repaint()``); the time
  of step + repaint is one frame;
- loop lag: the same steps are driven by an 8 ms timer through the event loop (``update()``) while
  a 5 ms precise timer measures how late it fires.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QElapsedTimer, QEventLoop, QPointF, Qt, QTimer
from PySide6.QtWidgets import QApplication

from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, GraphEdge, GraphNode, NodeKind
from app.ui.canvas.scene import CanvasScene
from app.ui.canvas.view import CanvasView

_WORDS = ("plan", "check", "the", "budget", "draft", "report", "compare", "data", "why", "fix", "test",
          "release", "notes", "summary", "deploy", "error", "feed", "file", "update", "review")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize()


class _SyntheticGraph:
    """Builds a random branching session graph silently (no signals), one node at a time."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.graph = SessionGraph("bench")
        self.turns: list[str] = []
        self.tip: str | None = None

    def add(self, node_kind: NodeKind, label: str, **attrs: object) -> str:
        node = GraphNode(kind=node_kind, label=label, attrs=dict(attrs))
        self.graph.add_node_silently(node)
        return node.node_id

    def link(self, src: str, dst: str, kind: EdgeKind) -> None:
        self.graph.add_edge_silently(GraphEdge(src=src, dst=dst, kind=kind))

    def add_turn(self) -> None:
        """A turn continuing the tip (or an older turn: a branch), now and then merging one."""
        rng, turns = self.rng, self.turns
        node_id = self.add(NodeKind.TURN, _sentence(rng, rng.randint(3, 9)), ambiguous=rng.random() < 0.03,
                           checkpoint=rng.random() < 0.02)
        roll = rng.random()
        if turns and roll > 0.04:
            parent = rng.choice(turns[-120:]) if roll < 0.16 else self.tip
            if parent is not None:
                self.link(node_id, parent, EdgeKind.CONTINUES)
        turns.append(node_id)
        self.tip = node_id
        if rng.random() < 0.02 and len(turns) > 10:
            self.link(node_id, rng.choice(turns[-60:-1]), EdgeKind.MERGES)

    def add_other(self, i: int, r: float) -> None:
        """A task, env, memory or artifact node tied to a recent turn (``r`` picks which)."""
        rng, turns = self.rng, self.turns
        if r < 0.79:
            status = rng.choice(("active", "complete", "blocked"))
            node_id = self.add(NodeKind.TASK, "Task: " + _sentence(rng, 4), status=status, progress=rng.random())
            self.link(rng.choice(turns[-40:]), node_id, EdgeKind.SPAWNED)
            if rng.random() < 0.3:
                self.link(rng.choice(turns[-20:]), node_id, EdgeKind.RESOLVES)
        elif r < 0.85:
            node_id = self.add(NodeKind.ENV, f"feed item {i}", kind=rng.choice(("file", "feed", "api")))
            if rng.random() < 0.5:
                self.link(rng.choice(turns[-30:]), node_id, EdgeKind.REFERENCES)
        elif r < 0.92:
            node_id = self.add(NodeKind.MEMORY, "note: " + _sentence(rng, 3))
            self.link(node_id, rng.choice(turns[-30:]), EdgeKind.DERIVED_FROM)
        else:
            node_id = self.add(NodeKind.ARTIFACT, "answer.md")
            self.link(node_id, turns[-1], EdgeKind.DERIVED_FROM)


def synthetic_graph(n_nodes: int = 5000, seed: int = 7) -> SessionGraph:
    """A branching session graph of about ``n_nodes`` nodes and as many edges, built silently."""
    maker = _SyntheticGraph(seed)
    for i in range(n_nodes):
        r = maker.rng.random()
        if r < 0.74 or not maker.turns:
            maker.add_turn()
        else:
            maker.add_other(i, r)
    return maker.graph


def _percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return pick(0.50), pick(0.95), ordered[-1]


def _densest_point(scene: CanvasScene, cell: tuple[float, float] = (6400.0, 4000.0)) -> QPointF:
    """The centre of the screen-sized (at zoom 0.2) cell holding the most nodes."""
    counts: dict[tuple[int, int], int] = {}
    for node_id in scene.node_ids():
        item = scene.item(node_id)
        if item is not None:
            key = (int(item.x() // cell[0]), int(item.y() // cell[1]))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return QPointF(0.0, 0.0)
    cx, cy = max(counts, key=lambda k: counts[k])
    return QPointF((cx + 0.5) * cell[0], (cy + 0.5) * cell[1])


def _steps(view: CanvasView, frames: int, start: float, stop: float) -> list[Callable[[], None]]:
    """Alternating pan and zoom steps: the zoom goes start -> stop -> start (log scale)."""
    zooms = max(1, frames // 2)
    half = max(1, zooms // 2)
    factor = (stop / start) ** (1.0 / half)
    steps: list[Callable[[], None]] = []
    for i in range(frames):
        if i % 2 == 0:
            angle = i * 0.37
            dx, dy = 40 * math.cos(angle), 40 * math.sin(angle)
            steps.append(lambda dx=dx, dy=dy: view.pan_by(dx, dy))
        else:
            f = factor if (i // 2) < half else 1.0 / factor
            steps.append(lambda f=f: view.zoom_by(f))
    return steps


def measure_pan_zoom(n_nodes: int = 5000, frames: int = 300) -> dict[str, float]:
    """Build a synthetic SessionGraph with branches (turn-heavy, some task/env/memory/artifact),
    show a CanvasView of ~1280x800, drive pan and zoom programmatically frame by frame (pan and
    zoom steps alternate across all levels of detail, each frame forced with
    ``viewport().repaint()``), and return frame_ms_p50/p95/max, loop_lag_ms_p50/p95/max (lag of
    a 5 ms QTimer while the same pan/zoom runs through the event loop), layout_ms (set_graph
    time), body_ms (giving every turn an answer), n_nodes, n_edges, and the frame p95 in the
    overview (far) and item (near) regimes."""
    graph = synthetic_graph(n_nodes)
    app, scene, view = shown_canvas()
    t0 = time.perf_counter()
    scene.set_graph(graph)
    layout_ms = (time.perf_counter() - t0) * 1000
    rng = random.Random(3)
    t0 = time.perf_counter()
    for node in graph.nodes(NodeKind.TURN):
        scene.set_node_body(node.node_id, _sentence(rng, rng.randint(10, 80)))
    body_ms = (time.perf_counter() - t0) * 1000
    centre = _densest_point(scene)  # the worst place to pan and zoom: the most cards per screen
    view.fit_all()
    start = view.scale_factor()
    view.set_zoom(start, centre)
    app.processEvents()

    frame_ms: list[float] = []
    regimes: dict[bool, list[float]] = {True: [], False: []}
    for step in _steps(view, frames, start, 1.5):
        t = time.perf_counter()
        step()
        view.viewport().repaint()
        dt = (time.perf_counter() - t) * 1000
        frame_ms.append(dt)
        regimes[view.overview_active()].append(dt)

    view.set_zoom(start, centre)
    app.processEvents()
    lags = _loop_lag(view, _steps(view, frames, start, 1.5))

    f50, f95, fmax = _percentiles(frame_ms)
    l50, l95, lmax = _percentiles(lags)
    result = {
        "frame_ms_p50": f50, "frame_ms_p95": f95, "frame_ms_max": fmax,
        "loop_lag_ms_p50": l50, "loop_lag_ms_p95": l95, "loop_lag_ms_max": lmax,
        "layout_ms": layout_ms, "body_ms": body_ms,
        "n_nodes": float(len(graph)), "n_edges": float(len(graph.edges())),
        "frames": float(len(frame_ms)),
        "frame_ms_p95_overview": _percentiles(regimes[True])[1],
        "frame_ms_p95_items": _percentiles(regimes[False])[1],
    }
    close_canvas(app, scene, view)
    return result


def shown_canvas(size: tuple[int, int] = (1280, 800)) -> tuple[QApplication, CanvasScene, CanvasView]:
    """A shown ``CanvasView`` of ``size`` (a desktop window's canvas) on a new scene."""
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    scene = CanvasScene()
    view = CanvasView(scene)
    view.resize(*size)
    view.show()
    app.processEvents()
    return app, scene, view


def close_canvas(app: QApplication, scene: CanvasScene, view: CanvasView) -> None:
    """Empty the scene and let the view and scene go."""
    scene.set_graph(None)
    view.close()
    view.deleteLater()
    scene.deleteLater()
    app.processEvents()


def _loop_lag(view: CanvasView, steps: list[Callable[[], None]]) -> list[float]:
    """Run ``steps`` from an 8 ms timer (painting via ``update()``) and return how late (ms) a
    5 ms precise timer fired meanwhile."""
    loop = QEventLoop()
    clock = QElapsedTimer()
    lags: list[float] = []
    last = [0.0]
    pending = list(reversed(steps))

    def probe() -> None:
        now = clock.nsecsElapsed() / 1e6
        lags.append(max(0.0, now - last[0] - 5.0))
        last[0] = now

    def drive() -> None:
        if not pending:
            loop.quit()
            return
        pending.pop()()
        view.viewport().update()

    probe_timer = QTimer()
    probe_timer.setTimerType(Qt.TimerType.PreciseTimer)
    probe_timer.setInterval(5)
    probe_timer.timeout.connect(probe)
    drive_timer = QTimer()
    drive_timer.setTimerType(Qt.TimerType.PreciseTimer)
    drive_timer.setInterval(8)
    drive_timer.timeout.connect(drive)
    clock.start()
    probe_timer.start()
    drive_timer.start()
    QTimer.singleShot(120_000, loop.quit)  # a safety net, never reached in practice
    loop.exec()
    probe_timer.stop()
    drive_timer.stop()
    return lags[1:]


if __name__ == "__main__":  # a quick manual run: python -m app.ui.canvas.bench
    for key, value in measure_pan_zoom().items():
        print(f"{key:24s} {value:10.2f}")

