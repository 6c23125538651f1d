"""The approximate nearest-neighbour (ANN) index of the search rows' vectors: when it pays, how it
is made and kept up, and how a query uses it.

A flat (exact) scan costs in proportion to the rows it reads: fine for a few thousand rows, the
larger part of a build at a hundred thousand (seed 000 §8.10: the linear scan is what must be
replaced as scale grows). From ``AnnPolicy.min_rows`` rows on, the table gets an IVF-PQ index
(LanceDB's; partitions by k-means over a sample, each vector compressed to ``num_sub_vectors``
bytes). A query then reads the ``nprobes`` partitions nearest the query in compressed form and
re-ranks its best ``k × refine_factor`` candidates by their exact cosine
(``refine_factor``): the hits and their scores are exact, only which rows are looked at is
approximate. Rows added after the index was trained are searched flat beside it until the upkeep
folds them in (every ``SearchIndex.optimize_every`` rows, with the full-text index); once the table has grown ``retrain_growth`` times past the rows
the index was trained on, the partitions are trained again.

Below ``min_rows`` no index is made and every query scans flat, so small workspaces (and every
evaluation) get exactly what they always got. A query on the index that finds fewer than ``k``
rows (a session with few rows in the probed partitions) is asked again flat.

The upkeep (training, refreshing, folding new rows into the full-text index) is blocking and
runs in the background (``SearchIndex.upkeep``, driven by the engine's ``IndexUpkeep``); the
index's name records how many rows it was trained on (``vector_ann_<rows>``), so another process
or a later start knows when it is due again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from lancedb.index import IvfPq

VectorPath = Literal["flat", "ann"]
INDEX_PREFIX = "vector_ann_"
_NAME = re.compile(rf"^{INDEX_PREFIX}(\d+)$")


@dataclass(frozen=True)
class AnnPolicy:
    """When the ANN index pays and how it is queried (see the module doc)."""

    min_rows: int = 10_000  # rows from which the table gets an index (below: flat, exact)
    nprobes: int = 20  # partitions a query reads
    refine_factor: int = 10  # candidates re-ranked exactly: k × this
    retrain_growth: float = 2.0  # rows / rows trained on, from which the partitions are trained again
    rows_per_partition: int = 4096  # the IVF partitions: rows / this (at least 1)
    num_sub_vectors: int = 48  # PQ: bytes per vector (384 dimensions: 8 per sub-vector)
    # A session's rows up to this many are searched exactly in-process past ``min_rows``
    # (``app.store.held_vectors``; 384 dimensions: 1.5 KB a row, 375 MB at the bound), a bigger
    # one on the index. A 100,000-turn session is ~120,500 rows (its messages and memories): the
    # channel's query on them took 23.5 ms p50 held, 115 ms on the index (20 probed partitions of
    # 4,096 rows are most of a table that size, and the re-ranking reads ~1,800 rows back).
    held_rows: int = 250_000


def index_name(rows: int) -> str:
    """The name of an index trained on ``rows`` rows."""
    return f"{INDEX_PREFIX}{rows}"


def ann_indices(indices: list[Any]) -> dict[str, int]:
    """The table's ANN indices (``list_indices()`` entries) by name, with the rows each was trained
    on (training a new one comes before dropping the old, so there may briefly be two)."""
    out: dict[str, int] = {}
    for ix in indices:
        found = _NAME.match(str(getattr(ix, "name", "")))
        if found and list(getattr(ix, "columns", [])) == ["vector"]:
            out[found.group(0)] = int(found.group(1))
    return out


def trained_rows(indices: list[Any]) -> int | None:
    """The rows the table's newest ANN index was trained on, or None: it has none."""
    return max(ann_indices(indices).values(), default=None)


def config(policy: AnnPolicy, rows: int, dim: int) -> IvfPq:
    """The IVF-PQ configuration for a table of ``rows`` rows of ``dim`` dimensions."""
    sub = policy.num_sub_vectors if dim % policy.num_sub_vectors == 0 else max(1, dim // 8)
    partitions = max(1, math.ceil(rows / policy.rows_per_partition))
    return IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=sub)


def due(policy: AnnPolicy, rows: int, trained: int | None) -> bool:
    """Whether the index should be trained (again): the table reached ``min_rows`` without one, or
    it grew ``retrain_growth`` times past what it was trained on."""
    if rows < policy.min_rows:
        return False
    return trained is None or rows >= policy.retrain_growth * trained
