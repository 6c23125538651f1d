"""The relevance gate's grading: pure functions over scores and texts."""

from __future__ import annotations

from app.core.context.gate import (
    BELOW,
    GatePolicy,
    coverage,
    covering,
    grade,
    reason,
    sentence_coverage,
    support,
    unsaid,
    weights,
)


def test_weights_favour_rare_words_and_coverage_counts_them() -> None:
    pool = ["python error in the parser", "kyoto temple visit", "kyoto train", "kyoto hotel"]
    w = weights("kyoto python error", pool)
    assert w["python"] > w["kyoto"]  # a word every Kyoto turn has says less
    assert coverage(w, "the python error again") > coverage(w, "kyoto again")
    assert coverage({}, "anything") == 0.0


def test_support_by_meaning_or_words_and_strict_needs_both() -> None:
    policy = GatePolicy()
    assert support(0.35, 0.0, policy) == 1.0  # clearly similar
    assert support(0.05, 0.0, policy) == 0.0  # unrelated
    assert support(None, 0.5, policy) == 1.0  # no cosine known, the words carry it
    assert support(0.7, 0.0, policy, strict=True) == 0.0  # another branch: meaning alone is not enough
    assert support(0.7, 0.8, policy, strict=True) == 1.0


def test_grade_passes_the_branch_and_judges_the_rest_on_merit() -> None:
    fused = {"chain": 0.1, "near": 1.0, "weak": 0.2, "unrelated": 0.9, "other": 0.95}
    sem = {"near": 0.6, "weak": 0.6, "unrelated": 0.02, "other": 0.7}
    relation = {"chain": "branch", "near": "tree", "weak": "tree", "unrelated": "tree", "other": "other"}
    loose = grade(fused, sem=sem, lex={}, relation=relation, policy=GatePolicy(threshold=0.3))
    assert loose["chain"].passed and loose["chain"].grade == 1.0  # the conversation being continued
    assert loose["near"].passed
    assert not loose["weak"].passed  # relevant, but far below the best of this list
    assert not loose["unrelated"].passed  # high in the list, about something else
    assert loose["other"].passed  # starting something new: similarity suffices
    strict = grade(fused, sem=sem, lex={}, relation=relation, policy=GatePolicy(threshold=0.3, strict_other=True))
    assert not strict["other"].passed  # continuing a branch: another branch needs words too
    assert reason(loose["weak"], 0.3).startswith(BELOW)


def test_a_question_is_covered_by_words_or_by_meaning() -> None:
    pool = ["the hotel in Kyoto costs 90 euros", "the train leaves at nine", "lunch was ramen"]
    kept = {"h": pool[0]}
    assert covering("How much is the Kyoto hotel?", kept, {}, pool, GatePolicy()) == "words"
    assert covering("What is the museum's address?", kept, {}, pool, GatePolicy()) == ""
    # no shared word, but the item's cosine with the question reaches cover_sem
    assert covering("What is the museum's address?", kept, {"h": 0.35}, pool, GatePolicy()) == "meaning"
    assert covering("What is the museum's address?", kept, {"h": 0.2, "other": 0.9}, pool, GatePolicy()) == ""


def test_bm25_standing_counts_except_for_another_conversation() -> None:
    fused = {"a": 1.0, "b": 0.9, "c": 0.8}
    relation = {"a": "other", "b": "other", "c": "other"}
    sem = {"a": 0.05, "b": 0.05, "c": 0.05}
    lex_rank = {"a": 1.0, "b": 0.9, "c": 0.8}  # strong full-text hits without the query's words counted
    loose = grade(fused, sem=sem, lex={}, lex_rank=lex_rank, relation=relation, policy=GatePolicy(threshold=0.3))
    assert all(g.passed for g in loose.values())
    strict = grade(fused, sem=sem, lex={}, lex_rank=lex_rank, relation=relation,
                   policy=GatePolicy(threshold=0.3, strict_other=True))
    assert not any(g.passed for g in strict.values())


def test_another_conversation_must_add_a_word_this_one_does_not_hold() -> None:
    w = weights("is the gftp client good", ["gftp crashed", "try the lftp client", "gftp is fine"])
    assert unsaid(w, ["my gftp crashed again"]) == {"client", "good"}
    assert unsaid(w, []) == frozenset(w)  # nothing said yet: every word is new
    fused = {"same": 1.0, "new": 1.0}
    relation = {"same": "other", "new": "other"}
    sem = {"same": 0.8, "new": 0.8}
    lex = {"same": 0.9, "new": 0.9}
    adds = {"same": False, "new": True}
    strict = grade(fused, sem=sem, lex=lex, relation=relation, adds=adds,
                   policy=GatePolicy(threshold=0.3, strict_other=True))
    assert strict["new"].passed
    assert not strict["same"].passed and strict["same"].grade == 0.0 and not strict["same"].adds
    assert "already in this one" in reason(strict["same"], 0.3)
    loose = grade(fused, sem=sem, lex=lex, relation=relation, adds=adds, policy=GatePolicy(threshold=0.3))
    assert loose["same"].passed  # starting something new: there is no conversation to repeat


def test_grading_goes_best_first_and_stops_when_enough_passed() -> None:
    fused = {"a": 1.0, "b": 0.9, "c": 0.8, "d": 0.1, "e": 0.05}
    relation = {i: "tree" for i in fused} | {"e": "branch"}
    sem = {i: 0.6 for i in fused}
    policy = GatePolicy(threshold=0.3)
    every = grade(fused, sem=sem, lex={}, relation=relation, policy=policy)
    assert [i for i, g in every.items() if g.passed] == ["a", "b", "c", "e"]
    # "d" scores too far below the best for any support to lift it: its support is not measured
    assert every["d"].grade is None and not every["d"].passed and "whatever its support" in reason(every["d"], 0.3)
    assert every["e"].grade == 1.0  # the conversation being continued passes whatever its score
    # an item not shown (a neighbour of a weak hit) that its score alone fails is left out, unread
    class Unread(dict):
        def get(self, key, default=None):
            assert key != "d", "the relation of an item not shown was read"
            return super().get(key, default)

    assert "d" not in grade(fused, sem=sem, lex={}, relation=Unread(relation), policy=policy, shown={"a", "b", "c", "e"})
    # two passing are enough: the rest is not graded (and so not read from the maps)
    assert list(grade(fused, sem=sem, lex={}, relation=relation, policy=policy, enough=2)) == ["a", "b"]


def test_sentence_coverage_is_the_best_sentence_s_share_of_the_weighted_words() -> None:
    """``coverage`` counts the query's words wherever they stand in a text; ``sentence_coverage``
    only those one sentence holds: the same words spread over a turn count less."""
    w = weights("Which bands played for Ana in Berlin?", ["x"])
    together = "We had lunch. Two bands played for Ana in Berlin last spring!"
    apart = "Ana came by. The bands played loud. Berlin is far."
    assert coverage(w, together) == coverage(w, apart) == 1.0
    assert sentence_coverage(w, together) == 1.0
    assert sentence_coverage(w, apart) == coverage(w, "The bands played loud.") == 0.5
    assert sentence_coverage(w, "") == 0.0 and sentence_coverage({}, together) == 0.0
