"""The search index's LanceDB table: its life across crashes, rebuilds and other processes.

``IndexTable`` holds the handle of the one table ``SearchIndex`` searches and writes, and the
files beside it that make it safe to share (several processes may open one data folder):

- Opening is idempotent: the table and its indices are created, if missing, under a file lock
  (``.create.lock``), so processes opening a fresh folder at once never race; a table left
  without its indices by a crash (or made by an older build, without the filter indices) gets
  them at the next open.
- A table of another embedder (its schema's metadata names the embedder and dimension), or one
  that cannot be opened, is started over at the open, marked incomplete (the index is
  rebuildable from SQLite: nothing is lost).
- A rebuild writes the marker file ``REBUILDING`` before it drops the table and removes it once
  every row is back, all under ``.rebuild.lock``. While the marker exists the index is incomplete
  (``needs_rebuild``). A table a rebuild killed in ``drop_table`` left half deleted is read in
  full first (``reopen(verify=True)``) and made anew when it cannot be.
- Writes that lose a commit race with another process are retried on the latest version
  (``retry``, up to ``WRITE_RETRIES``); a handle whose table another process's rebuild replaced
  is opened again, for reads (``fresh``) and writes.

Whenever the handle changes (opened, made anew, opened again) the owner's ``on_open(table,
created)`` is called, so that what it counts of the table (rows, the ANN index) follows.
Blocking, like ``SearchIndex``: used from one executor.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import lancedb
import pyarrow as pa
from lancedb.index import FTS, Bitmap

from app.core.types import utc_now
from app.locks import FileLock
from app.store.held_vectors import VersionKey

TABLE_NAME = "search_rows"
REBUILD_MARKER = "REBUILDING"
WRITE_RETRIES = 8  # a commit lost to another process's is tried again, with a growing pause
LOCK_WAIT_S = 600.0  # how long to wait for another process's rebuild of the index
FILTERED = ("session_id", "kind")  # the columns searches filter by (``where_clause``): bitmap-indexed
T = TypeVar("T")

_LANCE_ERRORS = (OSError, RuntimeError, ValueError)  # what LanceDB raises for missing or broken files


def _gone(err: BaseException) -> bool:
    """Whether a LanceDB error says files of the table are gone (another process rebuilt it)."""
    text = str(err).lower()
    return "not found" in text or "no such file" in text


class IndexTable:
    """The search table's handle, opened or made safely (see the module doc)."""

    def __init__(self, index_dir: Path, schema: pa.Schema, *, cache_mb: tuple[int, int],
                 on_open: Callable[[Any, bool], None]) -> None:
        self.index_dir = index_dir
        self.schema = schema
        self._on_open = on_open
        self._created = False
        # Lance caches opened indices and file metadata per session, by default up to 6 GB and
        # 1 GB: a desktop app appending events all day would grow towards that. Bounded here
        # (index MB, metadata MB); queries stay fast because the index is small and local.
        session = lancedb.Session(index_cache_size_bytes=cache_mb[0] << 20, metadata_cache_size_bytes=cache_mb[1] << 20)
        self._db = lancedb.connect(str(index_dir), session=session)
        self.marker = index_dir / REBUILD_MARKER
        self.rebuild_lock = FileLock(index_dir / ".rebuild.lock", timeout=LOCK_WAIT_S, what="rebuilding the search index")
        with FileLock(index_dir / ".create.lock", timeout=LOCK_WAIT_S, what="creating the search index"):
            self._opened(self._open_or_create())

    @property
    def needs_rebuild(self) -> bool:
        """True while the index is incomplete: a rebuild was interrupted (or is running in another
        process), or the embedder changed; the owner's reconcile completes it."""
        return self.marker.exists()

    def version(self) -> VersionKey:
        """The table handle and its version: what an in-process copy of rows belongs to."""
        return self.table, self.table.version

    def _opened(self, table: Any) -> None:
        self.table = table
        created, self._created = self._created, False
        self._on_open(table, created)

    def _exists(self) -> bool:
        return TABLE_NAME in self._db.list_tables().tables

    def _create(self) -> Any:
        # exist_ok: a process of an older build may have created it without our lock
        table = self._db.create_table(TABLE_NAME, schema=self.schema, exist_ok=True)
        ensure_indices(table)
        self._created = True
        return table

    def _open_or_create(self) -> Any:
        """Open the table, creating what is missing (called under ``.create.lock``). A table of
        another embedder, or one that cannot be opened, is started over, marked incomplete until
        every row is embedded again."""
        table, reason = self._try_open()
        if table is not None:
            return table
        with self.rebuild_lock:
            table, reason = self._try_open()  # another process may have just rebuilt it
            if table is not None:
                return table
            self.write_marker(reason)
            return self._recreate()

    def _try_open(self) -> tuple[Any | None, str]:
        """The table (created if missing), or None and why it cannot be used."""
        if not self._exists():
            return self._create(), ""
        try:
            table = self._db.open_table(TABLE_NAME)
            metadata = table.schema.metadata or {}
            if (table.schema.field("vector").type.list_size != self.schema.field("vector").type.list_size
                    or metadata.get(b"embedder") != (self.schema.metadata or {}).get(b"embedder")):
                return None, "the embedder changed"  # vectors of another model mean nothing to this one
            ensure_indices(table)
        except _LANCE_ERRORS as err:
            return None, f"the table could not be opened: {str(err)[:200]}"
        return table, ""

    def write_marker(self, reason: str) -> None:
        """Write the rebuild marker durably before the table is dropped."""
        with open(self.marker, "w", encoding="utf-8") as out:
            json.dump({"started_at": utc_now(), "pid": os.getpid(), "reason": reason}, out)
            out.flush()
            os.fsync(out.fileno())

    def clear_marker(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.marker.unlink()

    def _recreate(self) -> Any:
        """Drop the table — also one a killed drop left half deleted — and create it empty."""
        try:
            if self._exists():
                self._db.drop_table(TABLE_NAME)
        except _LANCE_ERRORS:
            pass
        shutil.rmtree(self.index_dir / f"{TABLE_NAME}.lance", ignore_errors=True)
        return self._create()

    def reset(self) -> None:
        """Drop the table and start it empty (a rebuild, under ``rebuild_lock``, marked)."""
        self._opened(self._recreate())

    def reopen(self, *, verify: bool = False) -> None:
        """Open the table again (another process may have replaced it by a rebuild). With
        ``verify`` (a rebuild is pending: a process killed while it dropped the table may have
        left it half deleted) every row and the full-text index are read, and a table that cannot
        be read is made anew."""
        try:
            table = self._db.open_table(TABLE_NAME) if self._exists() else self._create()
            if verify:
                table.search().select(["id"]).limit(None).to_arrow()
                table.search("probe", query_type="fts", fts_columns="text").limit(1).to_list()
        except _LANCE_ERRORS:
            if not verify:
                raise
            table = self._recreate()
        self._opened(table)

    @contextlib.contextmanager
    def rebuilding(self) -> Iterator[bool]:
        """Hold the rebuild lock when a rebuild is pending (waiting for another process that runs
        one); yield whether one is still pending once the lock is held."""
        if not self.needs_rebuild:
            yield False
            return
        with self.rebuild_lock:
            self.reopen(verify=True)
            yield self.needs_rebuild

    def retry(self, write: Callable[[], T]) -> T:
        """Run a table write, again on the latest version when another process committed a
        conflicting one first (Lance reports a retryable commit conflict), or on the table
        opened again when another process's rebuild replaced it."""
        for attempt in range(WRITE_RETRIES):
            try:
                return write()
            except _LANCE_ERRORS as err:
                text = str(err).lower()
                conflict = any(w in text for w in ("conflict", "retry", "concurrent"))
                if attempt == WRITE_RETRIES - 1 or not (conflict or _gone(err)):
                    raise
                time.sleep(0.02 * (2 ** attempt))
                if conflict:
                    self.table.checkout_latest()
                else:
                    self.reopen()
        raise AssertionError("unreachable")

    def fresh(self, read: Callable[[], T]) -> T:
        """Run a table read; when another process's rebuild replaced the table under this handle,
        open it again and read once more."""
        try:
            return read()
        except _LANCE_ERRORS as err:
            if not _gone(err):
                raise
        self.reopen()
        return read()


def ensure_indices(table: Any) -> None:
    """Give ``table`` the indices it lacks (a crash may come between creating it and them, and
    a table of an older build has no filter indices): the full-text index on ``text``, and
    bitmap indices on the columns every query filters by (``FILTERED``). Without those a
    query restricted to a session scans its column: at 100,000 rows the full-text query took
    30-37 ms with the filter against 9-16 ms with the indices."""
    have = {tuple(getattr(ix, "columns", [])) for ix in table.list_indices()}
    if ("text",) not in have:
        table.create_index("text", config=FTS(), replace=True)
    for column in FILTERED:
        if (column,) not in have:
            table.create_index(column, config=Bitmap(), replace=True)
