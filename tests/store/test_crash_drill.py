"""Processes against one data folder: racing on a fresh folder (issue 10, family 7) and SIGKILLs
at random points of ``pcm ask``, ``pcm import`` and ``pcm store rebuild-index`` (family 8).

The default run races one round; the slow ones run the acceptance sizes (4 processes × 20 rounds)
and a reduced SIGKILL drill (10 kills). The full drill (≥ 100 kills) is
``python -m tests.store.crash_drill --kills 120``; see ``tests/store/race.py`` and
``tests/store/crash_drill.py`` for what each checks.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.store import race
from tests.store.crash_drill import Drill

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and SIGKILL")


def _assert_clean(report: race.RaceReport) -> None:
    assert report.errors == [] and report.failed_processes == 0 and report.tracebacks == 0
    assert report.recorded == report.questions and report.indexed == report.questions


def test_processes_opening_a_fresh_folder_at_once_all_record_their_question() -> None:
    report = race.run(rounds=1, processes=4)
    assert report.processes == 4
    _assert_clean(report)


@pytest.mark.slow
def test_four_processes_on_twenty_fresh_folders_record_every_question() -> None:
    report = race.run(rounds=20, processes=4)
    assert report.processes == 80
    _assert_clean(report)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkills_at_random_points_lose_nothing(tmp_path: Path) -> None:
    drill = Drill(tmp_path / "data", seed=11)
    report = drill.run(10)
    summary = report.summary()
    assert len(report.kills) == 10
    assert report.failures() == 0, summary
    assert summary["committed_turns_lost"] == summary["turns_left_unfinished"] == 0
    assert summary["integrity_failures"] == summary["index_mismatches"] == summary["replay_differences"] == 0
    assert summary["seen_text_lost"] == 0 and summary["tracebacks"] == 0
