"""The relevance gate: every recall candidate graded against the query and the anchor's branch.

After CRAG's retrieval evaluator (seed 001 §1.2, §2.3.4): a light grader scores each retrieved
item for the query; what falls below the threshold is dropped ("below relevance threshold"),
and when nothing passes the context says the evidence is insufficient instead of padding the
budget with whatever was nearest. The grader here needs no model of its own:

- ``sem``: cosine of the query and the item (the vector channel's score, or from the stored
  vectors of recent turns); ``lex``: share of the query's content words the item holds, each
  word weighted by its rarity among the listed candidates — the channels' hits, not the
  neighbours propagation reached from them (a word every candidate has says nothing);
  ``lex_rank``: the full-text channel's BM25 score relative to its best hit (a list-relative
  estimate: it counts too, except where an item must prove itself absolutely — below);
- ``support`` = how far either of them reaches its "clearly about it" level, clipped to [0, 1];
- ``rel`` = the item's fused recall score relative to the best few (the ``ref_rank``-th best
  score, so one outlier at the top — a hit with strong neighbours — does not push every other
  item down), at most 1: how it stands in this list;
- ``grade`` = rel × support for an item judged on its own merit; as support is at most 1, an
  item whose ``rel`` is below the threshold fails without its support being measured (most
  candidates: the neighbours propagation reaches from weak hits).

Branch isolation: an item's *relation* to the anchor decides what it must pass. Turns on the
anchor's branch that the branch's recent window or the graph (merged and linked turns) brought
in pass as the conversation being continued (grade 1.0), and so does a remembered fact whose
subject the input names (every word of its key); older turns of the same branch tree
("tree") and every item when the input starts something new are judged on their own merit
(grade ≥ the plan's threshold, which the confidence band sets). A turn of *another* branch,
while the input continues one — or when the session holds several conversations, among which
the input starts a new one — must be about the input by meaning and by words at once (support
is the lesser of the two, against stricter levels, and words by their absolute share only):
neighbouring conversations share a vocabulary and a register, and similarity alone lets them
leak in. Such a turn must also add to the conversation being continued: hold a word of the input
that none of that conversation's turns (the branch's window and linked turns) holds. A turn of
another conversation repeating what this one already says about the input is that
conversation's, not this one's; what only it says is what the input may be reaching for (CRAG:
external knowledge where the retrieved knowledge falls short).
When the session holds several conversations, the anchor's tree beyond its recent window (and
beyond what the graph links) is held to the same two tests (``strict_tree``). There the trees
were grown by routing, and every input routed to the wrong conversation joined two of them: the
farther back a tree reaches, the more of it is another conversation's talk. Its recent window
and linked turns still pass as the conversation being continued; a session of one conversation
keeps judging its older turns on their own merit.
Routing's own view bounds this too (``app.core.session.membership``): among several
conversations, a turn of a conversation routing ruled out for the input (scored far below the
best, or not considered at all) fails whatever its grade; one routing hesitated over enters as
linked (its soft members), the others on their merit.
Grading goes best first by fused score and may stop once enough candidates have passed
(``enough``): recall selects from the best few passing ones only, so the rest could not be
chosen whatever their grade, and are left ungraded ("not graded").
Pure functions over ids, texts and scores.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from app.core.text.sentences import piece_spans
from app.core.text.words import RANKING

Relation = Literal["branch", "linked", "tree", "other"]
BELOW = "below relevance threshold"
UNGRADED = "not graded: enough better-ranked candidates passed"


class GatePolicy(BaseModel):
    """How candidates are graded; ``threshold`` comes from the plan (``rerank.relevance_threshold``)."""

    threshold: float = 0.3
    sem_floor: float = 0.1  # a cosine at or below this is no semantic support at all
    sem_full: float = 0.3  # from this cosine up, full semantic support
    lex_full: float = 0.5  # this share of the query's weighted words is full lexical support
    cover: float = 0.5  # a sub-question is covered by an item holding this share of its words ...
    cover_sem: float = 0.3  # ... or whose cosine with it reaches this (sem_full: full semantic support)
    ref_rank: int = 3  # rel is measured against the score at this rank (a third of the list, if shorter)
    strict_other: bool = False  # a branch is continued, or there are several: other branches need both signals
    strict_tree: bool = False  # several conversations: the anchor tree's turns outside its window need them too
    other_sem_full: float = 0.6  # ... full semantic support of another branch's turn from this cosine
    other_lex_full: float = 0.75  # ... and full lexical support from this share of the query's words


@dataclass(frozen=True, slots=True)
class Grade:
    """One candidate's grade and what it was made of (``sem`` None: no cosine known). A plain
    record: a build grades hundreds of candidates."""

    grade: float | None  # None: too far below the best to pass whatever its support (not graded further)
    rel: float
    sem: float | None = None
    lex: float = 0.0
    lex_rank: float = 0.0
    relation: Relation = "other"
    adds: bool = True  # holds a word of the input the conversation being continued does not
    ruled_out: bool = False  # a turn of a conversation routing ruled out for the input
    passed: bool = False


class GateSummary(BaseModel):
    """What the gate decided for one build: the threshold, how many passed, whether the evidence
    is insufficient, and the sub-questions no passing item covers."""

    threshold: float
    graded: int = 0
    passed: int = 0
    unlisted: int = 0  # neighbours of hits too far below the best to pass (or not needed): dropped, not listed
    insufficient: bool = False
    uncovered: list[str] = Field(default_factory=list)


def weights(query: str, texts: Iterable[str]) -> dict[str, float]:
    """The query's content words, each weighted by log(1 + N / (1 + df)) over ``texts``."""
    asked = RANKING.content(query)
    df = dict.fromkeys(asked, 0)
    n = 0
    for text in texts:  # each text's words met by set intersection (a build weighs hundreds)
        n += 1
        for word in asked & RANKING.content(text):
            df[word] += 1
    return rarity(df, n)


