"""Where settings live (app.config): the home data folder's settings and the window layout in the
user config folder, moved over once from the data folder without losing a value; any other data
folder keeps its own file; a broken file is one line naming the file and the fault, in `pcm` and
in `pcm-canvas`; the desktop's rotating log file in the user log folder."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import config
from app.cli import main
from app.config import Settings
from app.core.errors import SettingsError
from app.logfile import start_log_file

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The platform's user data folder is the data folder in use (no --data-dir, no $PCM_DATA_DIR)."""
    monkeypatch.delenv("PCM_DATA_DIR")
    folder = config.home_data_dir()
    assert folder.is_relative_to(tmp_path)  # XDG_DATA_HOME is the test's (tests/conftest.py)
    return folder


def test_the_home_folders_settings_move_to_the_config_folder_once(home: Path) -> None:
    home.mkdir(parents=True)
    old = {"chat_model": "/models/qwen.gguf", "default_budget": 1536, "theme": "dark",
           "watched_folders": ["/tmp/notes"], "unknown_later_key": 7}
    (home / "settings.json").write_text(json.dumps(old), encoding="utf-8")
    (home / "window.ini").write_text("[General]\ngeometry=abc\n", encoding="utf-8")
    settings = Settings.load()
    moved = config.config_dir() / "settings.json"
    assert settings.file == moved and moved.is_file()
    assert json.loads(moved.read_text(encoding="utf-8")) == old  # every value, the unknown one too
    assert (settings.chat_model, settings.default_budget, settings.theme) == ("/models/qwen.gguf", 1536, "dark")
    assert not (home / "settings.json").exists()
    assert json.loads((home / "settings.json.bak").read_text(encoding="utf-8")) == old
    assert str(moved) in (home / "SETTINGS-MOVED.txt").read_text(encoding="utf-8")
    settings.model_copy(update={"default_budget": 2048}).save()
    assert Settings.load().default_budget == 2048  # saved where it is read
    assert config.layout_file(home) == config.config_dir() / "window.ini"
    assert "geometry=abc" in (config.config_dir() / "window.ini").read_text(encoding="utf-8")
    assert not (home / "window.ini").exists()
    (home / "settings.json").write_text(json.dumps({"default_budget": 99}), encoding="utf-8")
    assert Settings.load().default_budget == 2048  # once: the config folder's file wins from then on


def test_a_folder_given_explicitly_keeps_its_own_settings(tmp_path: Path, home: Path) -> None:
    portable = tmp_path / "usb"
    Settings.load(portable).model_copy(update={"default_budget": 640}).save()
    assert (portable / "settings.json").is_file() and not (config.config_dir() / "settings.json").exists()
    assert Settings.load(portable).default_budget == 640 and Settings.load().default_budget != 640
    assert Settings.load(home).file == config.config_dir() / "settings.json"  # the home folder, however named


def test_a_broken_old_file_is_not_moved(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "settings.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        Settings.load()
    assert str(home / "settings.json") in str(caught.value) and "not valid JSON at line 1" in str(caught.value)
    assert (home / "settings.json").read_text(encoding="utf-8") == "{oops"  # kept for the user to fix
    assert not (config.config_dir() / "settings.json").exists()


@pytest.mark.parametrize(("text", "fault"), [
    ('{"context_size": 2048,}', "not valid JSON at line 1, column 23"),
    ('{"context_size": "big"}', "context_size: Input should be a valid integer"),
    ('["chat_model"]', "not a JSON object"),
    ('{"feeds": [{"interval_s": 5}]}', "feeds.0.url: Field required"),
])
def test_a_broken_settings_file_is_one_line_naming_the_file_and_the_fault(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fault: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "settings.json").write_text(text, encoding="utf-8")
    assert main(["sessions", "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(data / "settings.json") in err and fault in err, err
    desktop = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert desktop.returncode == 2 and "Traceback" not in desktop.stderr
    assert desktop.stderr.strip().splitlines() == [f"pcm-canvas: error: {err.removeprefix('pcm: error: ')}"]


def test_the_log_file_rotates_in_the_user_log_folder(tmp_path: Path) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        path = start_log_file()
        assert path == config.log_dir() / "pcm-canvas.log" and path.is_relative_to(tmp_path)
        assert start_log_file() == path and len(root.handlers) == len(before) + 2  # once: file and stderr
        logging.getLogger("pcm.test").warning("x" * 2000)
        for handler in root.handlers:
            handler.flush()
        assert "x" * 2000 in path.read_text(encoding="utf-8")
        for _ in range(700):  # past 1 MB: rotated, three older files at most
            logging.getLogger("pcm.test").warning("y" * 2000)
        assert (path.parent / "pcm-canvas.log.1").is_file() and not (path.parent / "pcm-canvas.log.4").exists()
    finally:
        for handler in root.handlers[len(before):]:
            handler.close()
            root.removeHandler(handler)
