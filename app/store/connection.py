"""The SQLite connection every part of ``SqliteStore`` shares: ownership, PRAGMAs, migrations,
transactions.

``Database`` opens one connection lazily on the first call and binds it to that thread; calls
from any other thread raise ``StoreThreadError`` (the engine calls the store only from its
single-worker ``store`` executor, DESIGN.md §3). It also holds the small generic helpers the
store's table-family parts (``app.store.catalog``, ``turns``, ``session_records``, ...) are built
from: insert with a per-session ``seq``, select, get, upsert, and the event-log write every
mutation makes inside its transaction.

Several processes may open one database at once (the desktop, ``pcm ask``, ``pcm import``):
opening and migrating are safe to race (``app.store.migrations``), and each open store holds a
``RunLease``, a locked file ``runs/<run_id>.lock`` beside the database, for as long as it is
open. The turns a store records carry its ``run_id`` (``turns.owner``); the operating system
drops the lock when the process dies, so an unfinished turn whose run holds no lease was
interrupted, while one whose run still holds it is being answered by another process now.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.errors import CoreError, NoRecordError
from app.core.types import new_id, utc_now
from app.locks import FileLock, held_elsewhere
from app.store import records as R
from app.store.migrations import MIGRATIONS, applied_migrations, apply_migrations

BUSY_TIMEOUT_MS = 5000
OPEN_ATTEMPTS = 5  # opening a fresh database while other processes create it may meet a lock
RUNS_DIR = "runs"
STALE_TMP_S = 60.0  # a lease file still unnamed after this long was left by a crash


class StoreError(CoreError):
    """The store refused an operation; ``str(err)`` says why in one line."""


class NotFoundError(StoreError, NoRecordError):
    """A session, turn or record id does not exist."""


class StoreThreadError(StoreError):
    """The store was called from a thread other than the one that owns its connection."""


class RunLease:
    """This store's claim to be alive: ``runs/<run_id>.lock``, locked while the store is open.

    The file gets its final name only once it is locked (it is locked under a temporary name
    and renamed), so another process never finds a final name that nobody holds while its owner
    lives.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.run_id = new_id()
        self._lock: FileLock | None = None

    def path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.lock"

    def acquire(self) -> None:
        if self._lock is not None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if sys.platform == "win32":  # an open file cannot be renamed or removed there: no race
                lock = FileLock(self.path(self.run_id), timeout=5.0, what="taking the run lease")
                lock.acquire()
            else:
                lock = FileLock(self.folder / f"{self.run_id}.tmp")
                if not lock.try_acquire():  # a fresh random name: nobody else can hold it
                    raise StoreError(f"could not lock {lock.path}")
                os.replace(lock.path, self.path(self.run_id))
        except OSError as err:
            raise StoreError(f"cannot write in {self.folder}: {err.strerror or err}") from err
        self._lock = lock

    def release(self) -> None:
        """Remove the lease file and unlock it (a clean close)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            with contextlib.suppress(OSError):  # (Windows: removed by the next sweep instead)
                self.path(self.run_id).unlink()
            lock.release()

    def alive(self, run_id: str | None) -> bool:
        """Whether run ``run_id`` is this one or another process's that still holds its lease."""
        if run_id is None:  # recorded before runs were tracked
            return False
        return run_id == self.run_id or held_elsewhere(self.path(run_id))

    def sweep(self) -> int:
        """Remove the lease files of runs that are gone; return how many were removed."""
        removed = 0
        if not self.folder.is_dir():
            return 0
        now = time.time()
        for path in self.folder.iterdir():
            run_id, ext = path.stem, path.suffix
            if run_id == self.run_id:
                continue
            if ext == ".tmp":
                with contextlib.suppress(FileNotFoundError):
                    if now - path.stat().st_mtime > STALE_TMP_S and not held_elsewhere(path):
                        path.unlink()
                        removed += 1
                continue
            if ext != ".lock":
                continue
            if not self.alive(run_id):  # a dead run stays dead (run ids are never reused)
                with contextlib.suppress(OSError):  # gone meanwhile, or (Windows) open somewhere
                    path.unlink()
                    removed += 1
        return removed