def rarity(df: Mapping[str, int], n: int) -> dict[str, float]:
    """Each word of ``df`` (the query's content words, by how many of ``n`` texts hold each)
    weighted by log(1 + N / (1 + df)), in word order: ``weights`` from counts made elsewhere."""
    return {word: math.log(1.0 + (n + 1) / (1.0 + df[word])) for word in sorted(df)}


def coverage(word_weights: Mapping[str, float], text: str) -> float:
    """Share of the weighted words of ``word_weights`` that ``text`` holds, in [0, 1]."""
    total = sum(word_weights.values())
    if total <= 0:
        return 0.0
    have = RANKING.content(text)
    return sum(w for word, w in word_weights.items() if word in have) / total


def sentence_coverage(word_weights: Mapping[str, float], text: str) -> float:
    """``coverage`` by the best of ``text``'s sentences (its ``piece_spans`` pieces): how much of
    the query one sentence holds, where ``coverage`` counts the words wherever they stand."""
    total = sum(word_weights.values())
    if total <= 0:
        return 0.0
    # summed in the weights' order, not a set's: the same score in every process
    return max((sum(w for word, w in word_weights.items() if word in have) / total
                for have in _sentence_words(text)), default=0.0)


@functools.lru_cache(maxsize=65_536)
def _sentence_words(text: str) -> tuple[frozenset[str], ...]:
    """The content words of each of ``text``'s sentences, remembered (a build asks of the same
    turns again)."""
    return tuple(RANKING.content(text[start:end]) for start, end in piece_spans(text))


def unsaid(word_weights: Mapping[str, float], said: Iterable[str]) -> frozenset[str]:
    """The words of ``word_weights`` (the input's) that none of the texts ``said`` holds."""
    held: set[str] = set()
    for text in said:
        held |= RANKING.content(text)
    return frozenset(word for word in word_weights if word not in held)


def support(sem: float | None, lex: float, policy: GatePolicy, *, strict: bool = False) -> float:
    """How clearly the item is about the query, in [0, 1]: by meaning or by words; ``strict``,
    by meaning (against ``other_sem_full``) and by words at once."""
    full = policy.other_sem_full if strict else policy.sem_full
    by_sem = 0.0 if sem is None else (sem - policy.sem_floor) / max(1e-9, full - policy.sem_floor)
    by_lex = lex / max(1e-9, policy.other_lex_full if strict else policy.lex_full)
    value = min(by_sem, by_lex) if strict else max(by_sem, by_lex)
    return max(0.0, min(1.0, value))


