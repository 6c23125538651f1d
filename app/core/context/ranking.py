"""Scoring math for recall: fusion, neighbourhood propagation, near-duplicates, diversity, packing.

Pure functions over ids and scores, tested without stores (DESIGN.md §5). Ties are always broken
by id so that the same inputs give the same order (replay depends on it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum

import numpy as np

from app.core.text.words import RANKING


class FusionMethod(StrEnum):
    RRF = "rrf"  # reciprocal rank fusion: robust, ignores score scales
    RELATIVE = "relative"  # min-max normalised scores, weighted sum: keeps score gaps


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Ids by descending score, ties by id."""
    return sorted(scores, key=lambda i: (-scores[i], i))


def rrf(lists: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, k: int = 60) -> dict[str, float]:
    """Weighted reciprocal rank fusion: Σ_channel w / (k + rank), rank from 1."""
    fused: dict[str, float] = {}
    for channel, ids in lists.items():
        w = 1.0 if weights is None else weights.get(channel, 0.0)
        for rank, item in enumerate(ids, start=1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
    return fused


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Scale scores to [0, 1] within one list; a list of equal scores maps to 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return {i: 1.0 for i in scores}
    return {i: (s - lo) / (hi - lo) for i, s in scores.items()}


def relative_fusion(
    channel_scores: Mapping[str, Mapping[str, float]], weights: Mapping[str, float]
) -> dict[str, float]:
    """Σ_channel w · minmax(score); an id a channel did not return gets 0 from it."""
    fused: dict[str, float] = {}
    for channel, scores in channel_scores.items():
        w = weights.get(channel, 0.0)
        if w == 0.0:
            continue
        for item, s in minmax(scores).items():
            fused[item] = fused.get(item, 0.0) + w * s
    return fused


def propagate(
    scores: Mapping[str, float], neighbours: Callable[[str], Iterable[str]], alpha: float
) -> dict[str, float]:
    """Add ``alpha`` × the best neighbour's score to every item (and reach unscored neighbours).

    Conversation turns are rarely self-contained: the answer to a question sits next to it, so a
    turn next to a strong hit is itself likely relevant. Only one hop, from the original scores.
    """
    if alpha <= 0:
        return dict(scores)
    best: dict[str, float] = {}
    for item, s in scores.items():
        for other in neighbours(item):
            if s > best.get(other, float("-inf")):
                best[other] = s
    out = {item: s + alpha * best.get(item, 0.0) for item, s in scores.items()}
    for item, s in best.items():
        if item not in out:
            out[item] = alpha * s
    return out


def discounted(scores: Mapping[str, float], marked: Callable[[str], bool], share: float) -> dict[str, float]:
    """``scores`` with each positive score of a ``marked`` item lowered by ``share`` of it."""
    keep = 1.0 - share
    return {item: s * keep if s > 0 and marked(item) else s for item, s in scores.items()}


def jaccard_matrix(texts: Sequence[str]) -> np.ndarray:
    """Pairwise word-set Jaccard similarity of ``texts`` (n × n, float32).

    The intersections are counted by set operations, not a matrix product: the product runs on
    BLAS's threads, which wait on each other whenever the other core is busy (a 0.1 ms product
    took 15 ms in a build on a loaded machine); recall asks for a few dozen texts at most."""
    bags = [frozenset(RANKING.words(t)) for t in texts]
    n = len(bags)
    inter = np.zeros((n, n), dtype=np.float32)
    for i, bag in enumerate(bags):
        inter[i, i] = len(bag)
        for j in range(i + 1, n):
            inter[i, j] = inter[j, i] = len(bag & bags[j])
    sizes = np.diagonal(inter).copy()
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = np.where(union > 0, inter / union, 1.0)
    return sim.astype(np.float32)


def near_duplicates(
    order: Sequence[str], texts: Mapping[str, str], threshold: float, *, sim: np.ndarray | None = None
) -> dict[str, str]:
    """Map each item that nearly repeats a better-ranked kept item (word Jaccard ≥ threshold) to it.

    ``sim`` may pass a precomputed ``jaccard_matrix`` of ``order``'s texts.
    """
    if not order:
        return {}
    if sim is None:
        sim = jaccard_matrix([texts.get(i, "") for i in order])
    empty = [not RANKING.words(texts.get(i, "")) for i in order]
    kept: list[int] = []
    dupes: dict[str, str] = {}
    for j in range(len(order)):
        match = next((k for k in kept if not empty[j] and sim[j, k] >= threshold), None) if kept else None
        if match is not None:
            dupes[order[j]] = order[match]
        else:
            kept.append(j)
    return dupes


def mmr(
    order: Sequence[str],
    relevance: Mapping[str, float],
    texts: Mapping[str, str],
    *,
    lam: float,
    k: int,
    sim: np.ndarray | None = None,
) -> list[str]:
    """Maximal marginal relevance over ``order``; returns ``k`` ids.

    score = λ·relevance − (1−λ)·max word-Jaccard to an already selected item; λ=1 is plain rank.
    Redundancy is updated once per pick from a precomputed similarity matrix: O(k·n).
    """
    if lam >= 1.0 or k <= 0:
        return list(order[:k])
    items = list(order)
    if sim is None:
        sim = jaccard_matrix([texts.get(i, "") for i in items])
    rel_map = minmax({i: relevance.get(i, 0.0) for i in items})
    rel = np.array([rel_map[i] for i in items], dtype=np.float64)
    redundancy = np.zeros(len(items))
    open_ = np.ones(len(items), dtype=bool)
    chosen: list[str] = []
    while open_.any() and len(chosen) < k:
        gain = np.where(open_, lam * rel - (1 - lam) * redundancy, -np.inf)
        best = float(gain.max())
        # ties by id, for determinism
        pick = min((idx for idx in np.flatnonzero(gain == best)), key=lambda idx: items[idx])
        chosen.append(items[pick])
        open_[pick] = False
        redundancy = np.maximum(redundancy, sim[pick])
    return chosen


def pack_greedy(order: Sequence[str], cost: Mapping[str, int], budget: int) -> tuple[list[str], list[str]]:
    """Take items in order while they fit, skipping (not stopping at) items that do not.

    Returns (taken, skipped). Never exceeds ``budget``.
    """
    used = 0
    taken: list[str] = []
    skipped: list[str] = []
    for item in order:
        c = cost[item]
        if used + c <= budget:
            taken.append(item)
            used += c
        else:
            skipped.append(item)
    return taken, skipped


def recency_score(age_s: float, half_life_s: float) -> float:
    """exp-decay in [0, 1]: 1 now, 0.5 after one half-life; negative ages count as now."""
    if half_life_s <= 0:
        return 0.0
    return math.exp(-max(age_s, 0.0) * math.log(2) / half_life_s)
