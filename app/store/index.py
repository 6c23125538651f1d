"""LanceDB: the rebuildable search index (vectors and native full text) over SQLite records.

``SearchIndex`` holds one table of ``SearchRow``s (messages, valid memory fragments, environment
events) with an embedding per row. Nothing is stored only here: ``rebuild_from(store)`` recreates
the table from SQLite, and ``reconcile(store)`` embeds just the rows SQLite has and the index
lacks (run at app start, after a crash between the SQLite commit and the index write).

The embedder's name and dimension are kept in the table's schema metadata; opening the index
with a different embedder drops the table (``needs_rebuild`` becomes True) and the next
``reconcile``/``rebuild_from`` re-embeds everything.

Full text uses LanceDB's native FTS index on ``text``. Rows appended after the index was built
are still found (LanceDB searches unindexed rows flat); ``optimize()`` folds them into the index
every ``optimize_every`` rows so that flat part stays small.

Blocking and single-threaded by design: call it from one executor (embedding runs inside
``add``). ``rebuild_from``/``reconcile`` read the store, so either call them on the store's
thread or read ``store.list_searchable()`` there and pass the rows to ``rebuild_rows``/
``reconcile_rows``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS

from app.core.ports import CancelToken, Embedder
from app.core.types import EnvEvent, MemoryFragment, Message
from app.store.search_rows import SEARCH_KINDS, SearchRow, env_row, memory_row, message_row

if TYPE_CHECKING:
    from app.store.sqlite import SqliteStore

ProgressCallback = Callable[[int, int], None]
TABLE_NAME = "search_rows"


def quote(value: str) -> str:
    """Return ``value`` as a SQL string literal for a LanceDB filter (quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


class SearchIndex:
    """Vector and full-text search over the searchable records of the store."""

    def __init__(self, index_dir: Path, embedder: Embedder, *, batch_size: int = 64,
                 optimize_every: int = 256, cache_mb: tuple[int, int] = (256, 64)) -> None:
        self.index_dir = Path(index_dir)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.batch_size = batch_size
        self.optimize_every = optimize_every
        self.needs_rebuild = False
        self._unoptimized = 0
        # Lance caches opened indices and file metadata per session, by default up to 6 GB and
        # 1 GB: a desktop app appending events all day would grow towards that. Bounded here
        # (index MB, metadata MB); queries stay fast because the index is small and local.
        session = lancedb.Session(index_cache_size_bytes=cache_mb[0] << 20, metadata_cache_size_bytes=cache_mb[1] << 20)
        self._db = lancedb.connect(str(self.index_dir), session=session)
        self._table = self._open_or_create()

    # ------------------------------------------------------------------ table

    def _schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("session_id", pa.string(), nullable=False),
                pa.field("kind", pa.string(), nullable=False),
                pa.field("text", pa.string(), nullable=False),
                pa.field("at", pa.string(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), self.embedder.dim), nullable=False),
            ],
            metadata={"embedder": self.embedder.name, "dim": str(self.embedder.dim)},
        )

    def _table_exists(self) -> bool:
        return TABLE_NAME in self._db.list_tables().tables

    def _create(self) -> Any:
        table = self._db.create_table(TABLE_NAME, schema=self._schema())
        table.create_index("text", config=FTS())
        self._unoptimized = 0
        return table

    def _open_or_create(self) -> Any:
        if not self._table_exists():
            return self._create()
        table = self._db.open_table(TABLE_NAME)
        metadata = table.schema.metadata or {}
        size = table.schema.field("vector").type.list_size
        if size != self.embedder.dim or metadata.get(b"embedder") != self.embedder.name.encode():
            # Vectors of another model are meaningless for this one: start over.
            self._db.drop_table(TABLE_NAME)
            self.needs_rebuild = True
            return self._create()
        return table

    def _reset(self) -> None:
        if self._table_exists():
            self._db.drop_table(TABLE_NAME)
        self._table = self._create()

    def optimize(self) -> None:
        """Fold appended rows into the full-text index and compact small files."""
        self._table.optimize()
        self._unoptimized = 0

    # ------------------------------------------------------------------ writing

    def add(self, rows: Iterable[SearchRow], *, on_progress: ProgressCallback | None = None,
            cancel: CancelToken | None = None,
            vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int:
        """Embed and upsert ``rows`` (by id) in batches; return how many were written.

        ``on_progress(done, total)`` is called after each batch; ``cancel`` stops between
        batches (rows written so far stay). ``vectors`` holds embeddings the caller already has
        (by row id, of the row's text by this embedder); only the other rows are embedded.
        """
        unique: dict[str, SearchRow] = {}
        for row in rows:
            if row.kind not in SEARCH_KINDS:
                raise ValueError(f"search row {row.id!r}: unknown kind {row.kind!r}")
            unique[row.id] = row
        pending = list(unique.values())
        total, done = len(pending), 0
        for start in range(0, total, self.batch_size):
            if cancel is not None and cancel.cancelled:
                break
            batch = pending[start:start + self.batch_size]
            embedded = self._batch_vectors(batch, vectors or {})
            data = pa.Table.from_pylist(
                [{"id": r.id, "session_id": r.session_id, "kind": r.kind, "text": r.text,
                  "at": r.at, "vector": v} for r, v in zip(batch, embedded.tolist(), strict=True)],
                schema=self._schema())
            (self._table.merge_insert("id").when_matched_update_all()
             .when_not_matched_insert_all().execute(data))
            done += len(batch)
            self._unoptimized += len(batch)
            if on_progress is not None:
                on_progress(done, total)
        if self._unoptimized >= self.optimize_every:
            self.optimize()
        return done

    def _batch_vectors(self, batch: Sequence[SearchRow],
                       known: Mapping[str, Sequence[float] | np.ndarray]) -> np.ndarray:
        """The batch's embeddings: the given ones, the rest embedded now (in one call)."""
        out = np.zeros((len(batch), self.embedder.dim), dtype=np.float32)
        todo = [n for n, r in enumerate(batch) if r.id not in known]
        for n, row in enumerate(batch):
            if row.id in known:
                out[n] = np.asarray(known[row.id], dtype=np.float32)
        if todo:
            fresh = np.asarray(self.embedder.embed([batch[n].text for n in todo], batch_size=self.batch_size),
                               dtype=np.float32)
            if fresh.shape != (len(todo), self.embedder.dim):
                raise ValueError(f"embedder returned shape {fresh.shape}, "
                                 f"expected {(len(todo), self.embedder.dim)}")
            out[todo] = fresh
        return out

    def remove(self, ids: Iterable[str]) -> int:
        """Drop index rows (never SQLite data), e.g. for superseded memory; return the count."""
        wanted = sorted(set(ids))
        removed = 0
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            before = self._table.count_rows()
            self._table.delete(f"id IN ({', '.join(quote(i) for i in chunk)})")
            removed += before - self._table.count_rows()
        return removed

    # ------------------------------------------------------------------ reading

    def _where(self, session_id: str | None, kinds: Sequence[str] | None,
               since: str | None = None, until: str | None = None) -> str | None:
        """The SQL filter of a search: the session, the kinds, and ``since <= at < until`` (ISO
        strings compare in time order; pushed into LanceDB, so the top k are taken in the range)."""
        clauses = []
        if session_id is not None:
            clauses.append(f"session_id = {quote(session_id)}")
        if kinds is not None:
            bad = [k for k in kinds if k not in SEARCH_KINDS]
            if bad:
                raise ValueError(f"unknown search kinds {bad}; expected some of {SEARCH_KINDS}")
            if not kinds:
                return "FALSE"
            clauses.append(f"kind IN ({', '.join(quote(k) for k in kinds)})")
        if since:
            clauses.append(f"at >= {quote(since)}")
        if until:
            clauses.append(f"at < {quote(until)}")
        return " AND ".join(clauses) or None

    def search_vector(self, query: str | Sequence[float] | np.ndarray, k: int = 10, *,
                      session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None) -> list[tuple[str, float]]:
        """Return up to ``k`` (id, cosine similarity) pairs, best first (``since``/``until``:
        only rows with ``since <= at < until``)."""
        if k <= 0:
            return []
        if isinstance(query, str):
            vector = self.embedder.embed([query])[0]
        else:
            vector = np.asarray(query, dtype=np.float32)
        if vector.shape != (self.embedder.dim,):
            raise ValueError(f"query vector has shape {vector.shape}, "
                             f"expected ({self.embedder.dim},)")
        search = (self._table.search(vector, vector_column_name="vector")
                  .distance_type("cosine").select(["id", "_distance"]).limit(k))
        where = self._where(session_id, kinds, since, until)
        if where is not None:
            search = search.where(where, prefilter=True)
        return [(row["id"], 1.0 - float(row["_distance"])) for row in search.to_list()]

    def search_text(self, query: str, k: int = 10, *, session_id: str | None = None,
                    kinds: Sequence[str] | None = None, since: str | None = None,
                    until: str | None = None) -> list[tuple[str, float]]:
        """Return up to ``k`` (id, BM25 score) pairs from the full-text index, best first
        (``since``/``until`` as in ``search_vector``)."""
        if k <= 0 or not query.strip():
            return []
        search = (self._table.search(query, query_type="fts", fts_columns="text")
                  .select(["id", "_score"]).limit(k))
        where = self._where(session_id, kinds, since, until)
        if where is not None:
            search = search.where(where, prefilter=True)
        return [(row["id"], float(row["_score"])) for row in search.to_list()]

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of ``ids`` (those indexed), as float32 arrays."""
        wanted = sorted(set(ids))
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            table = (self._table.search().where(f"id IN ({', '.join(quote(i) for i in chunk)})")
                     .select(["id", "vector"]).limit(len(chunk)).to_arrow())
            for item, vec in zip(table.column("id").to_pylist(), table.column("vector").to_pylist()):
                out[item] = np.asarray(vec, dtype=np.float32)
        return out

    def index_messages(self, session_id: str, messages: Iterable[Message]) -> int:
        """Embed and index messages (the live path); return how many were written."""
        return self.add(message_row(session_id, m) for m in messages)

    def index_env_events(self, session_id: str, events: Sequence[EnvEvent],
                         vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray | None = None) -> int:
        """Index environment events (the live path; ``vectors``, one per event in order, are
        embeddings of their ``env_row`` text the caller already has); return how many."""
        known = {} if vectors is None else {e.event_id: v for e, v in zip(events, vectors, strict=True)}
        return self.add((env_row(session_id, e) for e in events), vectors=known)

    def index_memory(self, session_id: str, fragments: Iterable[MemoryFragment]) -> int:
        """Embed and index memory fragments (the live path); return how many were written."""
        return self.add(memory_row(session_id, f) for f in fragments)

    def ids(self) -> set[str]:
        """Return the ids of every indexed row."""
        table = self._table.search().select(["id"]).limit(None).to_arrow()
        return set(table.column("id").to_pylist())

    def count(self) -> int:
        """Return the number of indexed rows."""
        return int(self._table.count_rows())

    # ------------------------------------------------------------------ rebuild and reconcile

    def rebuild_rows(self, rows: Sequence[SearchRow], *,
                     on_progress: ProgressCallback | None = None,
                     cancel: CancelToken | None = None) -> int:
        """Drop the table and index ``rows`` from scratch; return how many were embedded."""
        self._reset()
        done = self.add(rows, on_progress=on_progress, cancel=cancel)
        if done:
            self.optimize()
        self.needs_rebuild = cancel is not None and cancel.cancelled
        return done

    def rebuild_from(self, store: SqliteStore, *, on_progress: ProgressCallback | None = None,
                     cancel: CancelToken | None = None) -> int:
        """Re-embed everything searchable in ``store`` into a fresh table; return the count."""
        return self.rebuild_rows(store.list_searchable(), on_progress=on_progress, cancel=cancel)

    def reconcile_rows(self, rows: Sequence[SearchRow], *,
                       on_progress: ProgressCallback | None = None,
                       cancel: CancelToken | None = None) -> int:
        """Embed the ``rows`` the index lacks and drop index rows not among ``rows``.

        Returns how many rows were embedded (dropped rows, such as superseded memory, are not
        counted).
        """
        have = self.ids()
        wanted = {row.id for row in rows}
        stale = have - wanted
        if stale:
            self.remove(stale)
        missing = [row for row in rows if row.id not in have]
        done = self.add(missing, on_progress=on_progress, cancel=cancel)
        if not (cancel is not None and cancel.cancelled):
            self.needs_rebuild = False
        return done

    def reconcile(self, store: SqliteStore, *, on_progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> int:
        """Embed only the store's searchable rows missing from the index; return how many."""
        return self.reconcile_rows(store.list_searchable(), on_progress=on_progress,
                                   cancel=cancel)
