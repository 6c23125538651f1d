"""Embeddings kept by id and compared as one matrix: the memory writer's similarity links and the
topic index's name aliases both ask "which kept rows are closest to this vector?"."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np


class VectorRows:
    """L2-normalised vectors by id (a later ``add`` of an id replaces its row); the matrix they
    are compared with is rebuilt only after a change."""

    def __init__(self) -> None:
        self._pos: dict[str, int] = {}
        self._ids: list[str] = []
        self._rows: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None

    def __contains__(self, item: object) -> bool:
        return item in self._pos

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, item: str, vector: np.ndarray) -> None:
        row = np.asarray(vector, dtype=np.float32)
        if item in self._pos:
            self._rows[self._pos[item]] = row
        else:
            self._pos[item] = len(self._ids)
            self._ids.append(item)
            self._rows.append(row)
        self._matrix = None

    def top(self, vector: np.ndarray, k: int, *, at_least: float = -1.0,
            exclude: Collection[str] = ()) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine) closest to ``vector``, best first, none under ``at_least``."""
        if not self._rows or k <= 0:
            return []
        if self._matrix is None:
            self._matrix = np.vstack(self._rows)
        scores = self._matrix @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-scores)[: k + len(exclude)]
        out = [(self._ids[i], float(scores[i])) for i in order
               if scores[i] >= at_least and self._ids[i] not in exclude]
        return out[:k]
