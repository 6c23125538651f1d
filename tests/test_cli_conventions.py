"""`pcm`'s conventions: global options before or after the command, `--json` on the read
commands, ids by prefix or `last` (export too), a closed pipe ends quietly, one plain line of
what a turn used, `--version`; `memory add` loads no model and the index takes the memory in at
the next start. Turns are recorded by a real engine (scripted model, real SQLite and LanceDB)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import __version__
from app import main as wiring
from app.cli import main
from app.cli_pipeline import used_line
from app.core.engine.facade import Engine
from app.core.pipeline.record import TurnRecord
from app.store.sqlite import SqliteStore
from tests.conftest import EngineFactory

ROOT = Path(__file__).resolve().parent.parent


def _no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a command that needs no model loaded one")

    monkeypatch.setattr(wiring, "load_chat_model", refuse)
    monkeypatch.setattr(wiring, "load_embedder", refuse)


def _two_turns(make_engine: EngineFactory) -> tuple[str, list[TurnRecord]]:
    async def body(engine: Engine) -> tuple[str, list[TurnRecord]]:
        state = await engine.open_session(None, title="Kyoto trip")
        records = []
        for text in ("How far is it from Tokyo to Kyoto by train?", "And how long does the train take from Tokyo?"):
            records.append(await (await engine.submit(state.session_id, text)).done)
        return state.session_id, records

    return make_engine.run(body, replies=("About 450 km.", "About two hours and fifteen minutes."))


def test_global_options_after_the_command_and_json_on_read_commands(
        make_engine: EngineFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    session, records = _two_turns(make_engine)
    _no_models(monkeypatch)
    monkeypatch.setenv("PCM_DATA_DIR", str(tmp_path / "elsewhere"))  # only --data-dir names the folder
    assert main(["sessions", "--data-dir", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["session_id"] for r in rows] == [session] and rows[0]["turn_count"] == 2
    assert main(["--data-dir", str(tmp_path), "sessions"]) == 0
    assert capsys.readouterr().out.startswith(f"{session}\t")
    assert main(["show", "turn", "last", "--json", "--data-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["turn_id"] == records[-1].turn_id
    assert main(["--data-dir", str(tmp_path / "nowhere"), "sessions", "--data-dir", str(tmp_path)]) == 0  # the last wins
    assert session in capsys.readouterr().out
    for typed in (session[:6], "last"):
        assert main(["export", typed, "--data-dir", str(tmp_path)]) == 0
        assert json.loads(capsys.readouterr().out)["session"]["session_id"] == session
    assert main(["memory", "list", "--session", "last", "--json", "--data-dir", str(tmp_path)]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)
    assert main(["providers", "limits", "--json", "--data-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"daily_limit": None, "monthly_limit": None}
    assert main(["export", "ffffffff", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "pcm: error: no session 'ffffffff'"


def test_one_plain_line_of_what_a_turn_used(make_engine: EngineFactory) -> None:
    _, (first, second) = _two_turns(make_engine)
    line = used_line(first)
    assert line.startswith(f"turn {first.turn_id}: starts a new branch; used ") and line.endswith(" tokens)")
    assert "\n" not in line and "{" not in line
    line = used_line(second, "How far is it from Tokyo to Kyoto by train? And a very long title besides")
    assert 'continues "How far is it from Tokyo to Kyoto by train? And…"' in line
    assert "message" in line and f"of {second.build.context.budget} tokens)" in line, line


def test_memory_add_loads_no_model_and_the_index_takes_it_in_later(
        make_engine: EngineFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    session, _ = _two_turns(make_engine)
    with monkeypatch.context() as patched:
        _no_models(patched)
        assert main(["--data-dir", str(tmp_path), "memory", "add", "I prefer metric units.", "--session",
                     session[:8]]) == 0
    added = capsys.readouterr().out
    assert added.startswith("added ") and "preference\tmetric units" in added
    memory_id = added.split()[1]

    async def searchable(engine: Engine) -> bool:  # the next engine's start catches its index up
        for _ in range(200):
            hits = await engine.records().search("metric units", k=50, kinds=("memory",))
            if any(found == memory_id for found, _ in hits):
                return True
            await asyncio.sleep(0.1)
        return False

    assert make_engine.run(searchable)
    assert main(["--data-dir", str(tmp_path), "memory", "show", memory_id[:10]]) == 0  # a memory id's prefix
    assert json.loads(capsys.readouterr().out)["fragment_id"] == memory_id


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pcm.sqlite3")
    try:
        for n in range(1500):  # more than a pipe holds
            store.create_session(f"session number {n} with a long enough title to fill the pipe quickly")
    finally:
        store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shell = f"{sys.executable} -m app.cli --data-dir {tmp_path} sessions | head -n 2"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert len(done.stdout.splitlines()) == 2
    assert done.stderr == "" and done.returncode == 141  # as SIGPIPE would; no traceback, no "Exception ignored"


def test_versions() -> None:
    for module, name in (("app.cli", "pcm"), ("app", "pcm-canvas")):
        done = subprocess.run([sys.executable, "-m", module, "--version"], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0 and done.stdout.strip() == f"{name} {__version__}", done.stderr


def test_the_desktop_takes_a_session_by_prefix_or_last(
        make_engine: EngineFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from app import desktop
    from app.ui import app as ui_app

    session, _ = _two_turns(make_engine)
    _no_models(monkeypatch)
    monkeypatch.setattr(desktop, "start_log_file", lambda: None)
    opened: list[str | None] = []
    monkeypatch.setattr(ui_app, "run_app", lambda _settings, _services, **kw: opened.append(kw["session_id"]) or 0)
    for typed in (session[:6], "last"):
        assert desktop.main(["--data-dir", str(tmp_path), "--session", typed]) == 0
    assert opened == [session, session]
    assert desktop.main(["--data-dir", str(tmp_path), "--session", "ffffffff"]) == 2  # before any window
    assert capsys.readouterr().err.strip() == "pcm-canvas: error: no session 'ffffffff'"
    assert opened == [session, session]
