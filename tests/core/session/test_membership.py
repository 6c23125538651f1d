"""Soft tree membership: routing's shares per tree, and how far a share spreads along a tree."""

from __future__ import annotations

import pytest

from app.core.session.membership import ROUTED, SoftPolicy, routed_attrs, routed_shares, soft_members

ROOT = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c"}


def test_a_near_tie_gives_the_other_tree_a_share_and_a_clear_lead_does_not() -> None:
    near = routed_shares([("b1", 1.0), ("a1", 1.02), ("a2", 0.7)], "a1", ROOT.__getitem__, tau_new=0.6)
    assert near.alternatives[0][0] == "b1"  # the other tree, by its best node
    assert 0.35 < near.alternatives[0][1] < 0.5 < near.share  # a1 and a2 (tree a) share the rest
    assert near.share + near.alternatives[0][1] == pytest.approx(1.0, abs=1e-3)  # a new root: nothing left
    assert near.judged  # routing's own split (a user's choice judges nothing: RoutedShares())
    clear = routed_shares([("a1", 1.4), ("b1", 0.9)], "a1", ROOT.__getitem__, tau_new=0.6)
    assert clear.share > 0.99 and clear.alternatives == ()  # b scored far below: ruled out


def test_a_new_root_keeps_the_share_of_starting_one_and_every_tree_is_an_alternative() -> None:
    shares = routed_shares([("a1", 0.58), ("b2", 0.5)], None, ROOT.__getitem__, tau_new=0.6)
    assert 0.4 < shares.share < 0.6
    assert [n for n, _ in shares.alternatives] == ["a1", "b2"]


def test_soft_members_follow_at_most_the_policys_trees_best_first() -> None:
    shares = routed_shares([("a1", 1.0), ("b1", 1.0), ("c1", 1.01)], "a1", ROOT.__getitem__, tau_new=0.6)
    assert [n for n, _ in shares.alternatives] == ["c1", "b1"]
    got = soft_members(shares.alternatives, parent=lambda n: None, children=lambda n: [], confidence={},
                       allowed=lambda n: True, policy=SoftPolicy(trees=1))
    assert set(got) == {"c1"}


def _tree() -> dict[str, str | None]:
    # r ← x ← y ← z, and r ← w: y was routed onto x unsure (share .15), the rest sure
    return {"r": None, "x": "r", "y": "x", "z": "y", "w": "r"}


def _members(start: str, share: float, confidence: dict[str, float], allowed=lambda n: True) -> dict[str, float]:
    parent = _tree()
    return soft_members([(start, share)], parent=parent.__getitem__,
                        children=lambda n: [c for c, p in parent.items() if p == n], confidence=confidence,
                        allowed=allowed)


def test_a_share_spreads_along_sure_edges_and_stops_at_an_unsure_one() -> None:
    got = _members("z", 0.6, {"y": 0.15})
    assert set(got) == {"z", "y"}  # y → x is the unsure edge: 0.6 × 0.15 < 0.1
    assert got["z"] == 0.6 and got["y"] == pytest.approx(0.6 * 0.999)
    sure = _members("z", 0.6, {})
    assert set(sure) == {"r", "w", "x", "y", "z"}  # sure edges pass (almost) all of it on, down too
    assert sure["w"] < sure["r"] < sure["x"]  # farther from the start, a little less


def test_below_the_threshold_or_outside_the_window_nothing_is_a_member() -> None:
    assert _members("z", 0.05, {}) == {}
    assert set(_members("z", 0.6, {}, allowed=lambda n: n in {"z", "y", "x"})) == {"z", "y", "x"}


def test_a_turns_edge_keeps_routings_share_only_when_routing_chose_it_unsure() -> None:
    unsure = {"anchor_id": "n1", "override": None, "shares": {"share": 0.55}}
    assert routed_attrs(unsure) == {ROUTED: 0.55}
    assert routed_attrs({**unsure, "override": "n1"}) == {}  # the user's choice is sure
    assert routed_attrs({**unsure, "shares": {"share": 1.0}}) == {}
    assert routed_attrs({}) == {}  # a record from before shares were kept
