"""VectorRows: the rows grow in place, a later add of an id replaces its row, and ``top`` gives
what a full scan gives (best first, ``exclude`` and ``at_least`` applied)."""

from __future__ import annotations

import numpy as np

from app.core.memory.vectors import VectorRows


def _unit(rng: np.random.Generator, n: int, dim: int = 24) -> np.ndarray:
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_top_is_a_full_scans_order_while_rows_are_added() -> None:
    rng = np.random.default_rng(3)
    rows, kept = _unit(rng, 300), VectorRows()
    assert kept.top(rows[0], 3) == []
    for n, row in enumerate(rows):
        if n % 37 == 0 and n:
            scores = rows[:n] @ row
            want = [f"m{i}" for i in np.argsort(-scores, kind="stable") if f"m{i}" != "m1"][:4]
            got = kept.top(row, 4, exclude={"m1"})
            assert [i for i, _ in got] == want
            assert all(abs(s - float(scores[int(i[1:])])) < 1e-5 for i, s in got)
        kept.add(f"m{n}", row)
    assert len(kept) == 300 and "m299" in kept and "m300" not in kept
    assert all(s >= 0.2 for _, s in kept.top(rows[5], 50, at_least=0.2))


def test_a_later_add_replaces_the_row_of_its_id() -> None:
    rng = np.random.default_rng(4)
    a, b = _unit(rng, 2)
    kept = VectorRows()
    kept.add("x", a)
    kept.add("y", a)
    kept.add("x", b)
    assert len(kept) == 2
    assert kept.top(b, 1)[0][0] == "x" and kept.top(a, 1)[0][0] == "y"
