"""SIGKILL drill: ``pcm ask``, ``pcm import`` and ``pcm store rebuild-index`` killed at random points.

Each round starts one command on a shared data folder, kills it (SIGKILL) after a random delay,
notes where it died (from the raw database, before anything repairs it), then opens the folder
the way the app does (``Engine.start``: recovery and the index catch-up) and checks:

- no committed turn is lost: every turn id seen so far (in the store at an earlier check, or
  printed by the killed ``pcm ask``) is still there;
- no turn is left unfinished ("recorded", "building", "streaming") after the open;
- no seen answer text is lost: what the killed ``pcm ask`` printed to stdout is a prefix of the
  stored (partial) answer (a piece is shown only once a checkpoint holding it has committed);
  a kill that breaks this counts, with ``lost_chars``/``unsaved_ms`` saying how much and how long;
- an import is all or nothing; the index holds exactly the store's searchable rows (an interrupted
  rebuild is finished, committed rows are indexed); ``PRAGMA integrity_check`` is ok; recorded
  turns (the killed one included) still replay exactly.

By default the commands run on the scripted fakes (``tests.store.fake_pcm``); ``--real`` runs the
real ``pcm`` (SmolLM2 and all-MiniLM-L6-v2 from ``PCM_MODELS_DIR``), much slower per round.

    python -m tests.store.crash_drill --kills 120 [--seed 7] [--real] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.core.types import Message, Role

REPO = Path(__file__).resolve().parents[2]
UNFINISHED = ("recorded", "building", "streaming")
_TURN_LINE = re.compile(r"^turn ([0-9a-f]{32}):", re.M)
_SESSION_LINE = re.compile(r"^([0-9a-f]{32})$", re.M)
READY = {"ask": "loading models", "rebuild": "loading the embedder"}  # stderr once the command has loaded
# ``--mid``: kill only once the answer streams / the rebuild embeds (the real models load for
# seconds, and most kills would land in the loading otherwise)
READY_MID = {"ask": "\nturn ", "rebuild": "embedding: "}
WORDS = ("graph", "branch", "budget", "context", "river", "lantern", "ledger", "orbit", "harbor", "signal",
         "meadow", "cobalt", "quarry", "violet", "summit", "tundra")


# ------------------------------------------------------------------ one process, its output timed


class Captured:
    """A child's stdout and stderr, read as they arrive, each chunk with its arrival time."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.out: list[tuple[float, bytes]] = []
        self.err: list[tuple[float, bytes]] = []
        self._threads = [threading.Thread(target=self._read, args=(proc.stdout, self.out), daemon=True),
                         threading.Thread(target=self._read, args=(proc.stderr, self.err), daemon=True)]
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(stream: Any, into: list[tuple[float, bytes]]) -> None:
        fd = stream.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            into.append((time.monotonic(), chunk))

    def join(self) -> None:
        for t in self._threads:
            t.join(timeout=30)

    def stdout(self) -> str:
        return b"".join(c for _, c in self.out).decode("utf-8", "replace")

    def stderr(self) -> str:
        return b"".join(c for _, c in self.err).decode("utf-8", "replace")

    def printed_at(self, chars: int) -> float | None:
        """When stdout first held more than ``chars`` characters (None: never)."""
        data = b""
        for at, chunk in self.out:
            data += chunk
            if len(data.decode("utf-8", "ignore")) > chars:
                return at
        return None


# ------------------------------------------------------------------ the report


@dataclass
class Kill:
    command: str
    delay_s: float  # after the command was ready (import: after its start)
    stage: str  # where it died, from the raw database before the next open
    seen_chars: int = 0
    stored_chars: int = 0
    lost_chars: int = 0
    unsaved_ms: float = 0.0


