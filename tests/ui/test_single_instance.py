"""One window per data folder: a second ``python -m app`` on the folder a window holds hands its
FILE to that window (which is asked to come forward) and ends at once; another folder is free."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.ui.single_instance import InstanceGuard, server_name

ROOT = Path(__file__).resolve().parents[2]


def _second_start(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "app", "--data-dir", str(data_dir), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_second_start_on_the_same_folder_hands_over_its_file_and_ends(qtbot: QtBot, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = InstanceGuard(data)
    try:
        assert first.claim()
        exported = tmp_path / "trip.json"
        exported.write_text("{}", encoding="utf-8")
        with qtbot.waitSignal(first.raise_requested, timeout=60_000) as asked:
            second = _second_start(data, str(exported))
            qtbot.waitUntil(lambda: second.poll() is not None or asked.signal_triggered, timeout=60_000)
        out, err = second.communicate(timeout=60)
        assert asked.args == [exported.resolve()]
        assert second.returncode == 0, err
        assert "already open on" in err and "trip.json" in err and "Traceback" not in err
        assert not out.strip()
    finally:
        first.release()


@pytest.mark.usefixtures("qtbot")  # a QApplication, as in the app
def test_the_guard_is_per_folder_and_given_up_on_release(tmp_path: Path) -> None:
    one, other = tmp_path / "one", tmp_path / "other"
    assert server_name(one) != server_name(other) and server_name(one) == server_name(tmp_path / "x" / ".." / "one")
    first = InstanceGuard(one)
    assert first.claim()
    elsewhere = InstanceGuard(other)
    assert elsewhere.claim()  # another data folder: its own window
    again = InstanceGuard(one)
    assert not again.claim()  # held (here by this very process)
    first.release()
    assert again.claim()  # released: the next start takes it
    again.release()
    elsewhere.release()
