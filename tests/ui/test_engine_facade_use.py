"""The window reaches the engine through its facade only (DESIGN.md §2), shows a CoreError as
its one line and anything else as "something went wrong" with the traceback logged, and runs
blocking work on the explicit default executor of the loop (DESIGN.md §3)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from app.config import Settings
from app.core.errors import CoreError
from app.ui.app import run_on_qt_loop
from app.ui.window import MainWindow
from tests.ui.conftest import drive, fake_services, until


def _window(qtbot, settings: Settings) -> MainWindow:
    window = MainWindow(settings, fake_services(["Noted [1]."]))
    qtbot.addWidget(window)
    window.show()
    return window


def _close(window: MainWindow, loop) -> None:
    window.close()
    drive(loop, until(lambda: window._shut, 30, "shutdown"))


def test_the_facade_gives_the_sessions_the_env_events_and_the_model_name(qtbot, aloop, settings: Settings) -> None:
    window = _window(qtbot, settings)
    c = window.controller
    assert drive(aloop, c.load())
    engine = c.engine
    assert engine is not None and engine.model_name == "scripted"
    assert not hasattr(engine, "with_store")  # the raw store is never handed out
    assert [s["session_id"] for s in drive(aloop, engine.list_sessions())] == [c.session_id]
    assert drive(aloop, engine.env_events(c.session_id)) == []
    assert window.model_label.text().startswith("Model: scripted")
    _close(window, aloop)


def test_a_core_error_is_one_line_and_a_bug_is_logged_with_its_traceback(
        qtbot, aloop, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    window = _window(qtbot, settings)
    c = window.controller
    shown: list[str] = []
    c.error.connect(shown.append)

    async def refused() -> None:
        raise CoreError("turn t1 has no recorded build\nsecond line")

    async def broken() -> None:
        raise KeyError("oops")

    with caplog.at_level(logging.INFO, logger="app.ui.controller"):
        drive(aloop, asyncio.wait([c.spawn(refused(), "Re-anchoring"), c.spawn(broken(), "Injecting")]))
        drive(aloop, until(lambda: len(shown) == 2, 10, "two error lines"))
    assert shown[0] == "Re-anchoring failed: turn t1 has no recorded build"
    assert shown[1] == "Injecting failed: something went wrong: 'oops'"
    logged = {r.getMessage(): r for r in caplog.records}
    assert logged["Re-anchoring: turn t1 has no recorded build\nsecond line"].exc_info is None
    assert logged["Injecting failed"].exc_info is not None
    _close(window, aloop)


def test_importing_a_file_that_is_not_json_says_so_in_one_line(qtbot, aloop, settings: Settings,
                                                              tmp_path: Path) -> None:
    window = _window(qtbot, settings)
    assert drive(aloop, window.controller.load())
    bad = tmp_path / "notes.json"
    bad.write_text("not json at all", encoding="utf-8")
    assert drive(aloop, window.file_actions.import_from(bad)) is None
    message = window.statusBar().currentMessage()
    assert message.startswith("Could not import notes.json: notes.json is not a JSON document (")
    assert "something went wrong" not in message
    _close(window, aloop)


@pytest.mark.parametrize(("body", "expected"), [
    ('{"schema_version": "1.0", "x": ' + "[" * 5000 + "]" * 5000 + "}",
     "deep.json: x[0][0][0][0][0][0][0]…[0][0]: nested deeper than 64 levels"),
    ('{"schema_version": "1.0", "session": {"summary": NaN}}', "deep.json: session.summary: NaN is not a JSON number"),
])
def test_importing_a_hostile_document_names_the_json_path_in_one_line(qtbot, aloop, settings: Settings,
                                                                     tmp_path: Path, body: str, expected: str) -> None:
    window = _window(qtbot, settings)
    assert drive(aloop, window.controller.load())
    path = tmp_path / "deep.json"
    path.write_text(body, encoding="utf-8")
    before = drive(aloop, window.controller.sessions())
    assert drive(aloop, window.file_actions.import_from(path)) is None
    message = window.statusBar().currentMessage()
    assert message.startswith(f"Could not import deep.json: {expected}")
    assert "something went wrong" not in message
    assert drive(aloop, window.controller.sessions()) == before
    _close(window, aloop)


@pytest.mark.usefixtures("qapp")
def test_the_loop_runs_blocking_work_on_its_own_named_executor() -> None:
    seen: list[threading.Thread] = []

    async def work() -> str:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: seen.append(threading.current_thread()))
        await asyncio.to_thread(lambda: seen.append(threading.current_thread()))
        return "done"

    assert run_on_qt_loop(work()) == "done"
    assert [t.name.startswith("pcm-default") for t in seen] == [True, True]
    assert not any(t.is_alive() for t in seen)  # shut down with the loop
