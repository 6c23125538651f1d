"""The `pcm` command: export/import round trip, one-line errors, data-dir resolution, the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.config import Settings, resolve_data_dir
from app.core.types import Message, Role
from app.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parent.parent


def _session_with_turn(data_dir: Path) -> str:
    store = SqliteStore(data_dir / "pcm.sqlite3")
    try:
        sid = store.create_session("cli test")
        turn_id, _ = store.record_user_input(sid, "What is in the plan?")
        store.set_turn_answer(turn_id, Message(role=Role.ASSISTANT, content="Three steps.", turn_id=turn_id))
    finally:
        store.close()
    return sid


def test_data_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCM_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(None) == (tmp_path / "env").resolve()
    assert resolve_data_dir(tmp_path / "cli") == (tmp_path / "cli").resolve()
    monkeypatch.delenv("PCM_DATA_DIR")
    assert "pcm-canvas" in str(resolve_data_dir(None))
    assert Settings.load(tmp_path / "cli").db_path == (tmp_path / "cli" / "pcm.sqlite3").resolve()


def test_export_import_export_is_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    sid = _session_with_turn(first)
    assert main(["--data-dir", str(first), "export", sid]) == 0
    exported = capsys.readouterr().out
    doc = tmp_path / "s.json"
    doc.write_text(exported, encoding="utf-8")
    assert main(["--data-dir", str(second), "import", str(doc)]) == 0
    assert capsys.readouterr().out.strip() == sid
    assert main(["--data-dir", str(second), "export", sid, "-o", str(tmp_path / "again.json")]) == 0
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == exported
    assert json.loads(exported)["session"]["messages"][1]["content"] == "Three steps."


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["session"]["messages"][0].update(role="robot"), "session.messages[0].role"),
        (lambda d: d.pop("context_blocks"), "context_blocks"),
        (lambda d: d.update(schema_version="2.0"), "schema_version"),
    ],
)
def test_import_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate, expected: str
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    sid = _session_with_turn(source)
    main(["--data-dir", str(source), "export", sid])
    doc = json.loads(capsys.readouterr().out)
    doc["session"]["session_id"] = "other"
    mutate(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    target = tmp_path / "target"
    assert main(["--data-dir", str(target), "import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pcm: error: ") and expected in err and "\n" not in err
    store = SqliteStore(target / "pcm.sqlite3")
    try:
        assert store.list_sessions() == []
    finally:
        store.close()


def test_unknown_session_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path), "export", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "import", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_models_verify_reports_fetched_models(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["models", "verify"])
    out = capsys.readouterr().out
    if code != 0:
        pytest.fail(f"default models are not in place (setup runs `pcm models fetch`):\n{out}")
    assert "SmolLM2-135M-Instruct\tok" in out and "all-MiniLM-L6-v2\tok" in out


@pytest.mark.model
def test_demo_runs_headless_on_the_default_models(tmp_path: Path) -> None:
    env = {**os.environ, "PCM_DATA_DIR": str(tmp_path / "demo")}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo", "--prompt", "Say hello."],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("you: Say hello.\nassistant: ")
    assert len(result.stdout.split("assistant: ", 1)[1].strip()) > 0
    assert "Traceback" not in result.stderr
    store = SqliteStore(tmp_path / "demo" / "pcm.sqlite3")
    try:
        (session,) = store.list_sessions()
        messages = store.list_messages(session["session_id"])
        assert [m.role for m in messages] == ["user", "assistant"]
        (usage,) = store.list_model_usage(session["session_id"])
        assert usage.completion_tokens > 0 and usage.first_token_latency_ms is not None
        assert len(store.load_graph(session["session_id"]).nodes) == 2
    finally:
        store.close()


def _exported_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    source = tmp_path / "src"
    source.mkdir()
    sid = _session_with_turn(source)
    assert main(["--data-dir", str(source), "export", sid]) == 0
    return capsys.readouterr().out


HOSTILE_IMPORTS = {
    "deep.json": (lambda t: t.rstrip()[:-1] + ', "x": ' + "[" * 10_000 + "]" * 10_000 + "}",
                  "deep.json: x[0][0][0][0][0][0][0]…[0][0]: nested deeper than 64 levels"),
    "bigint.json": (lambda t: t.rstrip()[:-1] + ', "x": ' + "7" * 5000 + "}", "bigint.json: x: an integer of 5000 digits"),
    "surrogate.json": (lambda t: t.replace('"content": "', '"content": "\\udc80', 1),
                       "surrogate.json: session.messages[0].content: a lone surrogate \\udc80"),
    "nan.json": (lambda t: t.replace('"summary": null', '"summary": NaN', 1), "nan.json: session.summary: NaN is not a JSON number"),
    "inf.json": (lambda t: t.replace('"summary": null', '"summary": Infinity', 1), "session.summary: Infinity is not a JSON number"),
    "ninf.json": (lambda t: t.replace('"summary": null', '"summary": -Infinity', 1), "session.summary: -Infinity is not"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_IMPORTS))
def test_a_hostile_import_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                name: str) -> None:
    edit, expected = HOSTILE_IMPORTS[name]
    text = _exported_text(tmp_path, capsys)
    path = tmp_path / name
    path.write_text(edit(text), encoding="utf-8")
    assert path.read_text(encoding="utf-8") != text
    target = tmp_path / "target"
    assert main(["--data-dir", str(target), "import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pcm: error: ") and expected in err and "\n" not in err, err
    assert not target.exists()  # refused before the data folder is even opened


def test_importing_a_folder_or_a_pipe_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "folder.json"
    folder.mkdir()
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    for path, expected in ((folder, "folder.json is a folder, not a JSON document"),
                           (pipe, "pipe.json is not a regular file")):
        assert main(["--data-dir", str(tmp_path / "target"), "import", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("pcm: error: ") and expected in err and "\n" not in err


def test_export_writes_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _exported_text(tmp_path, capsys)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c} in the export"))
    out = tmp_path / "no-such-folder" / "x.json"
    sid = json.loads(text)["session"]["session_id"]
    assert main(["--data-dir", str(tmp_path / "src"), "export", sid, "-o", str(out)]) == 2
    assert "x.json cannot be written" in capsys.readouterr().err
