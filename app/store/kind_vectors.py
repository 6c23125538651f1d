"""An in-process copy of the vectors of one small kind of index rows, searched with numpy.

The memory channel searches every session's memories (a few hundred to a few thousand rows)
beside the vector channel's search of the session. LanceDB spends ~10 ms of fixed cost on any
query — most of a search over so few rows — and on two cores the two queries slow each other
down. This copy answers the same question (cosine similarity, best first, within an ``at``
range) from a matrix held here.

It stays exact: it is read again whenever the table's version moves (every write of this
process, and a table opened again after another process's rebuild), so it sees what a LanceDB
query through the same handle would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa


class KindVectors:
    """The ids, dates and unit vectors of the rows of one kind, as of one table version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the index executor runs two queries at once
        self._version: Any = None
        self._ids: list[str] = []
        self._at = np.array([], dtype=str)
        self._unit = np.zeros((0, 0), dtype=np.float32)

    def search(self, version: Any, load: Callable[[], pa.Table], vector: np.ndarray, k: int, *,
               since: str | None = None, until: str | None = None) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine similarity) pairs, best first, of the rows with ``since <= at
        < until``; ``load()`` reads the kind's rows (columns id, at, vector) when ``version`` is
        not the one held."""
        with self._lock:
            if version != self._version:
                self._read(load())
                self._version = version
            ids, at, unit = self._ids, self._at, self._unit
        if not ids or k <= 0:
            return []
        norm = float(np.linalg.norm(vector))
        sims = unit @ (np.asarray(vector, dtype=np.float32) / (norm if norm > 0 else 1.0))
        keep = np.ones(len(ids), dtype=bool)
        if since:
            keep &= at >= since
        if until:
            keep &= at < until
        rows = np.flatnonzero(keep)
        best = rows[np.argsort(-sims[rows], kind="stable")[:k]]
        return [(ids[n], float(sims[n])) for n in best]

    def _read(self, table: pa.Table) -> None:
        self._ids = table.column("id").to_pylist()
        self._at = np.array(table.column("at").to_pylist(), dtype=str)
        dim = table.schema.field("vector").type.list_size
        flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = np.asarray(flat, dtype=np.float32).reshape(len(self._ids), max(dim, 0))
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self._unit = matrix / np.where(norms > 0, norms, 1.0)
