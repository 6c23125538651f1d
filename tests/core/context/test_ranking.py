"""Pure scoring functions of recall: fusion, propagation, near-duplicates, MMR, packing."""

from __future__ import annotations

import pytest

from app.core.context import ranking


def test_rrf_weights_and_ties() -> None:
    fused = ranking.rrf({"a": ["x", "y"], "b": ["y", "z"]}, k=60)
    assert fused["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert ranking.ranked(fused) == ["y", "x", "z"]
    weighted = ranking.rrf({"a": ["x"], "b": ["z"]}, {"a": 2.0, "b": 1.0}, k=0)
    assert weighted == {"x": 2.0, "z": 1.0}
    assert ranking.ranked({"b": 1.0, "a": 1.0}) == ["a", "b"]  # ties by id: deterministic


def test_minmax_and_relative_fusion() -> None:
    assert ranking.minmax({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert ranking.minmax({"a": 5.0}) == {"a": 1.0}
    assert ranking.minmax({}) == {}
    fused = ranking.relative_fusion(
        {"vec": {"a": 0.9, "b": 0.5}, "fts": {"b": 10.0, "c": 2.0}}, {"vec": 0.7, "fts": 0.3}
    )
    assert fused == pytest.approx({"a": 0.7, "b": 0.3, "c": 0.0})
    assert ranking.relative_fusion({"x": {"a": 1.0}}, {}) == {}


def test_propagate_gives_neighbours_a_share_of_the_best_hit() -> None:
    adjacency = {"a": ["b"], "b": ["a", "c"], "c": ["b"]}
    out = ranking.propagate({"a": 1.0, "c": 0.2}, lambda i: adjacency[i], 0.5)
    assert out["a"] == pytest.approx(1.0)
    assert out["c"] == pytest.approx(0.2)
    assert out["b"] == pytest.approx(0.5)  # reached only through a neighbour
    assert ranking.propagate({"a": 1.0}, lambda i: adjacency[i], 0.0) == {"a": 1.0}


def test_near_duplicates_keep_the_better_ranked() -> None:
    texts = {"a": "the build failed on main", "b": "The build failed on main!", "c": "deploy tomorrow"}
    assert ranking.near_duplicates(["a", "b", "c"], texts, 0.9) == {"b": "a"}
    assert ranking.near_duplicates(["b", "a"], texts, 0.9) == {"a": "b"}
    assert ranking.near_duplicates(["a", "c"], texts, 0.9) == {}


def test_mmr_trades_relevance_for_diversity() -> None:
    texts = {"a": "red apple pie", "b": "red apple pie recipe", "c": "blue car"}
    rel = {"a": 1.0, "b": 0.95, "c": 0.5}
    assert ranking.mmr(["a", "b", "c"], rel, texts, lam=1.0, k=2) == ["a", "b"]
    assert ranking.mmr(["a", "b", "c"], rel, texts, lam=0.3, k=2) == ["a", "c"]
    assert ranking.mmr(["a", "b"], rel, texts, lam=0.5, k=0) == []


def test_pack_greedy_skips_what_does_not_fit_and_never_exceeds() -> None:
    taken, skipped = ranking.pack_greedy(["a", "b", "c", "d"], {"a": 5, "b": 10, "c": 3, "d": 2}, 10)
    assert taken == ["a", "c", "d"] and skipped == ["b"]
    assert sum({"a": 5, "c": 3, "d": 2}[i] for i in taken) <= 10


def test_recency() -> None:
    assert ranking.recency_score(0, 60) == 1.0
    assert ranking.recency_score(60, 60) == pytest.approx(0.5)
    assert ranking.recency_score(-5, 60) == 1.0
    assert ranking.recency_score(10, 0) == 0.0
