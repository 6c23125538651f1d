"""``pcm bench startup``: time to window and time to ready of the desktop app, as a user starts
it — a new process each run (``python -m app --self-test``, headless), figures measured from the
moment the process started (``app.startup.process_age_s``). The first run on a fresh data folder
is reported apart (it creates the store and the index); the others reopen that folder.

``--app EXE`` also starts another build of the app (a PyInstaller bundle's ``pcm-canvas``) in the
same run, alternating with ``python -m app`` so both see the same machine load."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

SELF_TEST_TIMES = re.compile(r"window in ([\d.]+) s, ready in ([\d.]+) s")
VENV_APP = "python -m app"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def one_start(data_dir: Path, models_dir: str | None = None, timeout_s: float = 300.0, *,
              command: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> tuple[float, float]:
    """(seconds to window, seconds to ready) of one headless start that answers one input.

    ``command`` starts the app (default: this interpreter's ``python -m app``); ``env`` is the
    environment it starts in (default: this process's), plus the offscreen platform and the
    data folder."""
    run_env = dict(os.environ if env is None else env, QT_QPA_PLATFORM="offscreen", PCM_DATA_DIR=str(data_dir))
    if models_dir:
        run_env["PCM_MODELS_DIR"] = models_dir
    argv = list(command or [sys.executable, "-m", "app"]) + ["--data-dir", str(data_dir), "--self-test", "Hi"]
    done = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=timeout_s, check=False)
    found = SELF_TEST_TIMES.search(done.stdout)
    if done.returncode != 0 or found is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the app did not start cleanly (exit {done.returncode}): {tail}")
    return float(found.group(1)), float(found.group(2))


def _summary(runs: int, first: tuple[float, float], window: list[float], ready: list[float]) -> dict[str, Any]:
    return {
        "runs": runs, "first": {"window_s": first[0], "ready_s": first[1]},
        "window_s": {"median": round(statistics.median(window), 3), "p95": _pct(window, 0.95), "min": min(window)},
        "ready_s": {"median": round(statistics.median(ready), 3), "p95": _pct(ready, 0.95), "min": min(ready)},
    }


def compare_startup(runs: int, commands: Mapping[str, tuple[Sequence[str] | None, Mapping[str, str] | None]], *,
                    models_dir: str | None = None,
                    say: Callable[[str], None] = lambda _line: None) -> dict[str, dict[str, Any]]:
    """Each labelled (command, env) started ``runs + 1`` times on its own throw-away data folder
    (the first on it fresh), the commands taking turns run by run; a report per label."""
    times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in commands}
    firsts: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pcm-startup-") as tmp:
        for n in range(runs + 1):
            for i, (label, (command, env)) in enumerate(commands.items()):
                w, r = one_start(Path(tmp) / f"data{i}", models_dir, command=command, env=env)
                if n == 0:
                    firsts[label] = (w, r)
                    say(f"{label}: first start: window {w:.2f} s, ready {r:.2f} s")
                    continue
                times[label][0].append(w)
                times[label][1].append(r)
                say(f"{label}: start {n}/{runs}: window {w:.2f} s, ready {r:.2f} s")
    return {label: _summary(runs, firsts[label], *times[label]) for label in commands}


def bench_startup(runs: int, *, models_dir: str | None = None, app: str | None = None,
                  say: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """``python -m app`` started ``runs + 1`` times on one throw-away data folder (the first on
    it fresh); with ``app`` (an executable) that one too, in the same run: then a report per label."""
    commands: dict[str, tuple[Sequence[str] | None, Mapping[str, str] | None]] = {VENV_APP: (None, None)}
    if app:
        commands[app] = ([app], None)
    reports = compare_startup(runs, commands, models_dir=models_dir, say=say)
    return reports if app else reports[VENV_APP]


def format_report(report: dict[str, Any], label: str = "") -> str:
    if "runs" not in report:  # several labelled reports
        return "\n".join(format_report(one, name) for name, one in report.items())
    w, r, f = report["window_s"], report["ready_s"], report["first"]
    return "\n".join([
        f"startup{' of ' + label if label else ''} over {report['runs']} runs "
        "(a new process each, headless, from process start)",
        f"  to window   median {w['median']:.2f} s   p95 {w['p95']:.2f} s   min {w['min']:.2f} s",
        f"  to ready    median {r['median']:.2f} s   p95 {r['p95']:.2f} s   min {r['min']:.2f} s",
        f"  first start on a fresh folder: window {f['window_s']:.2f} s, ready {f['ready_s']:.2f} s",
    ])
