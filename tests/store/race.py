"""Race processes on fresh data folders: the concurrency acceptance of issue 10, family 7.

Each round makes a new data folder and starts ``processes`` processes on it that open it at the
same moment (held until a common start time once their imports are done): alternately ``pcm ask``
(the real command line on the scripted fakes, ``tests.store.fake_pcm``) and an open+record
(``tests.store.open_record``). A round passes when every process exits 0 with no traceback and
every question is in the store and in the index.

    python -m tests.store.race [--rounds 20] [--processes 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEAD_S = 4.0  # how far ahead the common start is set: enough for every process to import


@dataclass
class RaceReport:
    rounds: int = 0
    processes: int = 0
    failed_processes: int = 0
    tracebacks: int = 0
    questions: int = 0
    recorded: int = 0
    indexed: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {"rounds": self.rounds, "processes": self.processes, "failed_processes": self.failed_processes,
                "tracebacks": self.tracebacks, "questions": self.questions, "recorded": self.recorded,
                "indexed": self.indexed, "errors": self.errors[:5]}


def _argv(kind: str, folder: Path, text: str, start_at: float) -> list[str]:
    if kind == "ask":
        return [sys.executable, "-m", "tests.store.fake_pcm", "--data-dir", str(folder), "ask", text]
    return [sys.executable, "-m", "tests.store.open_record", str(folder), text, str(start_at)]


def race_round(folder: Path, processes: int, round_no: int, report: RaceReport) -> None:
    start_at = time.time() + LEAD_S
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PCM_FAKE_START_AT": str(start_at), "PCM_FAKE_TOKEN_DELAY": "0", "PCM_FAKE_REPLY_WORDS": "20"}
    texts = [f"round {round_no} process {n}: where do the {('river', 'harbor', 'orbit', 'meadow')[n % 4]} notes go?"
             for n in range(processes)]
    procs = [subprocess.Popen(_argv("ask" if n % 2 == 0 else "open", folder, text, start_at), env=env, cwd=str(REPO),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n, text in enumerate(texts)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        report.processes += 1
        text = err.decode("utf-8", "replace")
        if proc.returncode != 0:
            report.failed_processes += 1
            report.errors.append(text.strip().splitlines()[-1] if text.strip() else f"exit {proc.returncode}")
        report.tracebacks += "Traceback" in text
    report.rounds += 1
    report.questions += len(texts)
    recorded, indexed = _check(folder, texts)
    report.recorded += recorded
    report.indexed += indexed


def _check(folder: Path, texts: list[str]) -> tuple[int, int]:
    """How many of ``texts`` the folder holds as user messages, and how many of those are indexed."""
    from app.config import Settings
    from app.store.index import SearchIndex
    from app.store.sqlite import SqliteStore
    from tests.store.fake_pcm import fake_embedder

    layout = Settings(data_dir=folder)
    store = SqliteStore(layout.db_path)
    try:
        ids = {m.content: m.message_id for s in store.list_sessions() for m in store.list_messages(s["session_id"])}
    finally:
        store.close()
    have = SearchIndex(layout.index_dir, fake_embedder()).ids()
    found = [ids[t] for t in texts if t in ids]
    return len(found), sum(1 for i in found if i in have)


def run(rounds: int, processes: int) -> RaceReport:
    report = RaceReport()
    with tempfile.TemporaryDirectory(prefix="pcm-race-") as tmp:
        for n in range(rounds):
            race_round(Path(tmp) / f"round-{n}" / "data", processes, n, report)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    started = time.monotonic()
    report = run(args.rounds, args.processes)
    print(json.dumps({**report.summary(), "seconds": round(time.monotonic() - started, 1)}, indent=2))
    return 0 if report.failed_processes == report.tracebacks == 0 and report.recorded == report.questions else 1


if __name__ == "__main__":
    sys.exit(main())