def grade(fused: Mapping[str, float], *, sem: Mapping[str, float], lex: Mapping[str, float],
          relation: Mapping[str, Relation], policy: GatePolicy,
          lex_rank: Mapping[str, float] | None = None, adds: Mapping[str, bool] | None = None,
          ruled_out: Container[str] = frozenset(), enough: int = 0,
          shown: Container[str] | None = None) -> dict[str, Grade]:
    """The grades of the items of ``fused`` (ids with a fused score), best first; see the module doc.
    ``adds``: whether an item holds a word of the input the conversation being continued does
    not (``unsaid``); an item of another branch without one fails under ``strict_other``, an
    older turn of the anchor's tree under ``strict_tree``. ``ruled_out``: turns of another
    conversation routing ruled out for the input; they fail. ``enough`` > 0: stop once that many
    items with a positive score have passed (the maps are read only for the items graded, so
    they may compute on demand). ``shown``: the items that get a grade even when their score
    alone fails them (None: every item); the others are left out of the result then (the caller
    counts them), and nothing of theirs is read."""
    order = sorted(fused, key=lambda i: (-fused[i], i))
    top = reference(fused.values(), policy)
    out: dict[str, Grade] = {}
    passed = 0
    for item in order:
        if enough and passed >= enough:
            break
        rel = min(1.0, fused[item] / top) if top > 0 else 0.0
        if rel < policy.threshold and shown is not None and item not in shown:
            continue
        kind = relation.get(item, "other")
        if rel < policy.threshold and kind not in ("branch", "linked"):  # grade ≤ rel: no support lifts it
            out[item] = Grade(grade=None, rel=round(rel, 6), relation=kind)
            continue
        s = sem.get(item)
        lx = lex.get(item, 0.0)
        lr = (lex_rank or {}).get(item, 0.0)
        strict = (policy.strict_other and kind == "other") or (policy.strict_tree and kind == "tree")
        words = lx if strict else max(lx, lr)
        new = not strict or (adds or {}).get(item, True)
        excluded = kind == "other" and item in ruled_out
        value = 1.0 if kind in ("branch", "linked") else rel * support(s, words, policy, strict=strict) * new
        value = 0.0 if excluded else value
        out[item] = Grade(grade=round(value, 6), rel=round(rel, 6), sem=None if s is None else round(s, 6),
                          lex=round(lx, 6), lex_rank=round(lr, 6), relation=kind, adds=new, ruled_out=excluded,
                          passed=value >= policy.threshold)
        passed += out[item].passed and fused[item] > 0
    return out


def reference(scores: Iterable[float], policy: GatePolicy) -> float:
    """The score ``rel`` is measured against: the ``ref_rank``-th best (a third of the list, if shorter)."""
    ranked = sorted(scores, reverse=True)
    return ranked[max(1, min(policy.ref_rank, len(ranked) // 3)) - 1] if ranked else 0.0


def covering(question: str, texts: Mapping[str, str], cosines: Mapping[str, float], pool_texts: Iterable[str],
             policy: GatePolicy) -> str:
    """How the items ``texts`` (id → text) cover ``question``: "words" when one holds ``policy.cover``
    of its words (weighted by their rarity in ``pool_texts``), "meaning" when one's cosine with
    it (``cosines``, by id) reaches ``policy.cover_sem`` ("Which database did we pick?" and "We
    decided to use Postgres" share no word); "" when none does."""
    w = weights(question, pool_texts)
    if w and any(coverage(w, text) >= policy.cover for text in texts.values()):
        return "words"
    if any(cosines.get(item, 0.0) >= policy.cover_sem for item in texts):
        return "meaning"
    return ""


def reason(g: Grade, threshold: float) -> str:
    """The drop reason shown in the evidence panel."""
    if g.grade is None:
        return f"{BELOW} (score {g.rel:.2f} of the best: under {threshold:.2f} whatever its support)"
    how = f"grade {g.grade:.2f} < {threshold:.2f}: score {g.rel:.2f} of the best"
    how += f", cosine {g.sem:.2f}" if g.sem is not None else ", no cosine"
    how += f", words {g.lex:.2f}, full-text {g.lex_rank:.2f}"
    if g.ruled_out:
        how += "; another conversation, one routing ruled out for this input"
    elif not g.adds:
        whose = "an older turn of this tree" if g.relation == "tree" else "another conversation's"
        how += f"; {whose}, and every word of the input it holds is already in this one"
    return f"{BELOW} ({how})"