class Database:
    """One owned SQLite connection with transactions and generic record helpers, shared by the
    parts of ``SqliteStore``."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._conn: sqlite3.Connection | None = None
        self._owner: int | None = None
        self._depth = 0
        self._closed = False
        self.lease = RunLease(self.db_path.parent / RUNS_DIR)

    @property
    def run_id(self) -> str:
        """The id of this store's run (``turns.owner`` of the turns it records)."""
        return self.lease.run_id

    # ------------------------------------------------------------------ connection

    def connection(self) -> sqlite3.Connection:
        """Return the connection, opening it on first use; refuse calls from other threads."""
        me = threading.get_ident()
        if self._conn is None:
            if self._closed:
                raise StoreError(f"store {self.db_path} is closed")
            self._conn = self._open()
            self._owner = me
        elif self._owner != me:
            raise StoreThreadError(
                f"SqliteStore is owned by thread {self._owner}, called from {me}; "
                "call the store only from its 'store' executor"
            )
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """Connect, set the PRAGMAs, migrate, take the run lease. Other processes may do the same
        to a fresh database at this moment: a "database is locked" while they create it is waited
        out (the busy timeout, then a few more attempts)."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(OPEN_ATTEMPTS):
            # isolation_level=None: no implicit transactions; transaction() issues BEGIN/COMMIT.
            conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA foreign_keys=ON")
                apply_migrations(conn, MIGRATIONS)
            except sqlite3.DatabaseError as err:
                conn.close()
                if "locked" not in str(err) or attempt == OPEN_ATTEMPTS - 1:
                    raise StoreError(f"could not open {self.db_path}: {err}") from err
                time.sleep(0.05 * (attempt + 1))
                continue
            self.lease.acquire()
            return conn
        raise AssertionError("unreachable")

    def pragma(self, name: str) -> Any:
        """Return the value of a PRAGMA (for diagnostics and tests)."""
        if not name.isidentifier():
            raise ValueError(f"not a pragma name: {name!r}")
        return self.connection().execute(f"PRAGMA {name}").fetchone()[0]

    def migrations(self) -> list[str]:
        """Return the names of the applied migrations, in order."""
        return applied_migrations(self.connection())

    def close(self) -> None:
        """Close the connection (from the owner thread) and give up the run lease; later calls
        raise ``StoreError``."""
        if self._conn is not None:
            self.connection().close()
            self._conn = None
        self.lease.release()
        self._closed = True

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the enclosed writes atomically; nested uses become savepoints."""
        conn = self.connection()
        depth = self._depth
        conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT sp{depth}")
        self._depth = depth + 1
        try:
            yield
        except BaseException:
            self._depth = depth
            if depth == 0:
                conn.execute("ROLLBACK")
            else:
                conn.execute(f"ROLLBACK TO sp{depth}")
                conn.execute(f"RELEASE sp{depth}")
            raise
        self._depth = depth
        try:
            conn.execute("COMMIT" if depth == 0 else f"RELEASE sp{depth}")
        except sqlite3.Error:
            # A failed COMMIT (disk full, I/O error) must not leave a transaction open.
            if depth == 0 and conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @property
    def in_transaction(self) -> bool:
        """Whether a ``transaction()`` is open (on the owner thread)."""
        return self._depth > 0

    # ------------------------------------------------------------------ helpers

    def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        """The first row ``sql`` returns, or None."""
        return self.connection().execute(sql, params).fetchone()

    def next_seq(self, table: str, session_id: str) -> int:
        """The next ``seq`` of ``table``'s rows of the session."""
        row = self.one(f"SELECT COALESCE(MAX(seq), 0) + 1 FROM {table} WHERE session_id = ?", (session_id,))
        assert row is not None
        return int(row[0])

    def require_session(self, session_id: str) -> None:
        """Raise ``NotFoundError`` unless the session exists."""
        if self.one("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)) is None:
            raise NotFoundError(f"no session {session_id!r}")

    def log(self, session_id: str | None, type_: str, payload: dict[str, Any]) -> int:
        """Append an ``event_log`` entry (inside the caller's transaction); return its seq."""
        at = utc_now()
        cur = self.connection().execute(
            "INSERT INTO event_log (session_id, at, type, payload) VALUES (?, ?, ?, ?)",
            (session_id, at, type_, R.dumps(payload)),
        )
        if session_id is not None:
            self.connection().execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (at, session_id))
        return int(cur.lastrowid or 0)

    def insert(self, spec: R.RecordSpec[Any], session_id: str, obj: Any, **columns: Any) -> None:
        """Insert ``obj`` as the session's next row of its table (no log entry)."""
        row = spec.to_row(obj)
        row.update(session_id=session_id, seq=self.next_seq(spec.table, session_id), **columns)
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.connection().execute(f"INSERT INTO {spec.table} ({names}) VALUES ({marks})", tuple(row.values()))

    def add(self, spec: R.RecordSpec[Any], session_id: str, obj: Any, event: str, **columns: Any) -> None:
        """Insert ``obj`` into an existing session and log ``event``, in one transaction."""
        with self.transaction():
            self.require_session(session_id)
            self.insert(spec, session_id, obj, **columns)
            self.log(session_id, event, {spec.key: getattr(obj, spec.key)})

    def upsert(self, spec: R.RecordSpec[Any], session_id: str, obj: Any, event: str) -> None:
        """Insert ``obj``, or update its row in place (keeping ``seq``); log ``event``."""
        key = getattr(obj, spec.key)
        with self.transaction():
            self.require_session(session_id)
            row = self.one(f"SELECT session_id FROM {spec.table} WHERE {spec.key} = ?", (key,))
            if row is None:
                self.insert(spec, session_id, obj)
            elif row["session_id"] != session_id:
                raise StoreError(f"{spec.table} record {key!r} belongs to another session")
            else:
                values = spec.to_row(obj)
                sets = ", ".join(f"{name} = ?" for name in values)
                self.connection().execute(f"UPDATE {spec.table} SET {sets} WHERE {spec.key} = ?",
                                          (*values.values(), key))
            self.log(session_id, event, {spec.key: key})

    def select(self, spec: R.RecordSpec[Any], where: str, params: Sequence[Any], order: str = "seq") -> list[Any]:
        """The records of ``spec``'s table matching ``where``, in ``order``."""
        rows = self.connection().execute(f"SELECT * FROM {spec.table} WHERE {where} ORDER BY {order}", params)
        return [spec.from_row(row) for row in rows]

    def get(self, spec: R.RecordSpec[Any], key: str) -> Any | None:
        """The record of ``spec``'s table with key ``key``, or None."""
        row = self.one(f"SELECT * FROM {spec.table} WHERE {spec.key} = ?", (key,))
        return None if row is None else spec.from_row(row)

    def count_rows(self, table: str) -> int:
        """Return the number of rows of a store table (diagnostics and tests)."""
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        row = self.one(f"SELECT COUNT(*) FROM {table}")
        return int(row[0]) if row else 0
