"""Two writers of one folder's memories (issue 32, finding 2): a long-running writer (the app or
``pcm mcp``: ``tests/store/memory_writer.py``, which keeps every memory it read) beside ``pcm
memory revoke|edit|pin|add`` in other processes. Each round the user revokes one prohibition, pins
another, edits a fact and adds a preference; then the long-running writer learns something
related to all of them (a new prohibition sharing their entity, so its write links to them and
evolves them). A revoked memory must stay revoked, a pin pinned, an edit edited, an addition there
— in the store and in the long-running process's own contexts — in every round."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NAMES = ["Orion", "Vega", "Lyra", "Draco", "Cygnus", "Perseus", "Auriga", "Carina", "Columba", "Dorado",
         "Fornax", "Grus", "Hydrus", "Indus", "Lupus", "Mensa", "Norma", "Pavo", "Pyxis", "Tucana"]


class Writer:
    def __init__(self, data: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.store.memory_writer", str(data)], env=env,
                                     cwd=str(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, **command: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the long-running writer ended ({self.proc.poll()})"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        assert self.proc.wait(timeout=120) == 0


def _pcm(data: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tests.store.fake_pcm", "--data-dir", str(data), *args], env=env,
                          cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr[-2000:])
    return done.stdout


def _stored(data: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    rows = json.loads(_pcm(data, env, "memory", "list", "--all", "--json"))
    return {r["content"]: r for r in rows}


def run_rounds(tmp_path: Path, rounds: int) -> dict[str, int]:
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PCM_FAKE_TOKEN_DELAY": "0", "PCM_FAKE_REPLY_WORDS": "5"}
    writer = Writer(data, env)
    held = {"revoke": 0, "pin": 0, "edit": 0, "add": 0}
    try:
        for n, name in enumerate(NAMES[:rounds]):
            writer.ask(say=f"Never deploy {name} on Fridays. Never email {name} logs. "
                              f"My {name} build server is box {n}.")
            stored = _stored(data, env)
            revoked, pinned = stored[f"deploy {name} on Fridays"], stored[f"email {name} logs"]
            fact = stored[f"{name.lower()} build server is box {n}"]
            _pcm(data, env, "memory", "revoke", revoked["fragment_id"])
            _pcm(data, env, "memory", "pin", pinned["fragment_id"])
            _pcm(data, env, "memory", "edit", fact["fragment_id"], f"{name.lower()} build server is box {n}0")
            _pcm(data, env, "memory", "add", f"I prefer short answers about {name}.")
            writer.ask(say=f"Never restart {name} at night.")  # links to (and evolves) the two above
            stored = _stored(data, env)
            seen = {m["fragment_id"]: m for m in writer.ask(memories=1)}
            context = writer.ask(build=f"Should I deploy {name} on Friday or email the {name} logs?")["text"]
            profile = [line for line in context.splitlines() if line.startswith("Never: ")]
            for view in (stored[f"deploy {name} on Fridays"], seen[revoked["fragment_id"]]):
                assert view["revoked"] if "revoked" in view else view["state"] == "revoked", (name, view)
            assert not [line for line in profile if f"deploy {name} on Fridays" in line], (name, profile)
            held["revoke"] += 1
            assert stored[f"email {name} logs"]["pinned"] and seen[pinned["fragment_id"]]["pinned"], name
            assert [line for line in profile if f"email {name} logs" in line], (name, profile)
            held["pin"] += 1
            assert stored[fact["content"]]["state"] == "edited" and not seen[fact["fragment_id"]]["valid"], name
            assert stored[f"{name.lower()} build server is box {n}0"]["state"] == "valid", name
            held["edit"] += 1
            assert stored[f"short answers about {name}"]["state"] == "valid", name
            held["add"] += 1
    finally:
        writer.close()
    return held


def test_two_writers_keep_revoke_pin_edit_and_add(tmp_path: Path) -> None:
    assert run_rounds(tmp_path, 2) == {"revoke": 2, "pin": 2, "edit": 2, "add": 2}


@pytest.mark.slow
def test_two_writers_twenty_rounds(tmp_path: Path) -> None:
    held = run_rounds(tmp_path, 20)
    print(f"\ntwo writers, 20 rounds: held {held}")
    assert held == {"revoke": 20, "pin": 20, "edit": 20, "add": 20}


def test_processes_naming_a_new_topic_at_once_write_one_topic(tmp_path: Path) -> None:
    """Four ``pcm ask`` processes started at the same moment on one folder, each naming the same
    new things: each name is one topic (its id comes from the name, and a second writer adds its
    aliases to the stored topic), never one topic row per process."""
    import time

    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PCM_FAKE_TOKEN_DELAY": "0", "PCM_FAKE_REPLY_WORDS": "5",
           "PCM_FAKE_START_AT": str(time.time() + 6)}
    said = ["How do I scale Kubernetes and Grafana?", "Is kubernetes or grafana slower?",
            "Grafana dashboards for Kubernetes, please.", "Kubernetes with Grafana on one box?"]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.store.fake_pcm", "--data-dir", str(data), "ask", text],
                              env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for text in said]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    topics = json.loads(_pcm(data, {**env, "PCM_FAKE_START_AT": ""}, "topics", "--json"))["topics"]
    names = sorted(t["name"].lower() for t in topics)
    assert names.count("kubernetes") == 1 and names.count("grafana") == 1, names
    kube = next(t for t in topics if t["name"].lower() == "kubernetes")
    assert kube["mentions"] >= 2  # the mentions of several processes, under the one topic
