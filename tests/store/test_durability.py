"""A user's turn survives kill -9: every turn id reported after record_user_input is on disk.

A writer subprocess records user inputs in a tight burst and prints each turn id the moment
``record_user_input`` returns; the parent SIGKILLs it at a random point mid-burst, reopens the
database and checks that every printed id is there. Trials share one database, so each also
checks recovery after the previous crashes.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
TRIALS = 20
WRITER = """
import sys
from pathlib import Path
from app.store.sqlite import SqliteStore

store = SqliteStore(Path(sys.argv[1]))
session_id = store.create_session("burst", session_id=sys.argv[2])
print("ready", flush=True)
for i in range(1_000_000):
    turn_id, _ = store.record_user_input(session_id, f"input {i} " + "words " * (i % 50))
    sys.stdout.write(turn_id + "\\n")
    sys.stdout.flush()
"""
_ID = re.compile(r"^[0-9a-f]{32}$")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_committed_turns_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(1234)
    db = tmp_path / "burst.sqlite3"
    script = tmp_path / "writer.py"
    script.write_text(WRITER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    reported: dict[str, set[str]] = {}
    deadline = time.monotonic() + 50
    for trial in range(TRIALS):
        if trial >= 5 and time.monotonic() > deadline:
            break  # a very slow machine: keep the suite bounded, still ≥ 5 crash trials
        session_id = f"trial-{trial}"
        proc = subprocess.Popen([sys.executable, str(script), str(db), session_id],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                cwd=str(tmp_path))
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready == b"ready\n", proc.stderr.read() if proc.stderr else ready
        seen = [proc.stdout.readline() for _ in range(rng.randint(1, 60))]
        time.sleep(rng.uniform(0.0, 0.01))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        lines = b"".join(seen + [rest]).decode().split("\n")
        ids = {line for line in lines if _ID.match(line)}  # a torn last line is skipped
        assert ids, "the writer reported no turn before it was killed"
        reported[session_id] = ids

    store = SqliteStore(db)
    try:
        assert store.pragma("integrity_check") == "ok"
        for session_id, ids in reported.items():
            stored = {t["turn_id"] for t in store.list_turns(session_id)}
            missing = ids - stored
            assert not missing, f"{session_id}: {len(missing)} reported turns lost"
            # Each stored turn is complete: its user message exists and points back to it.
            for turn in store.list_turns(session_id):
                message = store.get_message(turn["input_message_id"])
                assert message is not None and message.turn_id == turn["turn_id"]
        assert len(reported) >= 5
    finally:
        store.close()