@dataclass
class DrillReport:
    kills: list[Kill] = field(default_factory=list)
    finished_runs: int = 0  # rounds whose command ended before its kill (not counted as kills)
    committed_lost: int = 0
    left_unfinished: int = 0
    seen_text_lost: int = 0  # kills whose printed answer is not all in the stored answer
    integrity_failures: int = 0
    partial_imports: int = 0
    index_mismatches: int = 0
    replay_differences: int = 0
    open_failures: int = 0  # the next open itself failed (counted, logged, and the drill goes on)
    tracebacks: int = 0
    turns_checked: int = 0
    replays_checked: int = 0
    seconds: float = 0.0

    def stages(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for kill in self.kills:
            out[f"{kill.command}: {kill.stage}"] = out.get(f"{kill.command}: {kill.stage}", 0) + 1
        return dict(sorted(out.items()))

    def failures(self) -> int:
        return (self.committed_lost + self.left_unfinished + self.seen_text_lost + self.integrity_failures
                + self.partial_imports + self.index_mismatches + self.replay_differences + self.open_failures
                + self.tracebacks)

    def summary(self) -> dict[str, Any]:
        streamed = [k for k in self.kills if k.command == "ask" and k.seen_chars]
        lost = [k.lost_chars for k in streamed]
        unsaved = [k.unsaved_ms for k in streamed]

        def pct(values: list[float], q: float) -> float:
            return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 1) if values else 0.0

        return {
            "kills": len(self.kills), "by_stage": self.stages(), "finished_before_kill": self.finished_runs,
            "committed_turns_lost": self.committed_lost, "turns_left_unfinished": self.left_unfinished,
            "seen_text_lost": self.seen_text_lost, "integrity_failures": self.integrity_failures,
            "partial_imports": self.partial_imports, "index_mismatches": self.index_mismatches,
            "replay_differences": self.replay_differences, "open_failures": self.open_failures,
            "tracebacks": self.tracebacks,
            "turns_checked": self.turns_checked, "replays_checked": self.replays_checked,
            "kills_mid_answer": len(streamed),
            "unsaved_tail_chars": {"median": pct([float(x) for x in lost], 0.5), "p95": pct([float(x) for x in lost], 0.95),
                                   "max": max(lost, default=0)},
            "unsaved_tail_ms": {"median": round(statistics.median(unsaved), 1) if unsaved else 0.0,
                                "p95": pct(unsaved, 0.95), "max": round(max(unsaved, default=0.0), 1)},
            "seconds": round(self.seconds, 1),
        }


# ------------------------------------------------------------------ the drill


