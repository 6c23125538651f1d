"""`pcm` takes the ids the window shows: a whole id, its first characters, or `last`; `show` reads
the store only (no model is loaded), and `ask` continues the last used session by default.

Turns are recorded through a real engine (scripted model, real SQLite and LanceDB) in the test's
data folder; the commands then run in-process through ``app.cli.main``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import main as wiring
from app.cli import main
from app.core.engine.facade import Engine
from app.store.sqlite import SqliteStore
from tests.conftest import EngineFactory


def _two_sessions(make_engine: EngineFactory) -> tuple[list[str], list[str]]:
    """Two sessions of two turns each; returns (session ids, turn ids) in creation order."""

    async def body(engine: Engine) -> tuple[list[str], list[str]]:
        sessions, turns = [], []
        for topic in ("Kyoto trip", "Python error"):
            state = await engine.open_session(None, title=topic)
            sessions.append(state.session_id)
            for text in (f"Tell me about the {topic}", f"More on the {topic}, please"):
                run = await engine.submit(state.session_id, text)
                turns.append((await run.done).turn_id)
        return sessions, turns

    return make_engine.run(body)


def _no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a read-only command loaded a model")

    monkeypatch.setattr(wiring, "load_chat_model", refuse)
    monkeypatch.setattr(wiring, "load_embedder", refuse)


def test_show_takes_a_prefix_or_last_and_loads_no_model(make_engine: EngineFactory, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, turns = _two_sessions(make_engine)
    _no_models(monkeypatch)
    assert main(["--data-dir", str(tmp_path), "show", "turn", turns[1][:8], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["turn_id"] == turns[1]
    assert main(["--data-dir", str(tmp_path), "show", "turn", "last", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["turn_id"] == turns[-1]
    assert main(["--data-dir", str(tmp_path), "show", "turn", turns[0].upper()[:10]]) == 0  # any case
    assert "--- context sent ---" in capsys.readouterr().out


def test_unknown_and_too_short_ids_are_one_line_errors(make_engine: EngineFactory, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _two_sessions(make_engine)
    for typed, words in (("ffffffff", "no turn 'ffffffff'"), ("ab", "at least 4 characters"),
                         ("%%%%", "no turn '%%%%'"), ("", "at least 4 characters")):
        assert main(["--data-dir", str(tmp_path), "show", "turn", typed]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err


def test_a_prefix_shared_by_two_sessions_is_refused_before_any_model_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    store = SqliteStore(tmp_path / "pcm.sqlite3")
    try:
        first = store.create_session("s", "abcd0000000000000000000000000000")
        second = store.create_session("s2", "abcd1111111111111111111111111111")
        assert store.match_ids("session", "abcd", limit=2) == [first, second]
        assert store.last_used_session_id() == second  # no turns yet: the latest created
        store.record_user_input(first, "one")
        assert store.last_used_session_id() == first  # the session of the latest turn
    finally:
        store.close()
    _no_models(monkeypatch)
    assert main(["--data-dir", str(tmp_path), "ask", "hello", "--session", "abcd"]) == 2
    err = capsys.readouterr().err.strip()
    assert "several session ids" in err and len(err.splitlines()) == 1, err
