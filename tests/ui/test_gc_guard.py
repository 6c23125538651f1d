"""Cyclic garbage collection stays on the UI thread while the guard runs (app.ui.gc_guard)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication

from app.ui.gc_guard import MainThreadGC


@pytest.fixture
def alone(qapp: QApplication) -> Iterator[None]:
    """Stop the suite's own guard so the test sees only the one it starts."""
    suite = qapp.findChild(MainThreadGC)
    if suite is not None:
        suite.stop()
    gc.enable()
    yield
    if suite is not None:
        suite.start()


class _Cycle:
    me: object
    qt: QObject


def _collections_by_thread() -> tuple[list[str], object]:
    seen: list[str] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(threading.current_thread().name)

    gc.callbacks.append(callback)
    return seen, callback


def _allocate_in_a_worker(n: int) -> None:
    def churn() -> None:
        keep = [[i] for i in range(n)]  # container allocations trip the generation-0 threshold
        del keep

    worker = threading.Thread(target=churn, name="worker")
    worker.start()
    worker.join()


def test_without_the_guard_a_worker_thread_runs_collections(alone: None) -> None:
    seen, callback = _collections_by_thread()
    try:
        _allocate_in_a_worker(50_000)
    finally:
        gc.callbacks.remove(callback)
    assert "worker" in seen  # the hazard the guard exists for


def test_with_the_guard_qt_cycles_die_on_the_ui_thread(qtbot, alone: None) -> None:
    guard = MainThreadGC(interval_ms=10)
    guard.start()
    seen, callback = _collections_by_thread()
    destroyed_on: list[str] = []
    try:
        assert not gc.isenabled()
        holder = _Cycle()
        holder.me, holder.qt = holder, QObject()  # a Qt object kept alive only by a reference cycle
        weakref.finalize(holder, lambda: destroyed_on.append(threading.current_thread().name))
        del holder
        _allocate_in_a_worker(50_000)
        assert "worker" not in seen and not destroyed_on
        # live allocations: generation 0 is due (past the threshold in force, which the app's
        # wiring raises: ``app.main.YOUNG_COLLECTION``)
        due = gc.get_threshold()[0] + 1000
        ballast = [[i] for i in range(due)]
        qtbot.waitUntil(lambda: bool(destroyed_on), timeout=5000)  # the timer collects on this thread
    finally:
        gc.callbacks.remove(callback)
        guard.stop()
    assert len(ballast) == due
    assert destroyed_on == [threading.main_thread().name]
    assert set(seen) == {threading.main_thread().name}
    assert gc.isenabled()  # given back as it was


@pytest.mark.parametrize("full_every_s, full_expected", [(3600.0, False), (0.0, True)])
def test_full_collections_are_spaced_by_full_every_s(alone: None, full_every_s: float, full_expected: bool) -> None:
    original = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # every generation due after a few allocations
    guard = MainThreadGC(full_every_s=full_every_s)
    guard.start()
    try:
        generations, kept = [], []
        for _ in range(20):
            kept.append([[i] for i in range(100)])  # live allocations count towards generation 0
            generations.append(guard.check())
    finally:
        guard.stop()
        gc.set_threshold(*original)
    assert (2 in generations) is full_expected
    assert 1 in generations or full_expected  # held back from 2, the oldest due is collected


def test_the_app_survives_qt_garbage_made_while_workers_allocate(tmp_path) -> None:
    """The crash the guard prevents, as a process: dropped qasync loops (their timer objects) and
    widgets in reference cycles, while a worker thread allocates. Without the guard this exits
    with a segfault (139) after "Timers cannot be stopped from another thread"."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "churn.py"
    script.write_text(
        "import asyncio, threading\n"
        "import qasync\n"
        "from PySide6.QtCore import QTimer\n"
        "from PySide6.QtWidgets import QWidget\n"
        "from app.ui.app import application\n"
        "app = application()\n"
        "def churn():\n"
        "    for _ in range(100):\n"
        "        keep = [[i] for i in range(20000)]\n"
        "for _ in range(20):\n"
        "    loop = qasync.QEventLoop(app)\n"
        "    asyncio.set_event_loop(loop)\n"
        "    async def work():\n"
        "        loop.call_later(5, lambda: None)\n"
        "        widget = QWidget(); widget.cycle = widget\n"
        "        QTimer(widget).start(1000)\n"
        "        await asyncio.sleep(0.01)\n"
        "    loop.run_until_complete(work())\n"
        "    loop.close(); asyncio.set_event_loop(None)\n"
        "    del loop\n"
        "    worker = threading.Thread(target=churn); worker.start()\n"
        "    while worker.is_alive():\n"
        "        app.processEvents(); worker.join(0.01)\n"
        "print('survived')\n",
        encoding="utf-8",
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "survived" in proc.stdout
    assert "another thread" not in proc.stderr