class Drill:
    """Runs the rounds on one data folder and checks the folder after each kill."""

    def __init__(self, folder: Path, *, seed: int = 7, real: bool = False, log: Any = None,
                 doc_sizes: tuple[int, ...] = (200, 600, 1200), ready: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.ready = READY if ready is None else ready
        self.doc_sizes = doc_sizes  # messages per imported document
        self.rng = random.Random(seed)
        self.real = real
        self.log = log or (lambda _line: None)
        self.report = DrillReport()
        self.known_turns: set[str] = set()
        self.imported: dict[str, int] = {}  # session id → messages its document had
        self.sessions: list[str] = []
        self.durations: dict[str, float] = {}
        self._embedder: Any = None
        self._counter: Any = None
        self.pending_doc: tuple[str, int] = ("", 0)
        self._n = 0

    # -------------------------------------------------------------- commands

    def _argv(self, args: list[str]) -> list[str]:
        head = [sys.executable, "-m", "app.cli"] if self.real else [sys.executable, "-m", "tests.store.fake_pcm"]
        return head + ["--data-dir", str(self.folder), *args]

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.setdefault("PCM_FAKE_TOKEN_DELAY", "0.01")
        return env

    def _question(self) -> str:
        self._n += 1
        return f"question {self._n}: " + " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(3, 12))) + "?"

    def _document(self, messages: int) -> Path:
        """A fresh structured context model document (new ids) of ``messages`` messages."""
        from app.store.exchange import export_session
        from app.store.sqlite import SqliteStore

        with tempfile.TemporaryDirectory() as scratch:
            store = SqliteStore(Path(scratch) / "doc.sqlite3")
            try:
                sid = store.create_session(f"imported {self._n}")
                for i in range(0, messages, 2):
                    turn = f"{sid[:16]}{i:016x}"
                    user = Message(role=Role.USER, content=self._question(), turn_id=turn)
                    answer = Message(role=Role.ASSISTANT, content=" ".join(self.rng.choice(WORDS) for _ in range(30)),
                                     turn_id=turn)
                    store.add_message(sid, user)
                    store.add_message(sid, answer)
                doc = export_session(store, sid)
            finally:
                store.close()
        path = self.folder.parent / f"doc-{sid}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        self.pending_doc = (sid, len(doc["session"]["messages"]))
        return path

    def _command(self, kind: str) -> list[str]:
        if kind == "ask":
            args = ["ask", self._question()]
            if self.sessions and self.rng.random() < 0.7:
                args += ["--session", self.rng.choice(self.sessions)]
            return args
        if kind == "import":
            return ["import", str(self._document(self.rng.choice(self.doc_sizes)))]
        return ["store", "rebuild-index"]

    def _start(self, args: list[str]) -> Captured:
        proc = subprocess.Popen(self._argv(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._env(),
                                cwd=str(REPO))
        return Captured(proc)

    # -------------------------------------------------------------- rounds

    def _wait_ready(self, kind: str, cap: Captured) -> float:
        """Wait until the command has loaded (its first stderr line), return when it did; import
        says nothing before it writes, so its start counts."""
        started = time.monotonic()
        marker = self.ready.get(kind)
        while marker and marker not in cap.stderr() and cap.proc.poll() is None:
            if time.monotonic() - started > 300:
                raise RuntimeError(f"{kind} never became ready: {cap.stderr()[-500:]}")
            time.sleep(0.005)
        return time.monotonic()

    def calibrate(self) -> None:
        """Run each command once to its end (this also fills the folder) and time the part after
        it is ready (where a kill can hit something)."""
        for kind in ("ask", "import", "ask", "rebuild"):
            cap = self._start(self._command(kind))
            ready = self._wait_ready(kind, cap)
            cap.proc.wait(timeout=600)
            cap.join()
            if cap.proc.returncode != 0:
                raise RuntimeError(f"{kind} failed: {cap.stderr()[-2000:]}")
            self.durations[kind] = max(self.durations.get(kind, 0.0), time.monotonic() - ready)
            self._note_finished(kind, cap)
        asyncio.run(self._verify(None, None))

    def round(self) -> None:
        kind = self.rng.choices(("ask", "import", "rebuild"), weights=(6, 2, 2))[0]
        args = self._command(kind)
        cap = self._start(args)
        started = self._wait_ready(kind, cap)
        low = 0.0 if kind in self.ready else 0.5  # import: its start-up (imports) is most of it
        delay = self.rng.uniform(low, 1.05) * self.durations[kind]
        try:
            cap.proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            cap.proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        cap.proc.wait(timeout=60)
        cap.join()
        if cap.proc.returncode != -signal.SIGKILL:
            self.report.finished_runs += 1
            self.durations[kind] = max(self.durations[kind], killed_at - started)  # the folder grew
            self._note_finished(kind, cap)
            asyncio.run(self._verify(None, None))
            return
        kill = Kill(command=kind, delay_s=round(killed_at - started, 3), stage=self._stage(kind, cap))
        if "Traceback" in cap.stderr():
            self.report.tracebacks += 1
        self.report.kills.append(kill)
        asyncio.run(self._verify(kill, (cap, killed_at)))

    def _note_finished(self, kind: str, cap: Captured) -> None:
        if cap.proc.returncode != 0 or "Traceback" in cap.stderr():
            self.report.tracebacks += "Traceback" in cap.stderr()
            self.log(f"{kind} ended with {cap.proc.returncode}: {cap.stderr()[-500:]}")
        if kind == "import":
            sid, count = self.pending_doc
            self.imported[sid] = count
        self.known_turns.update(_TURN_LINE.findall(cap.stderr()))

    def _stage(self, kind: str, cap: Captured) -> str:
        """Where the process died, read from the raw database before anything repairs it."""
        db = self.folder / "pcm.sqlite3"
        if kind == "rebuild":
            return "rebuild interrupted (marker left)" if (self.folder / "index.lance" / "REBUILDING").exists() \
                else "rebuild not started or done"
        if kind == "import":
            sid = self.pending_doc[0]
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                done = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (sid,)).fetchone()
            return "import committed" if done else "import not committed"
        turns = _TURN_LINE.findall(cap.stderr())
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            rows = conn.execute(f"SELECT status FROM turns WHERE status IN {UNFINISHED}").fetchall()
        if rows:
            return "turn " + "/".join(sorted({r[0] for r in rows}))
        return "no turn yet" if not turns else "turn finished"

    # -------------------------------------------------------------- the checks after a kill

    def _engine(self) -> Any:
        from app.config import Settings
        from app.core.engine.context import EngineConfig
        from app.core.engine.facade import Engine
        from app.core.ports import ModelTokenCounter
        from app.core.runtime.executors import Executors
        from app.store.index import SearchIndex
        from app.store.sqlite import SqliteStore
        from tests.store.fake_pcm import fake_embedder

        layout = Settings(data_dir=self.folder)
        if self._embedder is None:  # loaded once; the counter is the one the turns were built with
            if self.real:
                from app.main import load_chat_model, load_embedder

                settings = Settings.load(str(self.folder))
                self._embedder = load_embedder(settings)
                self._counter = ModelTokenCounter(load_chat_model(settings))
            else:
                from app.llm.fakes import ScriptedChatModel

                self._embedder = fake_embedder()
                self._counter = ModelTokenCounter(ScriptedChatModel(context_size=8192))
        ex = Executors()
        store = ex.pool("store").submit(SqliteStore, layout.db_path).result()
        return Engine(store=store, index=SearchIndex(layout.index_dir, self._embedder), embedder=self._embedder,
                      chat=None, counter=self._counter, executors=ex, config=EngineConfig())

    async def _verify(self, kill: Kill | None, killed: tuple[Captured, float] | None) -> None:
        """Open the folder as the app does and check it (see the module doc); an open that fails
        is a failure of the drill's count, not the end of the drill."""
        try:
            await self._check(kill, killed)
        except Exception as err:  # noqa: BLE001 - counted and logged
            self.report.open_failures += 1
            self.log(f"the open after {kill.command if kill else 'a finished run'} failed: "
                     f"{type(err).__name__}: {str(err)[:300]}")

    async def _check(self, kill: Kill | None, killed: tuple[Captured, float] | None) -> None:
        engine = self._engine()
        report = self.report
        try:
            await engine.start()
            if engine._recovery.catch_up_task is not None:
                await engine._recovery.catch_up_task
            state = await engine._ctx.on_store(_store_state, engine._ctx.store, sorted(self.imported))
            report.integrity_failures += state["integrity"] != "ok"
            turns: dict[str, dict[str, Any]] = state["turns"]
            report.turns_checked = len(turns)
            printed = set(_TURN_LINE.findall(killed[0].stderr())) if killed else set()
            lost = (self.known_turns | printed) - set(turns)
            report.committed_lost += len(lost)
            unfinished = [t for t, row in turns.items() if row["status"] in UNFINISHED]
            report.left_unfinished += len(unfinished)
            for sid, count in self.imported.items():  # (later asks may continue an imported session)
                report.partial_imports += state["imported"].get(sid, 0) < count
            if kill is not None and kill.command == "import":
                self._check_import(state, killed)
            ids = await engine._ctx.on_index(engine._ctx.index.ids)
            report.index_mismatches += (ids != state["searchable"]) or engine._ctx.index.needs_rebuild
            if kill is not None and kill.command == "ask" and killed is not None:
                await self._check_answer(engine, kill, killed, turns)
            self.known_turns |= set(turns)
            self.sessions = state["sessions"]
            if lost or unfinished:
                self.log(f"lost {sorted(lost)} unfinished {unfinished}")
        finally:
            await engine.close()

    def _check_import(self, state: dict[str, Any], killed: tuple[Captured, float] | None) -> None:
        sid, count = self.pending_doc
        has = state["imported_now"].get(sid, 0)
        if has:
            self.imported[sid] = count
            self.report.partial_imports += has != count
        elif killed is not None and _SESSION_LINE.search(killed[0].stdout()):
            self.report.committed_lost += 1  # it said the import was done

    async def _check_answer(self, engine: Any, kill: Kill, killed: tuple[Captured, float],
                            turns: dict[str, dict[str, Any]]) -> None:
        cap, killed_at = killed
        printed = _TURN_LINE.findall(cap.stderr())
        out = cap.stdout()
        seen = out  # `pcm ask` prints the answer alone on stdout (what it used goes to stderr first)
        if not printed or not seen:
            return
        turn_id = printed[-1]
        row = turns.get(turn_id)
        stored = row["answer"] if row else ""
        if seen == stored + "\n":  # the line break printed after a finished answer
            seen = stored
        kill.seen_chars, kill.stored_chars = len(seen), len(stored)
        common = len(os.path.commonprefix([seen, stored]))
        if common < len(seen):
            kill.lost_chars = len(seen) - common
            first_unsaved = cap.printed_at(len(prefix) + common)
            kill.unsaved_ms = round((killed_at - first_unsaved) * 1000, 1) if first_unsaved else 0.0
            self.report.seen_text_lost += 1
            self.log(f"turn {turn_id}: lost {kill.lost_chars} chars printed {kill.unsaved_ms} ms before the kill")
        if row and row["has_build"]:
            self.report.replays_checked += 1
            diffs = await engine.replay(turn_id)
            if diffs:
                self.report.replay_differences += 1
                self.log(f"turn {turn_id}: replay differs: {diffs[:3]}")

    def run(self, kills: int) -> DrillReport:
        started = time.monotonic()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.calibrate()
        while len(self.report.kills) < kills:
            self.round()
            if len(self.report.kills) % 10 == 0 and self.report.kills:
                self.log(f"{len(self.report.kills)} kills, {self.report.failures()} failures")
        self.report.seconds = time.monotonic() - started
        return self.report


def _store_state(store: Any, imported: list[str]) -> dict[str, Any]:
    """What the checks read from the store, on its thread."""
    db = store._db()
    turns = {}
    for row in db.execute("SELECT t.turn_id, t.status, t.record, m.content AS answer FROM turns t "
                          "LEFT JOIN messages m ON m.message_id = t.answer_message_id"):
        record = json.loads(row["record"] or "{}")
        turns[row["turn_id"]] = {"status": row["status"], "answer": row["answer"] or "",
                                 "has_build": bool(record.get("build"))}
    counts = {sid: n for sid, n in db.execute(
        "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id")}
    return {
        "integrity": store.pragma("integrity_check"),
        "turns": turns,
        "sessions": [r["session_id"] for r in store.list_sessions()][-5:],
        "imported": {sid: counts.get(sid, 0) for sid in imported},
        "imported_now": counts,
        "searchable": {row.id for row in store.list_searchable()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=120)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--real", action="store_true", help="the real pcm with the real models")
    parser.add_argument("--dir", help="data folder (default: a fresh temporary one)")
    parser.add_argument("--mid", action="store_true", help="kill ask/rebuild only once they stream/embed")
    args = parser.parse_args()
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="pcm-drill-")) / "data"
    drill = Drill(folder, seed=args.seed, real=args.real, log=lambda line: print(line, file=sys.stderr, flush=True),
                  doc_sizes=(20, 40, 80) if args.real else (200, 600, 1200),  # the real embedder is slower
                  ready=READY_MID if args.mid else READY)
    report = drill.run(args.kills)
    print(json.dumps(report.summary(), indent=2))
    print(json.dumps([asdict(k) for k in report.kills]), file=sys.stderr)
    return 0 if report.failures() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
