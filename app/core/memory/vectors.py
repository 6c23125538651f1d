"""Embeddings kept by id and compared as one matrix: the memory writer's similarity links and the
topic index's name aliases both ask "which kept rows are closest to this vector?"."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np


class VectorRows:
    """L2-normalised vectors by id (a later ``add`` of an id replaces its row), kept as the rows of
    one matrix that grows by doubling: ``add`` writes a row in place, ``top`` is one product with
    the rows so far. (Rebuilding the matrix after every change made a writer that links each new
    memory to the kept ones quadratic: at 100,000 ingested turns it caught up for over 15 minutes.)"""

    def __init__(self) -> None:
        self._pos: dict[str, int] = {}
        self._ids: list[str] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def __contains__(self, item: object) -> bool:
        return item in self._pos

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, item: str, vector: np.ndarray) -> None:
        row = np.asarray(vector, dtype=np.float32).ravel()
        at = self._pos.get(item)
        if at is None:
            at = self._pos[item] = len(self._ids)
            self._ids.append(item)
            if at >= self._matrix.shape[0] or self._matrix.shape[1] != row.shape[0]:
                grown = np.zeros((max(16, 2 * at + 1), row.shape[0]), dtype=np.float32)
                if self._matrix.shape[1] == row.shape[0]:
                    grown[:at] = self._matrix[:at]
                self._matrix = grown
        self._matrix[at] = row

    def top(self, vector: np.ndarray, k: int, *, at_least: float = -1.0,
            exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine) closest to ``vector``, best first, none under ``at_least``."""
        n = len(self._ids)
        if not n or k <= 0:
            return []
        scores = self._matrix[:n] @ np.asarray(vector, dtype=np.float32).ravel()
        want = min(n, k + len(exclude))
        best = np.argpartition(-scores, want - 1)[:want] if want < n else np.arange(n)
        order = best[np.argsort(-scores[best], kind="stable")]
        out = [(self._ids[i], float(scores[i])) for i in order
               if scores[i] >= at_least and self._ids[i] not in exclude]
        return out[:k]
