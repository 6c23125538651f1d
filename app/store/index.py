"""LanceDB: the rebuildable search index (vectors and native full text) over SQLite records.

``SearchIndex`` holds one table of ``SearchRow``s (messages, valid memory fragments, environment
events) with an embedding per row. Nothing is stored only here: ``rebuild_from(store)`` recreates
the table from SQLite, and ``reconcile(store)`` embeds just the rows SQLite has and the index
lacks (run at app start, after a crash between the SQLite commit and the index write).

The embedder's name and dimension are kept in the table's schema metadata; opening the index
with a different embedder drops the table (``needs_rebuild`` becomes True) and the next
``reconcile``/``rebuild_from`` re-embeds everything.

The table's life across crashes, rebuilds and other processes (several may share one data
folder: the create and rebuild locks, the ``REBUILDING`` marker, retried writes, handles opened
again) is ``app.store.index_table.IndexTable``'s. ``reconcile`` reads the index's ids before
the store's rows: a row another process commits and indexes meanwhile is never mistaken for a
stale one.

Full text uses LanceDB's native FTS index on ``text``; the columns queries filter by
(``session_id``, ``kind``) have bitmap indices, so a query kept to a session does not scan them.
Rows appended after the indices were built are still found (LanceDB searches unindexed rows
flat); ``optimize()`` folds them into the indices every ``optimize_every`` rows so that flat
part stays small: inline in ``add`` (so a small
workspace, and every evaluation, sees the same index whatever the timing), or, once the table has
an ANN index (folding then updates its partitions too) and an upkeep driver claims the work
(``upkeep_driven``: the engine's background ``IndexUpkeep``), in ``upkeep``, off the writer's path.

Vectors are searched flat (exact) until the table reaches ``AnnPolicy.min_rows``; from then on
``upkeep`` trains an approximate (IVF-PQ) index and queries probe it, re-ranking their best
candidates exactly (``app.store.ann``). ``search_vector(trace=...)`` tells which path served a
query; ``exact=True`` forces the flat scan (the benchmark's baseline and the ANN recall check).

Blocking and single-threaded by design: call it from one executor (embedding runs inside
``add``). ``rebuild_from``/``reconcile`` read the store, so either call them on the store's
thread or read ``store.list_searchable()`` there and pass the rows to ``rebuild_rows``/
``reconcile_rows``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from app.core.ports import CancelToken, Embedder
from app.core.types import EnvEvent, Evidence, MemoryFragment, Message
from app.locks import FileLock
from app.store import ann
from app.store.ann import AnnPolicy, VectorPath
from app.store.held_vectors import SessionVectors
from app.store.index_table import IndexTable
from app.store.kind_vectors import KindVectors
from app.store.search_rows import (
    SEARCH_KINDS,
    SearchRow,
    env_row,
    memory_row,
    message_row,
    part_row,
    quote,
    where_clause,
)

if TYPE_CHECKING:
    from app.store.sqlite import SqliteStore

ProgressCallback = Callable[[int, int], None]


class SearchIndex:
    """Vector and full-text search over the searchable records of the store."""

    def __init__(self, index_dir: Path, embedder: Embedder, *, batch_size: int = 64, write_size: int = 512,
                 optimize_every: int = 256, cache_mb: tuple[int, int] = (256, 64),
                 ann_policy: AnnPolicy | None = None) -> None:
        self.index_dir = Path(index_dir)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.batch_size = batch_size  # rows embedded in one call
        self.write_size = write_size  # rows written in one upsert (at least; see ``add``)
        self.optimize_every = optimize_every
        self._unoptimized = 0
        self._counts = threading.Lock()  # ``_unoptimized``/``_rows``: written by the writer and the upkeep
        self.ann_policy = ann_policy or AnnPolicy()
        self.upkeep_driven = False  # True: ``upkeep`` (run by the engine in the background) optimizes, not ``add``
        self._trained: int | None = None  # rows the table's ANN index was trained on (None: flat search)
        self._rows = 0  # rows in the table, as last counted plus rows written since
        self._memories = KindVectors()  # the memory channel's search, served in-process
        self._held = SessionVectors()  # a session's vector search past the ANN threshold, in-process
        self._lance = IndexTable(self.index_dir, self._schema(), cache_mb=cache_mb, on_open=self._opened)

    @property
    def needs_rebuild(self) -> bool:
        """True while the index is incomplete: a rebuild was interrupted (or is running in another
        process), or the embedder changed; ``reconcile``/``finish_rebuild`` complete it."""
        return self._lance.needs_rebuild

    # ------------------------------------------------------------------ the table's rows

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

    def _opened(self, table: Any, created: bool) -> None:
        """The table's handle changed (``IndexTable``): read what it has, its rows and the ANN
        index it was given, if any; a table made anew has nothing to fold in."""
        if created:
            self._unoptimized = 0
        self._trained = ann.trained_rows(list(table.list_indices()))
        self._rows = int(table.count_rows())

    def optimize(self) -> None:
        """Fold appended rows into the full-text index and compact small files.

        One process at a time (``.optimize.lock``): concurrent optimizations rewrite the same
        files and keep preempting each other. When another process is optimizing, this one skips
        (that run folds these rows in too, or the next one here will).
        """
        lock = FileLock(self.index_dir / ".optimize.lock")
        if not lock.try_acquire():
            return
        try:
            self._fold()
        finally:
            lock.release()

    def _fold(self) -> None:
        """Fold the rows written since the last optimization into the indices (the caller holds
        ``.optimize.lock``); rows written meanwhile stay counted."""
        with self._counts:
            folded = self._unoptimized
        before = self._lance.version()
        self._lance.retry(lambda: self._lance.table.optimize())
        self._held.unchanged(before, self._lance.version())
        with self._counts:
            self._unoptimized = max(0, self._unoptimized - folded)

    # ------------------------------------------------------------------ upkeep (background)

    @property
    def vector_path(self) -> VectorPath:
        """The path a vector query over the message and env rows takes now: "ann" once the table
        has an approximate index, else "flat"."""
        return "flat" if self._trained is None else "ann"

    def _folds_in_background(self) -> bool:
        """Whether ``upkeep`` folds written rows in (an ANN index and a driver), not ``add``."""
        return self.upkeep_driven and self._trained is not None

    def upkeep_due(self) -> bool:
        """Whether ``upkeep`` has work: the ANN index to train (again), or rows to fold into the
        indices when that is the upkeep's job. Cheap (counters only): the engine asks it on the
        loop every second."""
        with self._counts:
            unoptimized, rows = self._unoptimized, self._rows
        fold = self._folds_in_background() and unoptimized >= self.optimize_every
        return fold or ann.due(self.ann_policy, rows, self._trained)

    def upkeep_backlog(self, *, retrain: bool = True) -> int:
        """How many rows the upkeep has yet to take in: those written and not folded when folding
        is its job, or, when the ANN index is due to be trained (again), those it was not trained
        on; whichever is more. ``retrain=False``: as ``upkeep(retrain=False)`` would take them in
        (an index due to be trained again is not counted). Counters only."""
        with self._counts:
            unoptimized, rows = self._unoptimized, self._rows
        untrained = rows - (self._trained or 0) if self._train_due(rows, retrain) else 0
        return max(unoptimized if self._folds_in_background() else 0, untrained)

    def _train_due(self, rows: int, retrain: bool) -> bool:
        return ann.due(self.ann_policy, rows, self._trained) and (retrain or self._trained is None)

    def upkeep(self, *, force: bool = False, retrain: bool = True) -> str:
        """Train the ANN index when it is due (``app.store.ann.due``) and fold written rows into
        the indices; return what was done ("trained", "folded", "trained+folded" or "").

        Blocking for seconds to minutes (training at 100,000 rows): run it on a thread of its own.
        ``force`` folds even fewer than ``optimize_every`` rows. ``retrain=False`` trains only a
        table that has no ANN index yet: training again (a minute and more of both cores at
        100,000 rows) waits for a later upkeep, while a history import is under way. One process
        at a time (``.optimize.lock``); another process's upkeep makes this one skip."""
        lock = FileLock(self.index_dir / ".optimize.lock")
        if not lock.try_acquire():
            return ""
        try:
            rows = self.count()
            with self._counts:
                self._rows = rows
            done = []
            if self._train_due(rows, retrain):
                self._train(rows)
                done.append("trained")
            with self._counts:
                fold = self._unoptimized >= (1 if force else self.optimize_every)
            if fold:
                self._fold()
                done.append("folded")
            return "+".join(done)
        finally:
            lock.release()

    def _train(self, rows: int) -> None:
        """Train an ANN index named for ``rows``, then drop the one it replaces (queries use the
        old one meanwhile; training takes seconds to minutes)."""
        name = ann.index_name(rows)
        config = ann.config(self.ann_policy, rows, self.embedder.dim)
        before = self._lance.version()
        self._lance.retry(lambda: self._lance.table.create_index("vector", config=config, name=name, replace=True))
        for old in ann.ann_indices(list(self._lance.table.list_indices())):
            if old != name:
                self._lance.retry(lambda old=old: self._lance.table.drop_index(old))
        self._held.unchanged(before, self._lance.version())
        self._trained = rows

    # ------------------------------------------------------------------ writing

    def add(self, rows: Iterable[SearchRow], *, on_progress: ProgressCallback | None = None,
            cancel: CancelToken | None = None,
            vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int:
        """Embed and upsert ``rows`` (by id); return how many were written.

        Rows are taken a write window at a time (``write_size`` rows, rounded up to whole
        embedding batches) and each window is upserted once, its rows in the order given: an
        upsert joins the rows with every id of the table, so one upsert per several embedding
        batches keeps the writes a small share of an import (and makes fewer table versions).
        Within a window the rows are embedded ``batch_size`` at a time, longest text first: the
        embedder pads a batch to its longest text, so batches of like length waste little (as
        one embedder call over the whole window would, which orders its texts by length).
        ``on_progress(done, total)`` is called after each embedding batch; ``cancel`` stops
        between them: the rows embedded so far are written and stay — of a window cut short,
        that is its longest texts, not its first rows. ``vectors`` holds embeddings the caller
        already has (by row id, of the row's text by this embedder); only the other rows are
        embedded.
        """
        unique: dict[str, SearchRow] = {}
        for row in rows:
            if row.kind not in SEARCH_KINDS:
                raise ValueError(f"search row {row.id!r}: unknown kind {row.kind!r}")
            unique[row.id] = row
        pending = list(unique.values())
        total, done = len(pending), 0
        window = -(-max(1, self.write_size) // self.batch_size) * self.batch_size
        progress = (lambda n: on_progress(n, total)) if on_progress is not None else None
        for start in range(0, total, window):
            written, whole = self._add_window(pending[start:start + window], start, vectors or {}, progress, cancel)
            done += written
            if not whole:  # cancelled
                break
        if self._unoptimized >= self.optimize_every and not self._folds_in_background():
            self.optimize()
        return done

    def _add_window(self, rows: Sequence[SearchRow], before: int,
                    known: Mapping[str, Sequence[float] | np.ndarray],
                    progress: Callable[[int], None] | None, cancel: CancelToken | None) -> tuple[int, bool]:
        """Embed one write window's ``rows`` a batch at a time, longest text first, and upsert them
        (in their given order) once all are embedded, or, when ``cancel`` stops it, those that
        are; ``before``: rows of the call embedded before this window. Return how many rows were
        written and whether the window was whole."""
        order = sorted(range(len(rows)), key=lambda n: -len(rows[n].text))  # stable: ties keep their order
        got: dict[int, np.ndarray] = {}
        written = 0

        def write() -> int:
            return self._upsert([(rows[n], got[n]) for n in sorted(got)]) if got else 0

        for start in range(0, len(order), self.batch_size):
            if cancel is not None and cancel.cancelled:
                return write(), False
            batch = order[start:start + self.batch_size]
            got.update(zip(batch, self._batch_vectors([rows[n] for n in batch], known), strict=True))
            written = write() if len(got) == len(rows) else 0
            if progress is not None:
                progress(before + len(got))
        return written, True

    def _upsert(self, rows: Sequence[tuple[SearchRow, np.ndarray]]) -> int:
        """Write embedded rows in one upsert (by id); return how many."""
        schema = self._lance.schema
        vectors = np.ascontiguousarray(np.stack([v for _, v in rows]), dtype=np.float32).reshape(-1)
        data = pa.Table.from_arrays(  # columns from the rows and the vectors' buffer: no Python float per value
            [pa.array([getattr(r, name) for r, _ in rows], pa.string()) for name in schema.names[:-1]]
            + [pa.FixedSizeListArray.from_arrays(pa.array(vectors), self.embedder.dim)], schema=schema)
        before = self._lance.version()
        self._lance.retry(lambda: (self._lance.table.merge_insert("id").when_matched_update_all()
                             .when_not_matched_insert_all().execute(data)))
        self._held.written(before, self._lance.version(), [(r.id, r.session_id, r.kind, r.at, v) for r, v in rows])
        with self._counts:
            self._unoptimized += len(rows)
            self._rows += len(rows)
        return len(rows)

    def _batch_vectors(self, batch: Sequence[SearchRow],
                       known: Mapping[str, Sequence[float] | np.ndarray]) -> np.ndarray:
        """The batch's embeddings: the given ones, the rest embedded now (in one call)."""
        out = np.zeros((len(batch), self.embedder.dim), dtype=np.float32)
        todo = [n for n, r in enumerate(batch) if r.id not in known]
        for n, row in enumerate(batch):
            if row.id in known:
                out[n] = np.asarray(known[row.id], dtype=np.float32)
        if todo:
            out[todo] = self._embed([batch[n].text for n in todo])
        return out

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """The embedder's vectors of ``texts`` (one call), checked for shape."""
        fresh = np.asarray(self.embedder.embed(texts, batch_size=self.batch_size), dtype=np.float32)
        if fresh.shape != (len(texts), self.embedder.dim):
            raise ValueError(f"embedder returned shape {fresh.shape}, expected {(len(texts), self.embedder.dim)}")
        return fresh

    def remove(self, ids: Iterable[str]) -> int:
        """Drop index rows (never SQLite data), e.g. for superseded memory; return the count."""
        wanted = sorted(set(ids))
        removed = 0
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            before = self.count()
            where = f"id IN ({', '.join(quote(i) for i in chunk)})"
            version = self._lance.version()
            self._lance.retry(lambda where=where: self._lance.table.delete(where))
            self._held.removed(version, self._lance.version(), chunk)
            removed += before - self.count()
        with self._counts:
            self._rows -= removed
        return removed

    # ------------------------------------------------------------------ reading

    def search_vector(self, query: str | Sequence[float] | np.ndarray, k: int = 10, *,
                      session_id: str | None = None,
                      kinds: Sequence[str] | None = None, since: str | None = None,
                      until: str | None = None, exact: bool = False, held: bool = True,
                      trace: list[str] | None = None) -> list[tuple[str, float]]:
        """Return up to ``k`` (id, cosine similarity) pairs, best first (``since``/``until``:
        only rows with ``since <= at < until``). With an ANN index the candidates come from it
        and are re-ranked exactly; a query it answers with fewer than ``k`` rows (few rows of the
        filter in the probed partitions) is asked again flat. ``exact``: always flat. ``trace``
        gets the path that served the query appended ("flat", "ann" or "held"). Past the ANN
        threshold a session's query is answered exactly from its vectors held in-process
        (``app.store.held_vectors``: "held") unless the session has more than
        ``ann_policy.held_rows`` rows or ``held`` is False."""
        if k <= 0:
            return []
        if isinstance(query, str):
            vector = self.embedder.embed([query])[0]
        else:
            vector = np.asarray(query, dtype=np.float32)
        if vector.shape != (self.embedder.dim,):
            raise ValueError(f"query vector has shape {vector.shape}, "
                             f"expected ({self.embedder.dim},)")
        if session_id is None and kinds is not None and list(kinds) == ["memory"]:  # few rows: held in-process
            if trace is not None:
                trace.append("flat")
            return self._memories.search(self._lance.fresh(lambda: (self._lance.table, self._lance.table.version)), self._memory_rows,
                                         vector, k, since=since, until=until)
        where = where_clause(session_id, kinds, since, until)
        if session_id is not None and held and not exact and self._trained is not None:
            held = self._held.search(session_id, self._lance.fresh(self._lance.version), self._session_rows, vector, k,
                                     kinds=kinds, since=since, until=until)
            if held is not None:
                if trace is not None:
                    trace.append("held")
                return held
        path: VectorPath = "flat" if exact else self.vector_path
        rows = self._lance.fresh(lambda: self._vector_rows(vector, k, where, path))
        if path == "ann" and len(rows) < k:
            path, rows = "flat", self._lance.fresh(lambda: self._vector_rows(vector, k, where, "flat"))
        if trace is not None:
            trace.append(path)
        return [(row["id"], 1.0 - float(row["_distance"])) for row in rows]

    def warm(self, session_id: str) -> None:
        """Read ahead what the session's first recall would otherwise wait for: its rows held
        in-process (past the ANN threshold; ~60 ms at 10,000 turns, 1–2 s at 100,000), the memory
        rows, and the full-text index's files (one query). The queries' answers are dropped."""
        zero = np.zeros(self.embedder.dim, dtype=np.float32)
        if self._trained is not None:
            self.search_vector(zero, 1, session_id=session_id)
        self.search_vector(zero, 1, kinds=["memory"])
        self.search_text("pcm", 1, session_id=session_id)

    def _vector_rows(self, vector: np.ndarray, k: int, where: str | None, path: VectorPath) -> list[dict[str, Any]]:
        """One top-``k`` cosine query: flat (every row the filter passes) or on the ANN index."""
        search = (self._lance.table.search(vector, vector_column_name="vector")
                  .distance_type("cosine").select(["id", "_distance"]).limit(k))
        if path == "flat":
            if self._trained is not None:  # without an index the query is flat already (as it always was)
                search = search.bypass_vector_index()
        else:
            search = search.nprobes(self.ann_policy.nprobes).refine_factor(self.ann_policy.refine_factor)
        return (search if where is None else search.where(where, prefilter=True)).to_list()

    def _session_rows(self, session_id: str) -> pa.Table | None:
        """Every row of the session (id, kind, at, vector), or None when it has more than
        ``ann_policy.held_rows``."""
        where = where_clause(session_id, None)
        if self._lance.fresh(lambda: self._lance.table.count_rows(where)) > self.ann_policy.held_rows:
            return None
        return self._lance.fresh(lambda: self._lance.table.search().where(where).select(["id", "kind", "at", "vector"])
                           .limit(None).to_arrow())

    def _memory_rows(self) -> pa.Table:
        """Every memory row's id, time and vector (``KindVectors`` reads them when the table moved)."""
        return self._lance.fresh(lambda: self._lance.table.search().where("kind = 'memory'").select(["id", "at", "vector"])
                           .limit(None).to_arrow())

    def search_text(self, query: str, k: int = 10, *, session_id: str | None = None,
                    kinds: Sequence[str] | None = None, since: str | None = None,
                    until: str | None = None) -> list[tuple[str, float]]:
        """Return up to ``k`` (id, BM25 score) pairs from the full-text index, best first
        (``since``/``until`` as in ``search_vector``)."""
        if k <= 0 or not query.strip():
            return []
        where = where_clause(session_id, kinds, since, until)

        def read() -> list[dict[str, Any]]:
            search = (self._lance.table.search(query, query_type="fts", fts_columns="text")
                      .select(["id", "_score"]).limit(k))
            return (search if where is None else search.where(where, prefilter=True)).to_list()

        return [(row["id"], float(row["_score"])) for row in self._lance.fresh(read)]

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of ``ids`` (those indexed), as float32 arrays."""
        wanted = sorted(set(ids))
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            where = f"id IN ({', '.join(quote(i) for i in chunk)})"
            table = self._lance.fresh(lambda where=where, n=len(chunk): self._lance.table.search().where(where)
                                .select(["id", "vector"]).limit(n).to_arrow())
            for item, vec in zip(table.column("id").to_pylist(), table.column("vector").to_pylist()):
                out[item] = np.asarray(vec, dtype=np.float32)
        return out

    def index_messages(self, session_id: str, messages: Iterable[Message],
                       vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int:
        """Embed and index messages (the live path; ``vectors``: their rows' embeddings the caller
        has, by message id, from ``embed_messages``); return how many were written."""
        return self.add((message_row(session_id, m) for m in messages), vectors=vectors)

    def embed_messages(self, session_id: str, messages: Iterable[Message]) -> dict[str, np.ndarray]:
        """The embeddings of messages' index rows, by message id, writing nothing: a caller embeds
        while it stores the messages, and indexes them (``index_messages(vectors=...)``) only
        once they are stored. One embedder call per ``write_size`` rows (the embedder orders a
        call's texts by length, so its batches pad little)."""
        rows = list({m.message_id: message_row(session_id, m) for m in messages}.values())
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(rows), self.write_size):
            window = rows[start:start + self.write_size]
            out.update(zip((r.id for r in window), self._embed([r.text for r in window]), strict=True))
        return out

    def index_env_events(self, session_id: str, events: Sequence[EnvEvent],
                         vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray | None = None) -> int:
        """Index environment events (the live path; ``vectors``, one per event in order, are
        embeddings of their ``env_row`` text the caller already has); return how many."""
        known = {} if vectors is None else {e.event_id: v for e, v in zip(events, vectors, strict=True)}
        return self.add((env_row(session_id, e) for e in events), vectors=known)

    def index_parts(self, session_id: str, parts: Sequence[Evidence],
                    vectors: Sequence[Sequence[float] | np.ndarray] | np.ndarray | None = None) -> int:
        """Index a document's parts (``vectors``: their ``part_row`` embeddings, in order); how many."""
        known = None if vectors is None else {p.evidence_id: v for p, v in zip(parts, vectors)}
        return self.add((part_row(session_id, p) for p in parts), vectors=known)

    def index_memory(self, session_id: str, fragments: Iterable[MemoryFragment],
                     vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None) -> int:
        """Index memory fragments (the live path; ``vectors``: embeddings of their ``index_text``
        the caller has, by id; the others are embedded); return how many were written."""
        return self.add((memory_row(session_id, f) for f in fragments), vectors=vectors)

    def ids(self) -> set[str]:
        """Return the ids of every indexed row."""
        table = self._lance.fresh(lambda: self._lance.table.search().select(["id"]).limit(None).to_arrow())
        return set(table.column("id").to_pylist())

    def count(self) -> int:
        """Return the number of indexed rows."""
        return int(self._lance.fresh(lambda: self._lance.table.count_rows()))

    # ------------------------------------------------------------------ rebuild and reconcile

    def rebuild_rows(self, rows: Sequence[SearchRow], *,
                     on_progress: ProgressCallback | None = None,
                     cancel: CancelToken | None = None) -> int:
        """Drop the table and index ``rows`` from scratch; return how many were embedded.

        The rebuild marker is written first and removed only once every row is in: a rebuild
        that is cancelled or killed leaves it, and the next ``reconcile``/``finish_rebuild``
        completes the index.
        """
        with self._lance.rebuild_lock:
            self._lance.write_marker("rebuild")
            self._lance.reset()
            done = self.add(rows, on_progress=on_progress, cancel=cancel)
            if cancel is not None and cancel.cancelled:
                return done
            if done:
                self.optimize()
            self._lance.clear_marker()
        return done

    def rebuild_from(self, store: SqliteStore, *, on_progress: ProgressCallback | None = None,
                     cancel: CancelToken | None = None) -> int:
        """Re-embed everything searchable in ``store`` into a fresh table; return the count."""
        return self.rebuild_rows(store.list_searchable(), on_progress=on_progress, cancel=cancel)

    def reconcile_rows(self, rows: Sequence[SearchRow], *, have: set[str] | None = None,
                       on_progress: ProgressCallback | None = None,
                       cancel: CancelToken | None = None) -> int:
        """Embed the ``rows`` the index lacks and drop index rows not among ``rows``; finish (and
        unmark) an interrupted rebuild on the way.

        ``have`` is the index's ids read *before* ``rows`` were read from the store (another
        process may index rows it commits in between; read after, they would look stale).
        Without it, the ids are read now and only rows missing are added (nothing is dropped).
        Returns how many rows were embedded (dropped rows, such as superseded memory, are not
        counted).
        """
        with self._lance.rebuilding() as pending:
            drop = have is not None and not pending  # ids read under the lock come after rows
            if have is None or pending:
                have = self.ids()
            wanted = {row.id for row in rows}
            stale = have - wanted
            if stale and drop:
                self.remove(stale)
            missing = [row for row in rows if row.id not in have]
            done = self.add(missing, on_progress=on_progress, cancel=cancel)
            if pending and not (cancel is not None and cancel.cancelled):
                self.optimize()
                self._lance.clear_marker()
        return done

    def finish_rebuild(self, rows: Sequence[SearchRow], *, on_progress: ProgressCallback | None = None,
                       cancel: CancelToken | None = None) -> int:
        """Complete an interrupted rebuild (a no-op when none is pending); return rows embedded."""
        if not self.needs_rebuild:
            return 0
        return self.reconcile_rows(rows, on_progress=on_progress, cancel=cancel)

    def reconcile(self, store: SqliteStore, *, on_progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> int:
        """Embed only the store's searchable rows missing from the index; return how many."""
        have = self.ids()
        return self.reconcile_rows(store.list_searchable(), have=have, on_progress=on_progress,
                                   cancel=cancel)
