"""Statistics of paired evaluations (seed 000 §8.8): intervals, a non-parametric test, effect sizes.

Every comparison in the evaluation report is paired — the same question (or message) under two
strategies — so the unit is the per-item difference. Here, pure functions over plain lists:

- ``mean_ci``: a mean with its percentile bootstrap interval;
- ``paired_bootstrap``: the mean of ``b - a`` over the pairs and its bootstrap interval;
- ``wilcoxon``: the Wilcoxon signed-rank test (zero differences dropped; exact null distribution
  up to 25 pairs without ties, else the normal approximation with the tie correction — what
  ``scipy.stats.wilcoxon`` computes with ``method="exact"`` / ``"approx"``);
- ``effect_sizes``: Cohen's d_z (mean difference over the differences' standard deviation) and
  the matched-pairs rank-biserial correlation (``(W+ - W-) / (W+ + W-)``);
- ``holm``: Holm's step-down adjustment of a family of p-values;
- ``compare``: all of it for one pair of strategies, with a verdict.

Resampling uses numpy's ``default_rng(seed)``: the same values give the same interval, so a report
regenerated from its prediction files is byte-identical.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ROUNDS = 2000
LEVEL = 0.95
ALPHA = 0.05  # the signed-rank test's level a verdict also needs (``compare``)
EXACT_UP_TO = 25  # pairs (without ties) up to which the signed-rank test uses the exact null distribution


def _bounds(means: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    ordered = np.sort(means)
    rounds = len(ordered)
    return float(ordered[int(tail * (rounds - 1))]), float(ordered[int((1 - tail) * (rounds - 1))])


def _resampled_means(values: np.ndarray, rounds: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.asarray(values[rng.integers(0, len(values), size=(rounds, len(values)))].mean(axis=1))


def mean_ci(values: Sequence[float], *, rounds: int = ROUNDS, seed: int = 0, level: float = LEVEL) -> dict[str, Any]:
    """{"mean", "low", "high", "n"}: the mean and its percentile bootstrap interval (None for no values)."""
    vals = np.asarray([float(v) for v in values], dtype=np.float64)
    if not len(vals):
        return {"mean": None, "low": None, "high": None, "n": 0}
    low, high = _bounds(_resampled_means(vals, rounds, seed), level)
    return {"mean": float(vals.mean()), "low": low, "high": high, "n": int(len(vals))}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, rounds: int = ROUNDS, seed: int = 0,
                     level: float = LEVEL) -> dict[str, float]:
    """Mean of ``b - a`` over paired items and its percentile bootstrap interval (resampling the
    pairs): {"diff", "low", "high", "p_b_better"} (the share of resamples where b's mean is higher)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired_bootstrap needs two equally long, non-empty sequences")
    diffs = np.asarray([float(y) - float(x) for x, y in zip(a, b)], dtype=np.float64)
    means = _resampled_means(diffs, rounds, seed)
    low, high = _bounds(means, level)
    return {"diff": float(diffs.mean()), "low": low, "high": high, "p_b_better": float((means > 0).mean())}


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ordered = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and ordered[j + 1] == ordered[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _exact_p(w_plus: float, n: int) -> float:
    """Two-sided p of the signed-rank statistic under H0, from the exact distribution of rank sums."""
    counts = np.zeros(n * (n + 1) // 2 + 1, dtype=np.float64)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    probs = counts / 2.0 ** n
    k = int(round(min(w_plus, n * (n + 1) / 2 - w_plus)))
    return float(min(1.0, 2 * probs[:k + 1].sum()))


def wilcoxon(diffs: Sequence[float]) -> dict[str, Any]:
    """The Wilcoxon signed-rank test of ``diffs`` (paired differences) against a zero median:
    {"n" (non-zero differences), "w_plus", "w_minus", "p", "method"}; p is None without a non-zero
    difference (see the module doc)."""
    d = np.asarray([float(x) for x in diffs if float(x) != 0.0], dtype=np.float64)
    n = len(d)
    if n == 0:
        return {"n": 0, "w_plus": 0.0, "w_minus": 0.0, "p": None, "method": "none"}
    ranks = _ranks(np.abs(d))
    w_plus, w_minus = float(ranks[d > 0].sum()), float(ranks[d < 0].sum())
    tied = len(np.unique(np.abs(d))) < n
    if n <= EXACT_UP_TO and not tied:
        return {"n": n, "w_plus": w_plus, "w_minus": w_minus, "p": _exact_p(w_plus, n), "method": "exact"}
    _, counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - float((counts ** 3 - counts).sum()) / 48
    z = (w_plus - n * (n + 1) / 4) / math.sqrt(var) if var > 0 else 0.0
    return {"n": n, "w_plus": w_plus, "w_minus": w_minus, "p": math.erfc(abs(z) / math.sqrt(2)), "method": "approx"}


def effect_sizes(diffs: Sequence[float], test: dict[str, Any] | None = None) -> dict[str, float | None]:
    """{"d_z", "rank_biserial"} of paired differences (None where undefined: no spread, no non-zero);
    ``test``: their ``wilcoxon`` when already computed."""
    d = np.asarray([float(x) for x in diffs], dtype=np.float64)
    sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    test = test or wilcoxon(d.tolist())
    total = test["w_plus"] + test["w_minus"]
    return {"d_z": float(d.mean()) / sd if sd > 0 else None,
            "rank_biserial": (test["w_plus"] - test["w_minus"]) / total if total else None}


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values of one family (None stays None and is not counted)."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (len(known) - rank) * p))
        out[i] = running
    return out


def compare(reference: Sequence[float], other: Sequence[float], *, seed: int = 0) -> dict[str, Any]:
    """``reference`` (PCM) against ``other`` over paired items: the mean difference reference −
    other with its 95 % bootstrap interval, the signed-rank test, the effect sizes and a verdict
    ("better" / "worse": the interval excludes 0 on that side and the signed-rank test agrees,
    p < ``ALPHA``; "no difference" otherwise — with few non-zero pairs a percentile interval can
    exclude 0 where the test cannot tell)."""
    if not reference:
        return {"n": 0, "diff": None, "low": None, "high": None, "p": None, "d_z": None, "rank_biserial": None,
                "verdict": "no data"}
    boot = paired_bootstrap(other, reference, seed=seed)
    diffs = [float(r) - float(o) for r, o in zip(reference, other)]
    test = wilcoxon(diffs)
    sure = test["p"] is not None and test["p"] < ALPHA
    verdict = "better" if sure and boot["low"] > 0 else "worse" if sure and boot["high"] < 0 else "no difference"
    return {"n": len(diffs), "diff": boot["diff"], "low": boot["low"], "high": boot["high"], "p": test["p"],
            "test": test["method"], **effect_sizes(diffs, test), "verdict": verdict}
