"""The report's paired statistics (app.eval.stats) against values computed another way: the exact
signed-rank distribution by enumerating every sign assignment, the textbook example scipy's
documentation uses, the normal approximation's formula with ties, and bootstrap intervals that
must hold the mean and reproduce under the same seed."""

from __future__ import annotations

import itertools
import math

import pytest

from app.eval.stats import compare, effect_sizes, holm, mean_ci, paired_bootstrap, wilcoxon


def _brute_p(diffs: list[float]) -> float:
    """Two-sided exact p by enumerating all 2^n sign flips of the ranks (no ties)."""
    ranks = {v: r for r, v in enumerate(sorted(abs(d) for d in diffs), start=1)}
    w = sum(ranks[abs(d)] for d in diffs if d > 0)
    n = len(diffs)
    total = n * (n + 1) / 2
    lo = min(w, total - w)
    sums = [sum(r for r, s in zip(range(1, n + 1), signs) if s) for signs in itertools.product((0, 1), repeat=n)]
    return min(1.0, 2 * sum(s <= lo for s in sums) / len(sums))


def test_exact_signed_rank_p_matches_enumeration_and_the_textbook_example() -> None:
    for diffs in ([1.0, 2.0, -3.0, 4.0, 5.0, 6.5, -0.5, 7.0], [-1.0, -2.0, -3.5, 0.25, -4.0, -5.0], [3.0, -1.0]):
        assert wilcoxon(diffs)["p"] == pytest.approx(_brute_p(diffs))
    # Wilcoxon's example in scipy.stats.wilcoxon's documentation: W- = 24, p = 0.041259765625
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    test = wilcoxon(d)
    assert test["method"] == "exact" and test["w_minus"] == 24.0 and test["p"] == pytest.approx(0.041259765625)


def test_ties_and_zeros_use_the_corrected_normal_approximation() -> None:
    d = [0.0, 0.0, 1.0, 1.0, 1.0, -1.0, 2.0, 2.0, -2.0, 3.0]  # zeros dropped: n = 8, ties among |d|
    test = wilcoxon(d)
    assert test["n"] == 8 and test["method"] == "approx"
    # ranks of |d| = 1,1,1,1,2,2,2,3 → 2.5 ×4, 6 ×3, 8; W+ = 2.5·3 + 6·2 + 8 = 27.5
    assert test["w_plus"] == 27.5 and test["w_minus"] == 8.5
    var = 8 * 9 * 17 / 24 - ((4**3 - 4) + (3**3 - 3)) / 48
    z = (27.5 - 8 * 9 / 4) / math.sqrt(var)
    assert test["p"] == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    assert wilcoxon([0.0, 0.0])["p"] is None


def test_effect_sizes_holm_and_intervals() -> None:
    d = [1.0, 2.0, 3.0, -1.0]
    sizes = effect_sizes(d)
    sd = math.sqrt(sum((x - 1.25) ** 2 for x in d) / 3)
    assert sizes["d_z"] == pytest.approx(1.25 / sd)
    # ranks of |d|: 1,1 → 1.5 each, 2 → 3, 3 → 4; W+ = 1.5 + 3 + 4 = 8.5, W- = 1.5
    assert sizes["rank_biserial"] == pytest.approx((8.5 - 1.5) / 10)
    assert holm([0.01, None, 0.04, 0.03]) == [pytest.approx(0.03), None, pytest.approx(0.06), pytest.approx(0.06)]

    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    ci = mean_ci(values)
    assert ci["mean"] == pytest.approx(sum(values) / 8) and ci["n"] == 8
    assert ci["low"] < ci["mean"] < ci["high"]
    assert mean_ci(values) == ci  # the same seed, the same interval
    assert mean_ci([])["mean"] is None
    boot = paired_bootstrap([0.0] * 8, values)
    assert boot["diff"] == pytest.approx(ci["mean"]) and boot["low"] > 0 and boot["p_b_better"] == 1.0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])


def test_compare_reads_pcm_minus_the_other_and_names_the_side() -> None:
    pcm, other = [1.0] * 12, [0.0] * 12
    assert compare(pcm, other)["verdict"] == "better" and compare(pcm, other)["diff"] == 1.0
    assert compare(other, pcm)["verdict"] == "worse"
    same = compare([0.5, 0.0, 1.0, 0.0], [0.0, 0.5, 0.0, 1.0])
    assert same["verdict"] == "no difference" and same["low"] < 0 < same["high"]
    assert compare([], [])["verdict"] == "no data"
    # 4 of 12 pairs differ, all one way: the percentile interval excludes 0, the test cannot tell (p = 2/16)
    few = compare([0.1, 0.2, 0.3, 0.4] + [0.0] * 8, [0.0] * 12)
    assert few["low"] > 0 and few["p"] == pytest.approx(0.125) and few["verdict"] == "no difference"
