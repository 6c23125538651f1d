"""``pcm bench startup``: time to window and time to ready of the desktop app, as a user starts
it — a new process each run (``python -m app --self-test``, headless), figures measured from the
moment the process started (``app.startup.process_age_s``). The first run on a fresh data folder
is reported apart (it creates the store and the index); the others reopen that folder."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

SELF_TEST_TIMES = re.compile(r"window in ([\d.]+) s, ready in ([\d.]+) s")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def one_start(data_dir: Path, models_dir: str | None = None, timeout_s: float = 300.0) -> tuple[float, float]:
    """(seconds to window, seconds to ready) of one headless start that answers one input."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PCM_DATA_DIR=str(data_dir))
    if models_dir:
        env["PCM_MODELS_DIR"] = models_dir
    done = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(data_dir), "--self-test", "Hi"],
                          env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    found = SELF_TEST_TIMES.search(done.stdout)
    if done.returncode != 0 or found is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the app did not start cleanly (exit {done.returncode}): {tail}")
    return float(found.group(1)), float(found.group(2))


def bench_startup(runs: int, *, models_dir: str | None = None,
                  say: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """Start the app ``runs + 1`` times on one throw-away data folder (the first on it fresh)."""
    with tempfile.TemporaryDirectory(prefix="pcm-startup-") as tmp:
        folder = Path(tmp) / "data"
        first = one_start(folder, models_dir)
        say(f"first start: window {first[0]:.2f} s, ready {first[1]:.2f} s")
        window, ready = [], []
        for n in range(runs):
            w, r = one_start(folder, models_dir)
            window.append(w)
            ready.append(r)
            say(f"start {n + 1}/{runs}: window {w:.2f} s, ready {r:.2f} s")
    return {
        "runs": runs, "first": {"window_s": first[0], "ready_s": first[1]},
        "window_s": {"median": round(statistics.median(window), 3), "p95": _pct(window, 0.95), "min": min(window)},
        "ready_s": {"median": round(statistics.median(ready), 3), "p95": _pct(ready, 0.95), "min": min(ready)},
    }


def format_report(report: dict[str, Any]) -> str:
    w, r, f = report["window_s"], report["ready_s"], report["first"]
    return "\n".join([
        f"startup over {report['runs']} runs (a new process each, headless, from process start)",
        f"  to window   median {w['median']:.2f} s   p95 {w['p95']:.2f} s   min {w['min']:.2f} s",
        f"  to ready    median {r['median']:.2f} s   p95 {r['p95']:.2f} s   min {r['min']:.2f} s",
        f"  first start on a fresh folder: window {f['window_s']:.2f} s, ready {f['ready_s']:.2f} s",
    ])
