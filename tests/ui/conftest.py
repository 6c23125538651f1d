"""Fixtures for the desktop tests: a qasync loop on pytest-qt's QApplication, and ways to wait.

The app runs engine coroutines on Qt's event loop through qasync; a test drives that loop with
``drive(loop, coro)``, which also processes Qt events (painting, timers, signals) meanwhile.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
import qasync
from PySide6.QtWidgets import QApplication

from app.config import Settings
from app.core.engine.facade import Engine
from app.ui.app import run_until_done
from app.ui.gc_guard import MainThreadGC
from app.ui.services import Services
from tests.conftest import engine_in

T = TypeVar("T")


@pytest.fixture(scope="session", autouse=True)
def gc_on_the_ui_thread(qapp: QApplication) -> Iterator[None]:
    """Cyclic garbage is collected on the UI thread only, as in the app (``app.ui.gc_guard``):
    the engine's worker threads would otherwise destroy Qt objects left in cycles by a test."""
    guard = MainThreadGC(qapp)
    guard.start()
    yield
    guard.stop()


@pytest.fixture(autouse=True)
def collect_after_each_test() -> Iterator[None]:
    """Collect what a test left behind here, between tests, rather than in a later one."""
    yield
    gc.collect()


@pytest.fixture
def aloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()  # also joins qasync's default executor threads
    asyncio.set_event_loop(None)


def drive(loop: asyncio.AbstractEventLoop, coro: Awaitable[T], timeout: float = 120.0) -> T:
    """Run ``coro`` on the qasync loop (Qt events are processed meanwhile), as the app does."""
    return run_until_done(loop, asyncio.wait_for(coro, timeout))


async def until(predicate: Callable[[], Any], timeout: float = 120.0, what: str = "condition") -> Any:
    """Wait on the loop until ``predicate()`` is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def answer(window: Any, text: str, *, memory: bool = True) -> None:
    """Type ``text`` into the window's composer, send it, and wait for its answer (and, with
    ``memory``, for the background memory writer)."""
    c = window.controller
    before = len(c.state.turn_order)
    window.composer.edit.setPlainText(text)
    window.composer.send.click()
    await until(lambda: len(c.state.turn_order) > before and not c.busy(), 60, "the answer")
    if memory:
        await c.engine.memory_idle()


def fake_services(replies: list[str] | None = None, *, delay: float = 0.0) -> Services:
    """Services whose engine runs on real SQLite + LanceDB with the scripted model and embedder."""
    from app import desktop

    def build(settings: Settings, progress: Callable[[str], None]) -> Engine:
        progress("opening the store and loading the chat model scripted")
        # a task answers in one stream here (its plan of steps and their turns: tests/engine/test_agent.py)
        return engine_in(settings.data_dir, replies or ["Noted [1]."], delay=delay, budget=settings.default_budget,
                         task_steps="off")

    return replace(desktop.services(), build_engine=build)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load(tmp_path / "pcm-data")


def shown_canvas(qtbot: Any, graph: Any, size: tuple[int, int] = (1000, 700)) -> tuple[Any, Any]:
    """A fresh ``CanvasScene`` showing ``graph`` in a shown, exposed ``CanvasView`` of ``size``."""
    from app.ui.canvas.scene import CanvasScene
    from app.ui.canvas.view import CanvasView

    scene = CanvasScene()
    view = CanvasView(scene)
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    scene.set_graph(graph)
    return scene, view
