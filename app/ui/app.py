"""Start the desktop app: a QApplication, the window at once, the engine loading behind it.

``run_app`` drives everything from one loop: qasync runs asyncio on Qt's event loop, so engine
coroutines and widgets share the UI thread while blocking work sits on the engine's executors
(DESIGN.md §3).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import qasync
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.config import RESOURCES_DIR, Settings
from app.startup import process_age_s
from app.ui.gc_guard import MainThreadGC
from app.ui.services import Services
from app.ui.single_instance import InstanceGuard
from app.ui.theme import apply_theme
from app.ui.window import MainWindow


def application() -> QApplication:
    """The process's QApplication (created once), with cyclic garbage collection kept on its
    thread (``gc_guard``)."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        app = QApplication(sys.argv[:1])
    if app.findChild(MainThreadGC) is None:
        MainThreadGC(app).start()
    app.setApplicationName("PCM Canvas")  # also the X11 WM_CLASS class: the desktop entry's StartupWMClass
    app.setOrganizationName("pcm-canvas")
    app.setDesktopFileName("pcm-canvas")  # the desktop entry's name (pcm-canvas.desktop): Wayland's app id
    icon = RESOURCES_DIR / "icons" / "pcm-canvas.svg"
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))
    return app


T = TypeVar("T")

#: Threads of the loop's default executor: model loading, sensor start/stop, export files.
DEFAULT_WORKERS = 4


def run_on_qt_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a qasync loop over the QApplication's event loop.

    Not ``qasync.run``: on Python 3.11 it installs a global event-loop policy, so every
    ``asyncio.new_event_loop()`` in the process becomes a Qt loop — including LanceDB's private
    background loop thread, which then fails with "attached to a different loop".

    The loop's default executor (``run_in_executor(None, …)``, ``asyncio.to_thread``) is a named
    thread pool set here, not qasync's implicit one (DESIGN.md §3); it is shut down with the loop.
    """
    loop = qasync.QEventLoop(application())
    executor = ThreadPoolExecutor(max_workers=DEFAULT_WORKERS, thread_name_prefix="pcm-default")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    try:
        return run_until_done(loop, coro)
    finally:
        loop.close()
        executor.shutdown(wait=True, cancel_futures=True)
        asyncio.set_event_loop(None)


def run_until_done(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[T]) -> T:
    """Run the qasync ``loop`` until ``awaitable`` is done and return its result.

    Not ``loop.run_until_complete``: qasync's version processes Qt events once more after the
    loop has stopped, when asyncio has no running loop. A task stepped there fails in
    ``get_running_loop`` or binds an ``asyncio.Queue`` to no loop (a stream then dies with
    "bound to a different event loop").
    """
    task = asyncio.ensure_future(awaitable, loop=loop)
    task.add_done_callback(lambda _: loop.stop())
    loop.run_forever()
    if not task.done():
        raise RuntimeError("the event loop stopped before the work was done")
    return task.result()


def run_app(settings: Settings, services: Services, *, session_id: str | None = None,
            self_test: str | None = None, open_file: Path | None = None) -> int:
    """Show the main window and run until it is closed; returns the exit status.

    With ``open_file`` (an exported session) that document is imported and opened once the
    models are loaded.

    One window per data folder (``single_instance``): when another window holds
    ``settings.data_dir``, it is shown (and handed ``open_file``) and this call returns 0 at once.

    With ``self_test`` (an input text) the window loads, answers that input on the configured
    models, prints one line about it and closes: exit status 0 when an answer was recorded.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = application()
    guard = InstanceGuard(settings.data_dir)
    if not guard.claim():  # another window has this data folder: it shows itself (and opens the file)
        if guard.hand_over(open_file):
            print(f"pcm-canvas: PCM Canvas is already open on {settings.data_dir}; showed that window"
                  + (f" and handed it {open_file.name}" if open_file else ""), file=sys.stderr)
            return 0
        print(f"pcm-canvas: error: another PCM Canvas holds {settings.data_dir} but did not answer; "
              "close it, or start with another --data-dir", file=sys.stderr)
        return 1
    try:
        return _run_window(app, settings, services, guard, session_id=session_id, self_test=self_test,
                           open_file=open_file)
    finally:
        guard.release()


def _run_window(app: QApplication, settings: Settings, services: Services, guard: InstanceGuard, *,
                session_id: str | None, self_test: str | None, open_file: Path | None) -> int:
    apply_theme(app, settings.theme == "dark")
    window = MainWindow(settings, services)
    guard.raise_requested.connect(window.bring_forward)
    window.show()
    window_s = process_age_s()
    status = 0

    async def main() -> None:
        nonlocal status
        closed = asyncio.Event()
        window.closed.connect(closed.set)
        if self_test is None and open_file is not None:
            window.controller.spawn(window.file_actions.load_and_import(session_id, open_file), "Opening")
        elif self_test is None:
            window.start(session_id)
        else:
            status = await _self_test(window, session_id, self_test, window_s)
            window.close()
        await closed.wait()

    run_on_qt_loop(main())
    return status


async def _self_test(window: MainWindow, session_id: str | None, text: str, window_s: float) -> int:
    started = time.perf_counter()
    c = window.controller
    if not await c.load(session_id):
        print(f"self-test: the models did not load: {c.load_error or 'no reason given'}", file=sys.stderr)
        return 1
    loaded, ready_s = time.perf_counter() - started, process_age_s()
    finished: list[Any] = []
    c.turn_finished.connect(lambda _turn_id, record: finished.append(record))
    c.turn_failed.connect(lambda _key, message, _text: finished.append(message))
    window.composer.edit.setPlainText(text)
    window.composer.send.click()
    while not finished:
        await asyncio.sleep(0.02)
    record = finished[0]
    if isinstance(record, str) or not record.output:
        why = record if isinstance(record, str) else (
            " ".join(str(record.usage.get("error") or "").split()) or record.finish_reason)
        print(f"self-test: no answer ({why})", file=sys.stderr)
        return 1
    print(f"self-test: window in {window_s:.2f} s, ready in {ready_s:.2f} s (models loaded in {loaded:.1f} s); "
          f"turn {record.turn_id[:8]} answered "
          f"({len(record.output.split())} words, first token {record.timing.first_token_ms or 0:.0f} ms) "
          f"in session {record.session_id[:8]}", flush=True)
    return 0
