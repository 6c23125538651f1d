"""An in-process copy of one session's vectors, searched exactly with numpy.

Past the ANN threshold the vector channel asked LanceDB for the session's top ~180 rows through
the approximate index, re-ranking ``k × refine_factor`` candidates: ~25 ms of CPU a query on
10,000 rows, and a query's threads compete with the full-text query's on two cores. One matrix
product over the session's unit vectors gives the exact answer in ~2 ms (10,000 × 384 floats,
15 MB; a session past ``AnnPolicy.held_rows`` is left to the index).

The copy follows the table: it belongs to one table version, and the index's own writes carry it
forward (``written``, ``removed``: applied only when the write is the single commit after the
version held; ``unchanged``: an optimization, same rows). Any other move of the version (another
process's write, a rebuild, a commit conflict) drops it, and the next query reads the session's
rows again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

#: The table a version key belongs to and its version: ``(table handle, version)``.
VersionKey = tuple[Any, int]


def _follows(held: VersionKey | None, before: VersionKey, after: VersionKey) -> bool:
    """Whether the write that moved the table from ``before`` to ``after`` was one commit on the
    version ``held``."""
    return held is not None and held == before and after[0] is before[0] and after[1] == before[1] + 1


class SessionVectors:
    """The ids, kinds, dates and unit vectors of one session's rows, as of one table version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the index executor runs two queries at once, and writes
        self._session: str | None = None
        self._key: VersionKey | None = None
        self._held = False  # False: the session has more rows than the loader holds (only the key is kept)
        self._row: dict[str, int] = {}  # id → row of the matrix
        self._ids: list[str] = []
        self._kind: list[str] = []
        self._at: list[str] = []
        self._live = np.zeros(0, dtype=bool)
        self._unit = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._masks: dict[frozenset[str], np.ndarray] = {}  # rows of these kinds (until a row is written)

    def search(self, session_id: str, key: VersionKey, load: Callable[[str], pa.Table | None], vector: np.ndarray,
               k: int, *, kinds: Sequence[str] | None = None, since: str | None = None,
               until: str | None = None) -> list[tuple[str, float]] | None:
        """Up to ``k`` (id, cosine) pairs of the session's rows, best first, within the kinds and
        ``since <= at < until``; None when the session is too big to hold (the caller asks the
        index). ``load(session_id)`` reads the rows (id, kind, at, vector), or None when there are
        too many, whenever the copy is of another session or version."""
        with self._lock:
            if session_id != self._session or key != self._key:
                self._read(session_id, key, load(session_id))
            if not self._held:
                return None
            n = self._n
            unit, live = self._unit[:n], self._live[:n].copy()
            ids, kind, at = self._ids[:n], self._kind[:n], self._at[:n]
            masks = self._masks
        if kinds is not None:
            wanted = frozenset(kinds)
            mask = masks.get(wanted)
            if mask is None or len(mask) != n:
                mask = masks[wanted] = np.fromiter((x in wanted for x in kind), dtype=bool, count=n)
            live &= mask
        if since or until:
            live &= np.fromiter(((not since or a >= since) and (not until or a < until) for a in at), dtype=bool,
                                count=n)
        if k <= 0 or not live.any():
            return []
        norm = float(np.linalg.norm(vector))
        # einsum's own loop, on this thread: BLAS's threads wait on each other whenever the other
        # core is busy (a 1 ms product took 13 ms on a loaded machine)
        sims = np.einsum("ij,j->i", unit, np.asarray(vector, dtype=np.float32) / (norm if norm > 0 else 1.0))
        sims[~live] = -np.inf
        rows = int(live.sum())
        top = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        best = top[np.lexsort((top, -sims[top]))][: min(k, rows)]
        return [(ids[r], float(sims[r])) for r in best]

    def written(self, before: VersionKey, after: VersionKey, rows: Iterable[tuple[str, str, str, str, Any]]) -> None:
        """The index upserted ``rows`` — (id, session, kind, at, vector) — in the one commit from
        ``before`` to ``after``: the held session's rows among them are taken in."""
        with self._lock:
            if not self._carried(before, after) or not self._held:
                return
            for row_id, session, kind, at, vector in rows:
                if session == self._session:
                    self._put(row_id, kind, at, vector)

    def removed(self, before: VersionKey, after: VersionKey, ids: Iterable[str]) -> None:
        """The index deleted ``ids`` in the one commit from ``before`` to ``after``."""
        with self._lock:
            if not self._carried(before, after):
                return
            for row_id in ids:
                row = self._row.pop(row_id, None)
                if row is not None:
                    self._live[row] = False

    def unchanged(self, before: VersionKey, after: VersionKey) -> None:
        """The table moved from ``before`` to ``after`` without a row changing (an optimization)."""
        with self._lock:
            self._key = after if self._key is not None and self._key == before else None

    def _carried(self, before: VersionKey, after: VersionKey) -> bool:
        """Move the copy to ``after`` when the write was the one commit on the version held;
        else drop it (read again at the next query)."""
        self._key = after if _follows(self._key, before, after) else None
        return self._key is not None

    def _read(self, session_id: str, key: VersionKey, table: pa.Table | None) -> None:
        self._session, self._key, self._held = session_id, key, table is not None
        ids: list[str] = [] if table is None else table.column("id").to_pylist()
        self._n = len(ids)
        self._ids = ids
        self._kind = [] if table is None else table.column("kind").to_pylist()
        self._at = [] if table is None else table.column("at").to_pylist()
        self._row = {row_id: n for n, row_id in enumerate(ids)}
        self._live = np.ones(self._n, dtype=bool)
        self._masks = {}
        self._unit = np.zeros((0, 0), dtype=np.float32)
        if table is not None and self._n:
            dim = table.schema.field("vector").type.list_size
            flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            self._unit = _unit_rows(np.asarray(flat, dtype=np.float32).reshape(self._n, max(dim, 0)))

    def _put(self, row_id: str, kind: str, at: str, vector: Any) -> None:
        unit = _unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        row = self._row.get(row_id)
        if row is None:
            row = self._row[row_id] = self._grow(len(unit))
            self._ids.append(row_id)
            self._kind.append(kind)
            self._at.append(at)
        else:
            self._kind[row], self._at[row] = kind, at
        self._masks = {}
        self._unit[row] = unit
        self._live[row] = True

    def _grow(self, dim: int) -> int:
        """Room for one more row (the matrix grows by a quarter when full); its index."""
        if self._n == len(self._unit):
            bigger = np.zeros((self._n + max(1024, self._n // 4), dim), dtype=np.float32)
            bigger[: self._n] = self._unit[: self._n]
            live = np.zeros(len(bigger), dtype=bool)
            live[: self._n] = self._live[: self._n]
            self._unit, self._live = bigger, live
        self._n += 1
        return self._n - 1


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32)
