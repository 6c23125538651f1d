"""Anchor routing: scoring, decision rules, presets, and the pure feature helpers (no stores)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from app.core.routing.anchor import (
    CHAT_STREAM,
    FEATURE_ORDER,
    NEGATIVE_FEATURES,
    PRESETS,
    SESSION_DEFAULT,
    AnchorCandidate,
    AnchorRouter,
    Feature,
    Mention,
    RoutingDecision,
    RoutingWeights,
    cosine,
    features_of,
    keyword_overlap,
    mention,
    mentioned_names,
    normalize_name,
    recency_by_position,
    recency_by_time,
    rescale,
    unit,
)

W = RoutingWeights(name="test", sem=1.0, recency=0.5, focus=0.25, conflict=2.0, address=1.0,
                   tau_new=0.5, delta=0.1)


def cand(node_id: str, group: str | None = None, **features: float) -> AnchorCandidate:
    return AnchorCandidate(node_id=node_id, features=features, group=group)


# --------------------------------------------------------------------------- weights and presets


@pytest.mark.parametrize("preset", [SESSION_DEFAULT, CHAT_STREAM])
def test_presets_are_valid_named_data(preset: RoutingWeights) -> None:
    assert PRESETS[preset.name] is preset
    again = RoutingWeights.model_validate(preset.model_dump())
    assert again == preset
    assert all(preset.weight(f) >= 0 for f in Feature)
    assert preset.delta >= 0 and preset.tau_new > 0
    # every feature can be weighted; a preset that ignores the main ones would be a mistake
    assert preset.sem > 0 and preset.recency > 0 and preset.conflict > 0 and preset.override > 0


def test_weights_reject_negatives_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        RoutingWeights(sem=-0.1)
    with pytest.raises(ValidationError):
        RoutingWeights(semantic=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        RoutingWeights(delta=-1.0)
    assert W.weight("sem") == 1.0 and W.weight(Feature.CONFLICT) == 2.0


def test_feature_names_are_the_weight_fields() -> None:
    fields = set(RoutingWeights.model_fields) - {"name", "tau_new", "delta"}
    assert fields == {f.value for f in Feature}
    assert FEATURE_ORDER == tuple(Feature)
    assert NEGATIVE_FEATURES == {Feature.CONFLICT, Feature.SHIFT}


def test_candidate_features_must_lie_in_unit_interval() -> None:
    with pytest.raises(ValidationError):
        cand("a", sem=1.5)
    with pytest.raises(ValidationError):
        cand("a", recency=-0.01)
    with pytest.raises(ValidationError):
        cand("a", sem=math.nan)
    assert cand("a", sem=0.0, recency=1.0).features == {"sem": 0.0, "recency": 1.0}


# --------------------------------------------------------------------------- scoring


def test_components_are_weighted_contributions_summing_to_score() -> None:
    scored = AnchorRouter(W).score(cand("a", sem=0.8, recency=0.5, focus=1.0, conflict=0.25))
    assert scored.components == pytest.approx(
        {"sem": 0.8, "recency": 0.25, "focus": 0.25, "conflict": -0.5})
    assert scored.score == pytest.approx(sum(scored.components.values()))
    assert scored.score == pytest.approx(0.8)


def test_zero_weight_and_unknown_features_are_not_components() -> None:
    scored = AnchorRouter(W).score(cand("a", sem=0.5, task=1.0, author=1.0))
    assert scored.components == {"sem": 0.5}  # task and author carry weight 0 in W
    unknown = AnchorCandidate(node_id="b", features={"sem": 0.5, "mystery": 1.0})
    assert AnchorRouter(W).score(unknown).components == {"sem": 0.5}


def test_conflict_lowers_the_score() -> None:
    router = AnchorRouter(W)
    clean = router.score(cand("a", sem=0.9))
    clash = router.score(cand("a", sem=0.9, conflict=1.0))
    assert clash.score == pytest.approx(clean.score - 2.0)


# --------------------------------------------------------------------------- decisions


def test_no_candidates_starts_a_new_root() -> None:
    d = AnchorRouter(W).route([])
    assert d.new_root and d.anchor_id is None and d.best_guess is None and not d.ambiguous
    assert d.candidates == [] and "no candidates" in d.reason


def test_below_tau_new_starts_a_new_root_keeping_the_best_guess() -> None:
    d = AnchorRouter(W).route([cand("a", sem=0.3), cand("b", sem=0.1)])
    assert d.new_root and d.anchor_id is None and not d.ambiguous
    assert d.best_guess == "a" and "tau_new" in d.reason
    assert [c.node_id for c in d.candidates] == ["a", "b"]


def test_at_tau_new_continues() -> None:
    d = AnchorRouter(W).route([cand("a", sem=0.5)])
    assert not d.new_root and d.anchor_id == "a"
    assert d.margin == pytest.approx(0.0)  # single candidate: margin over tau_new


def test_clear_winner_is_the_anchor() -> None:
    d = AnchorRouter(W).route([cand("b", sem=0.4), cand("a", sem=0.9, address=1.0)])
    assert d.anchor_id == "a" == d.best_guess and not d.new_root and not d.ambiguous
    assert d.margin == pytest.approx(1.9 - 0.4)
    assert d.clarification is None and d.strategy == "test"


def test_close_top_two_are_ambiguous_and_keep_the_best_guess() -> None:
    d = AnchorRouter(W).route([cand("a", sem=0.80), cand("b", sem=0.75), cand("c", sem=0.1)])
    assert d.ambiguous and not d.new_root
    assert d.anchor_id == "a" == d.best_guess
    assert d.margin == pytest.approx(0.05)
    assert d.clarification is not None and "a" in d.clarification and "b" in d.clarification


def test_margin_equal_to_delta_is_not_ambiguous() -> None:
    d = AnchorRouter(W).route([cand("a", sem=1.0), cand("b", sem=0.875)])
    assert d.margin == pytest.approx(0.125) and not d.ambiguous
    weights = W.model_copy(update={"delta": 0.125})
    assert not AnchorRouter(weights).route([cand("a", sem=1.0), cand("b", sem=0.875)]).ambiguous


def test_candidates_of_one_group_are_not_ambiguous_with_each_other() -> None:
    same = [cand("a", "t1", sem=0.80), cand("b", "t1", sem=0.78), cand("c", "t2", sem=0.3)]
    d = AnchorRouter(W).route(same)
    assert not d.ambiguous and d.anchor_id == "a"
    assert d.margin == pytest.approx(0.5)  # against c, the best of another group
    other = [cand("a", "t1", sem=0.80), cand("b", "t2", sem=0.78)]
    assert AnchorRouter(W).route(other).ambiguous


def test_below_tau_is_never_ambiguous() -> None:
    d = AnchorRouter(W).route([cand("a", sem=0.2), cand("b", sem=0.2)])
    assert d.new_root and not d.ambiguous


def test_ties_are_broken_by_node_id_whatever_the_input_order() -> None:
    cands = [cand(n, sem=0.9) for n in ("n3", "n1", "n2")] + [cand("n0", sem=0.2)]
    first = AnchorRouter(W).route(cands)
    second = AnchorRouter(W).route(list(reversed(cands)))
    assert first == second
    assert [c.node_id for c in first.candidates] == ["n1", "n2", "n3", "n0"]
    assert first.anchor_id == "n1" and first.ambiguous


def test_every_candidate_is_recorded_sorted_best_first() -> None:
    cands = [cand(f"n{k}", sem=k / 10, recency=1 - k / 10) for k in range(10)]
    d = AnchorRouter(W).route(cands)
    assert len(d.candidates) == 10
    scores = [c.score for c in d.candidates]
    assert scores == sorted(scores, reverse=True)
    for c in d.candidates:
        assert c.score == pytest.approx(sum(c.components.values()))


def test_duplicate_node_ids_are_rejected() -> None:
    with pytest.raises(ValueError):
        AnchorRouter(W).route([cand("a", sem=0.5), cand("a", sem=0.6)])


def test_decision_round_trips_through_json() -> None:
    d = AnchorRouter(W).route([cand("a", "g", sem=0.8), cand("b", sem=0.75)])
    text = d.model_dump_json()
    assert RoutingDecision.model_validate_json(text) == d
    data = json.loads(text)
    assert data["candidates"][0]["components"]["sem"] == pytest.approx(0.8)
    assert data["candidates"][0]["group"] == "g"


def test_session_preset_behaviour() -> None:
    router = AnchorRouter(SESSION_DEFAULT)
    frontier = {"focus": 1.0, "recency": 1.0}
    related = router.route([cand("tip", sem=0.4, **frontier), cand("old", sem=0.3, recency=0.2)])
    assert related.anchor_id == "tip" and not related.new_root
    unrelated = router.route([cand("tip", sem=0.05, **frontier), cand("old", sem=0.05)])
    assert unrelated.new_root and unrelated.best_guess == "tip"
    moved = router.route([cand("tip", sem=0.4, **frontier), cand("old", sem=0.3, override=1.0)])
    assert moved.anchor_id == "old"


def test_chat_preset_prefers_the_addressed_speaker() -> None:
    router = AnchorRouter(CHAT_STREAM)
    d = router.route([
        cand("prev", recency=1.0, sem=0.3),
        cand("bob", recency=0.5, sem=0.1, address=1.0),
        cand("carol", recency=0.9, sem=0.2, conflict=1.0),
    ])
    assert d.anchor_id == "bob"
    lone = router.route([cand("prev", recency=1.0, sem=0.1)])
    assert lone.new_root  # nobody named, nothing similar, not the author's own thread


# --------------------------------------------------------------------------- feature helpers


def test_recency_by_time() -> None:
    assert recency_by_time(0, 60) == 1.0
    assert recency_by_time(60, 60) == pytest.approx(0.5)
    assert recency_by_time(180, 60) == pytest.approx(0.125)
    assert recency_by_time(-5, 60) == 1.0  # clock skew never boosts above 1
    with pytest.raises(ValueError):
        recency_by_time(1, 0)


def test_recency_by_position() -> None:
    assert recency_by_position(1, 3) == 1.0
    assert recency_by_position(4, 3) == pytest.approx(0.5)
    assert recency_by_position(0, 3) == 1.0
    assert recency_by_position(2, 3) > recency_by_position(3, 3) > 0
    with pytest.raises(ValueError):
        recency_by_position(1, -1)


def test_normalize_name() -> None:
    assert normalize_name("  [[Mandrix]]_ ") == "mandrix"
    assert normalize_name("@Bob:") == "bob"


@pytest.mark.parametrize("text", ["bob: hi", "Bob, hi", "@bob hi", "BOB- hi", "bob-> passwd",
                                  "bob", "bob: there"])
def test_mention_at_the_start_is_an_address(text: str) -> None:
    assert mention(text, "Bob") == Mention.ADDRESS


def test_mention_as_a_word_and_not_at_all() -> None:
    assert mention("ask bob about it", "bob") == Mention.WORD
    assert mention("ask Bob.", "bob") == Mention.WORD
    assert mention("bobby tables", "bob") == Mention.NONE  # whole words only
    assert mention("no name here", "bob") == Mention.NONE
    assert mention("", "bob") == Mention.NONE
    assert mention("so is it on", "is") == Mention.NONE  # short names only count as an address
    assert mention("is: it is on", "is") == Mention.ADDRESS
    assert mention("hello x", "x") == Mention.NONE  # one-letter names never match
    assert mention(["bob", "hi"], "bob") == Mention.ADDRESS  # tokens accepted too


def test_mention_truthiness() -> None:
    assert not mention("no name here", "bob") and not Mention.NONE
    assert mention("ask bob", "bob") and mention("bob: hi", "bob")
    assert Mention.NONE == "none" and Mention.ADDRESS.value == "address"  # still serialises by value


def test_mentioned_names_keeps_text_order_and_prefers_address() -> None:
    found = mentioned_names("carol: ask Bob, or carol again", ["Bob", "carol", "dave"])
    assert list(found) == ["carol", "Bob"]
    assert found == {"carol": Mention.ADDRESS, "Bob": Mention.WORD}
    assert mentioned_names("nothing", ["bob"]) == {}


def test_keyword_overlap() -> None:
    assert keyword_overlap("grub menu gone", "reinstall grub menu") == pytest.approx(2 / 3)
    assert keyword_overlap("grub", "the grub") == 1.0
    assert keyword_overlap("wifi drivers", "sound card") == 0.0
    assert keyword_overlap("the a", "grub") == 0.0
    assert keyword_overlap({"x", "y"}, {"y"}) == 1.0


def test_cosine() -> None:
    assert cosine([1, 0], [0, 1]) == pytest.approx(0.0)
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([1, 0], [-1, 0]) == pytest.approx(-1.0)
    assert cosine([0, 0], [1, 1]) == 0.0
    assert cosine(np.array([3.0, 4.0]), np.array([4.0, 3.0])) == pytest.approx(24 / 25)


def test_unit_rescale_and_features_of() -> None:
    assert unit(-0.2) == 0.0 and unit(1.7) == 1.0 and unit(0.3) == 0.3 and unit(math.nan) == 0.0
    assert rescale(0.5, 0.0, 1.0) == 0.5 and rescale(0.1, 0.2, 0.6) == 0.0
    assert rescale(0.4, 0.2, 0.6) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        rescale(0.5, 1.0, 1.0)
    assert features_of({Feature.SEM: 1.4, "recency": -1}) == {"sem": 1.0, "recency": 0.0}
    with pytest.raises(ValueError):
        features_of({"nonsense": 0.5})
