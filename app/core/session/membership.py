"""Soft tree membership: how sure routing was, kept per turn, and what that widens recall to.

Routing puts an input on one branch tree (or starts a new one), but in a busy session of
several conversations it is sometimes unsure: two trees score within a hair of each other. A
hard decision then loses the other tree's turns for good, and the context of a reply routed to
the wrong conversation holds none of its own. Seed 000 §3.4.5: low confidence widens recall;
and where routing is sure, it narrows it.

- ``routed_shares``: the router's candidate scores (and the "new root" option at ``tau_new``)
  as a softmax at ``temperature``, summed per branch tree: the share of the tree the input
  continues (its confidence in the new ``continues`` edge, kept on it as ``routed``) and, for every
  other tree with at least ``floor``, its best node and share (``RoutedShares.alternatives``).
- ``soft_members``: from the best node of each of the best ``trees`` alternatives, the share
  spreads along ``continues`` edges by each edge's confidence; the turns that keep at least
  ``threshold`` within the session's last ``window`` turns are that tree's soft members of the
  input (recall's graph channel brings them, as linked turns). A sure edge (a user's choice, a
  re-anchored turn, a single conversation: no ``routed``) passes nearly everything on; an edge
  routing was unsure of passes little, so the other half of a tree the router once mixed up
  stays out.
- A tree among neither the input's nor the alternatives was ruled out: it scored far below the
  best, or routing did not consider it at all. Among several conversations its turns do not
  enter the context (the relevance gate); a dormant conversation reaches the input through
  memory (facts, topics, summaries), or when the user moves the input there.

Pure functions over ids and scores.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

#: The ``continues`` edge attribute that holds routing's confidence in it (absent: sure).
ROUTED = "routed"


@dataclass(frozen=True)
class SoftPolicy:
    """The knobs of soft membership, on the router's score scale: at temperature .05 a tree .15
    behind the best keeps 5 % of its mass, one .35 behind 0.1 %. Set on irc-dev's development
    streams (``pcm eval purity``): a lower threshold buys thread recall with purity at about one
    for one; the window and the number of trees change little."""

    temperature: float = 0.05
    threshold: float = 0.1  # the share a turn must keep to be a soft member
    trees: int = 3  # the alternative trees followed, best first
    window: int = 20  # turns back (the session's latest) in which soft members are sought
    floor: float = 0.001  # below this share routing ruled a tree out (at .05: .35 behind the best)


SOFT = SoftPolicy()


class RoutedShares(BaseModel):
    """How an input's routing split its mass over branch trees. ``judged``: the split is
    routing's own, so a tree among neither the input's nor the alternatives was ruled out (it
    scored below ``floor``, or routing did not consider it); a user's choice judges nothing."""

    model_config = ConfigDict(frozen=True)

    share: float = 1.0  # of the tree it continues (a new root: of starting one)
    alternatives: tuple[tuple[str, float], ...] = ()  # (best node of another tree, its share ≥ floor), best first
    judged: bool = False


def routed_shares(scored: Iterable[tuple[str, float]], anchor: str | None, root_of: Callable[[str], str],
                  tau_new: float, policy: SoftPolicy = SOFT) -> RoutedShares:
    """The softmax of the candidates' ``(node, score)`` and of a new root at ``tau_new``, summed
    per tree (``root_of``); ``anchor`` is the node routing chose (None: a new root)."""
    pairs = sorted(scored, key=lambda p: (-p[1], p[0]))  # best first: a tree's first node is its best
    best = max([s for _, s in pairs] + [tau_new])
    weight = [math.exp((s - best) / policy.temperature) for _, s in pairs]
    new = math.exp((tau_new - best) / policy.temperature)
    total = sum(weight) + new
    trees: dict[str, list] = {}  # root → [share, best node]
    for (node, _), w in zip(pairs, weight):
        trees.setdefault(root_of(node), [0.0, node])[0] += w / total
    own = root_of(anchor) if anchor is not None else None
    share = trees[own][0] if own in trees else (new / total if own is None else 1.0)
    others = sorted(((node, s) for root, (s, node) in trees.items() if root != own and s >= policy.floor),
                    key=lambda a: (-a[1], a[0]))
    return RoutedShares(share=round(min(1.0, share), 6), alternatives=tuple((n, round(s, 6)) for n, s in others),
                        judged=True)


def soft_members(alternatives: Sequence[tuple[str, float]], *, parent: Callable[[str], str | None],
                 children: Callable[[str], Iterable[str]], confidence: Mapping[str, float],
                 allowed: Callable[[str], bool], policy: SoftPolicy = SOFT) -> dict[str, float]:
    """node → the share it keeps (≥ ``policy.threshold``), spreading each alternative's share
    best-first along its tree's edges within the ``allowed`` nodes (``confidence``: of a node's
    ``continues`` edge to its parent, 1.0 when absent; never quite 1, so shares fade with distance)."""
    out: dict[str, float] = {}

    def sure(node: str) -> float:
        return min(confidence.get(node, 1.0), 0.999)

    for start, share in alternatives[:policy.trees]:
        if share < policy.threshold or not allowed(start):
            continue
        best = {start: share}
        heap = [(-share, start)]
        while heap:
            negative, node = heapq.heappop(heap)
            if -negative < best[node]:
                continue
            up = parent(node)
            steps = ([(up, sure(node))] if up is not None else []) + [(c, sure(c)) for c in children(node)]
            for nxt, edge in steps:
                kept = -negative * edge
                if kept >= policy.threshold and kept > best.get(nxt, 0.0) and allowed(nxt):
                    best[nxt] = kept
                    heapq.heappush(heap, (-kept, nxt))
        for node, kept in best.items():
            out[node] = max(out.get(node, 0.0), kept)
    return out


def routed_attrs(routing: Mapping[str, object]) -> dict[str, float]:
    """A new turn's ``continues`` edge's attributes from its build's recorded routing: ``routed``,
    the share of the tree routing chose, when routing chose it (no override) and was not sure."""
    shares = routing.get("shares")
    share = float(shares.get("share", 1.0)) if isinstance(shares, dict) else 1.0
    return {ROUTED: share} if routing.get("override") is None and share < 1.0 else {}
