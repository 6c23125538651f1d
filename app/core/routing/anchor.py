"""Anchor routing: which node a new input continues, or a new task root, or "ask" (seed §3.5).

For a new input the caller builds a candidate set (active branch frontiers, recent turns, nodes
linked to recent environment events) and computes, for every candidate, features in [0, 1]
(the names are the ``Feature`` enum). ``AnchorRouter`` fuses them linearly::

    score = Σ_f  w_f · feature_f          (features in ``NEGATIVE_FEATURES`` enter with a minus)

which is the seed's  λ1·sem + λ2·task + λ3·recency + λ4·focus − λ5·conflict, extended with the
interaction-structure signals that carry most of the evidence in multi-party chat (address,
reply, author continuity) and with the user's own earlier overrides. Then:

- no candidate, or the best score below ``tau_new``  → a new task root;
- otherwise the best candidate is the anchor, and when the runner-up is closer than ``delta``
  the decision is flagged ambiguous with a clarification question (the best guess is kept).

Everything is pure and deterministic: equal scores are ordered by ``node_id``, and every
candidate's weighted components are recorded in the ``RoutingDecision`` (JSON-serialisable, so it
goes into the per-turn trace). The module also holds the small feature helpers (recency decay,
name mention/address detection, keyword overlap, cosine) shared by the engine and ``app.eval``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.text.words import ROUTING, ROUTING_EDGES

# --------------------------------------------------------------------------- features


class Feature(StrEnum):
    """Names of the candidate features a caller may supply; every value lies in [0, 1]."""

    SEM = "sem"  # semantic similarity of input and candidate (e.g. cosine of embeddings, clipped)
    TASK = "task"  # the input's intent/task structure matches the candidate's task or thread
    RECENCY = "recency"  # how recent the candidate is (time half-life or position decay)
    FOCUS = "focus"  # the candidate is on the branch the author is currently working on
    CONFLICT = "conflict"  # continuing there contradicts known facts (e.g. input addresses others)
    ADDRESS = "address"  # the input names the candidate's author (1 = addressed as "name:")
    REPLY = "reply"  # the candidate addressed the input's author (a question waiting for them)
    AUTHOR = "author"  # author continuity: the candidate is the input author's own latest turn
    OVERRIDE = "override"  # the user earlier moved an input onto this node or its branch
    FOLLOW = "follow"  # the input depends on what came before, and this is what it refers to
    SHIFT = "shift"  # the input opens a new topic (a greeting, "by the way"), and names nothing here


#: Features that lower the score (their weighted contribution is negative).
NEGATIVE_FEATURES: frozenset[Feature] = frozenset({Feature.CONFLICT, Feature.SHIFT})

#: The order in which contributions are summed (fixed, so float sums are reproducible).
FEATURE_ORDER: tuple[Feature, ...] = tuple(Feature)


# --------------------------------------------------------------------------- weights


class RoutingWeights(BaseModel):
    """A routing strategy as data: one non-negative weight per ``Feature`` plus the two thresholds.

    ``tau_new``: the best score must reach it, otherwise the input starts a new task root.
    ``delta``: when the top two candidates are closer than this the decision is ambiguous.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    sem: float = Field(0.0, ge=0.0)
    task: float = Field(0.0, ge=0.0)
    recency: float = Field(0.0, ge=0.0)
    focus: float = Field(0.0, ge=0.0)
    conflict: float = Field(0.0, ge=0.0)
    address: float = Field(0.0, ge=0.0)
    reply: float = Field(0.0, ge=0.0)
    author: float = Field(0.0, ge=0.0)
    override: float = Field(0.0, ge=0.0)
    follow: float = Field(0.0, ge=0.0)
    shift: float = Field(0.0, ge=0.0)
    tau_new: float = 0.0
    delta: float = Field(0.0, ge=0.0)

    def weight(self, feature: Feature | str) -> float:
        """Return the weight of ``feature`` (a ``Feature`` or its string value)."""
        return float(getattr(self, Feature(feature).value))


#: Interactive sessions: one user, branches of tasks. Meaning, task match and the user's own
#: corrections decide; focus + recency alone (0.6) stay below ``tau_new``, so an input unrelated
#: to every candidate starts a new task root. What the input says of its place in the conversation
#: (``app.core.intent.dependence``) weighs too: a follow-up continues what it refers to
#: (``follow``); an opening, or a short question about a name the conversation never said, leaves
#: what it does not name (``shift``); a statement after an answer that asked the user something
#: replies to it (``reply``). Those three weights were fitted on half A of the follow-up dev set
#: (``pcm eval followups --fit A``, on the gold graph, the other weights and ``tau_new`` as they
#: were), and fitting again once a reply went to the question it answers (``routing.reference.
#: answered``) kept them, and so did fitting once more after a statement that leaves a yes/no
#: question unanswered stopped replying to it (``routing.reference``, ``Referent.ignored``): thread
#: accuracy 99.1 % on half A, 96.9 % on half B, which the fit never saw; replayed online (a misrouted
#: input changes what the later ones see) 99.1 % and 96.9 %.
SESSION_DEFAULT = RoutingWeights(
    name="session-default",
    sem=1.0,
    task=0.8,
    recency=0.3,
    focus=0.3,
    conflict=1.0,
    address=0.3,
    reply=0.2,
    author=0.1,
    override=1.0,
    follow=0.7,
    shift=0.6,
    tau_new=0.75,
    delta=0.05,
)

#: Busy multi-party chat streams (IRC, team chat): who talks to whom carries most of the evidence.
#: Coordinate ascent on 5 of the 10 irc-dev streams (address fixed at 1.0 as the scale), features
#: as built by ``app.eval.route.ChatStreamRouter``. On the 5 held-out streams: parent accuracy
#: 66.7 %, thread accuracy 88.8 % (previous message: 24.4 % / 40.1 %).
CHAT_STREAM = RoutingWeights(
    name="chat-stream",
    sem=0.76,
    task=0.0,
    recency=0.4,
    focus=0.05,
    conflict=0.3,
    address=1.0,
    reply=0.4,
    author=0.27,
    override=1.0,
    tau_new=0.6,
    delta=0.05,
)

PRESETS: dict[str, RoutingWeights] = {w.name: w for w in (SESSION_DEFAULT, CHAT_STREAM)}


# --------------------------------------------------------------------------- records


class AnchorCandidate(BaseModel):
    """One node the input might continue, with caller-computed features (names: ``Feature``).

    ``group`` optionally names the branch/thread the node is on: two candidates of one group
    are never ambiguous with each other (continuing either keeps the same branch).
    """

    model_config = ConfigDict(frozen=True)

    node_id: str
    features: dict[str, float] = Field(default_factory=dict)
    group: str | None = None

    @field_validator("features")
    @classmethod
    def _features_in_unit_interval(cls, value: dict[str, float]) -> dict[str, float]:
        for key, x in value.items():
            if not (0.0 <= float(x) <= 1.0) or math.isnan(float(x)):
                raise ValueError(f"feature {key!r}={x} is outside [0, 1]")
        return value


class ScoredCandidate(BaseModel):
    """A candidate after fusion: its weighted contributions per feature and their sum."""

    node_id: str
    components: dict[str, float]
    score: float
    group: str | None = None


class RoutingDecision(BaseModel):
    """What the router decided for one input, with every candidate kept for the trace.

    ``anchor_id`` is the node to continue (None for a new root); when ``ambiguous`` it still holds
    the best guess and ``clarification`` says what to ask. ``margin`` is the best score minus the
    runner-up's (the best candidate of another group; without groups simply top-1 minus top-2),
    or minus ``tau_new`` when there is no runner-up; 0.0 with no candidates.
    """

    anchor_id: str | None
    new_root: bool
    ambiguous: bool
    best_guess: str | None
    margin: float
    candidates: list[ScoredCandidate]
    reason: str
    clarification: str | None = None
    strategy: str = ""


# --------------------------------------------------------------------------- router


class AnchorRouter:
    """Scores candidates with a ``RoutingWeights`` strategy and applies the decision rules."""

    def __init__(self, weights: RoutingWeights = SESSION_DEFAULT) -> None:
        self.weights = weights
        # (feature name, signed weight) in FEATURE_ORDER, zero weights dropped: computed once
        self._terms: tuple[tuple[str, float], ...] = tuple(
            (f.value, -weights.weight(f) if f in NEGATIVE_FEATURES else weights.weight(f))
            for f in FEATURE_ORDER
            if weights.weight(f) != 0.0
        )

    def score(self, candidate: AnchorCandidate) -> ScoredCandidate:
        """Return ``candidate`` with its weighted contributions (zero-weight features omitted)."""
        features = candidate.features
        components: dict[str, float] = {}
        total = 0.0
        for name, signed_weight in self._terms:
            value = features.get(name)
            if value is None:
                continue
            part = signed_weight * float(value)
            components[name] = part
            total += part
        return ScoredCandidate.model_construct(node_id=candidate.node_id, components=components,
                                               score=total, group=candidate.group)

    def route(self, candidates: Iterable[AnchorCandidate]) -> RoutingDecision:
        """Score every candidate and decide: anchor, new root, or ambiguous (best guess kept).

        Raises ``ValueError`` when two candidates share a ``node_id`` (merge them first).
        """
        w = self.weights
        scored = sorted((self.score(c) for c in candidates), key=lambda s: (-s.score, s.node_id))
        ids = [s.node_id for s in scored]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate candidate node_id")
        if not scored:
            return RoutingDecision(anchor_id=None, new_root=True, ambiguous=False, best_guess=None,
                                   margin=0.0, candidates=[], reason="no candidates: new task root",
                                   strategy=w.name)
        best = scored[0]
        rival = next((s for s in scored[1:] if s.group is None or s.group != best.group), None)
        margin = best.score - (rival.score if rival is not None else w.tau_new)
        if best.score < w.tau_new:
            return RoutingDecision(
                anchor_id=None, new_root=True, ambiguous=False, best_guess=best.node_id,
                margin=margin, candidates=scored, strategy=w.name,
                reason=f"best score {best.score:.3f} < tau_new {w.tau_new:.3f}: new task root")
        if rival is not None and margin < w.delta:
            return RoutingDecision(
                anchor_id=best.node_id, new_root=False, ambiguous=True, best_guess=best.node_id,
                margin=margin, candidates=scored, strategy=w.name,
                reason=(f"top two within delta {w.delta:.3f} ({best.score:.3f} vs "
                        f"{rival.score:.3f}): best guess kept, clarification proposed"),
                clarification=(f"Does this continue {best.node_id} or {rival.node_id}, "
                               "or start something new?"))
        return RoutingDecision(
            anchor_id=best.node_id, new_root=False, ambiguous=False, best_guess=best.node_id,
            margin=margin, candidates=scored, strategy=w.name,
            reason=f"best score {best.score:.3f} (margin {margin:.3f}), top: {_top(best)}")


def _top(candidate: ScoredCandidate, n: int = 2) -> str:
    """The ``n`` largest contributions of a candidate, as 'name=value' text for reasons."""
    parts = sorted(candidate.components.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return ", ".join(f"{k}={v:.2f}" for k, v in parts) or "none"


# --------------------------------------------------------------------------- feature helpers


def recency_by_time(age_seconds: float, half_life_seconds: float) -> float:
    """Return 0.5 ** (age / half_life) in (0, 1]; ages below zero count as zero."""
    if half_life_seconds <= 0:
        raise ValueError("half_life_seconds must be positive")
    return float(0.5 ** (max(0.0, age_seconds) / half_life_seconds))


def recency_by_position(distance: int, half_life: float) -> float:
    """Return the decay for a candidate ``distance`` steps back (1 = the previous one → 1.0)."""
    if half_life <= 0:
        raise ValueError("half_life must be positive")
    return float(0.5 ** (max(0, distance - 1) / half_life))


def normalize_name(name: str) -> str:
    """Return ``name`` lower-cased with surrounding punctuation removed ("[[Bob]]_" → "bob")."""
    return name.strip().strip(ROUTING_EDGES).lower()


class Mention(StrEnum):
    """How a text refers to a name; falsy for NONE, so ``if mention(text, name):`` reads right."""

    NONE = "none"
    WORD = "word"  # the name occurs as a word somewhere in the text
    ADDRESS = "address"  # the text opens with the name ("bob: ...", "bob, ...", "@bob ...")

    def __bool__(self) -> bool:
        return self is not Mention.NONE


def _words(text: str | Sequence[str]) -> Sequence[str]:
    """``ROUTING.words(text)`` for a string; an already tokenized sequence is returned as is."""
    return ROUTING.words(text) if isinstance(text, str) else text


def mention(text: str | Sequence[str], name: str, *, min_word_len: int = 3) -> Mention:
    """Return how ``text`` (a string or its ``ROUTING.words``) refers to ``name``.

    Case-insensitive and robust to punctuation ("Bob:", "@bob,", "bob->"). The opening word
    counts as an address whatever its length (≥ 2); elsewhere the name must have at least
    ``min_word_len`` characters, so short nicks like "is" do not match prose.
    """
    target = normalize_name(name)
    if len(target) < 2:
        return Mention.NONE
    words = _words(text)
    if not words:
        return Mention.NONE
    if words[0] == target:
        return Mention.ADDRESS
    if len(target) >= min_word_len and target in words[1:]:
        return Mention.WORD
    return Mention.NONE


def mentioned_names(
    text: str | Sequence[str], names: Iterable[str], *, min_word_len: int = 3
) -> dict[str, Mention]:
    """Return, for each of ``names`` the text (or its ``ROUTING.words``) refers to, how.

    Keys are the names as given; a name both opening the text and repeated counts as ADDRESS.
    """
    by_norm: dict[str, list[str]] = {}
    for name in names:
        norm = normalize_name(name)
        if len(norm) >= 2:
            by_norm.setdefault(norm, []).append(name)
    words = _words(text)
    found: dict[str, Mention] = {}
    for position, word in enumerate(words):
        originals = by_norm.get(word)
        if not originals:
            continue
        if position == 0:
            kind = Mention.ADDRESS
        elif len(word) >= min_word_len:
            kind = Mention.WORD
        else:
            continue
        for original in originals:
            if found.get(original) != Mention.ADDRESS:
                found[original] = kind
    return found


def keyword_overlap(a: str | AbstractSet[str], b: str | AbstractSet[str]) -> float:
    """Return the overlap coefficient |A∩B| / min(|A|,|B|) of two texts' content words
    (``ROUTING.content``), in [0, 1]."""
    wa = ROUTING.content(a) if isinstance(a, str) else a
    wb = ROUTING.content(b) if isinstance(b, str) else b
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


def cosine(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Return the cosine similarity of two vectors in [-1, 1] (0.0 when either is all zeros)."""
    va = np.asarray(a, dtype=np.float64)
    vb = np.asarray(b, dtype=np.float64)
    na = float(np.linalg.norm(va))
    nb = float(np.linalg.norm(vb))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(va @ vb / (na * nb), -1.0, 1.0))


def unit(x: float) -> float:
    """Clip ``x`` into [0, 1] (for turning similarities into features)."""
    return 0.0 if x <= 0.0 or math.isnan(x) else (1.0 if x >= 1.0 else float(x))


def rescale(x: float, low: float, high: float) -> float:
    """Map ``x`` linearly so ``low`` → 0 and ``high`` → 1, clipped to [0, 1]."""
    if high <= low:
        raise ValueError("high must exceed low")
    return unit((x - low) / (high - low))


def conflict(addressed: Iterable[str], speakers: Iterable[str], target_task: str | None = None,
             tasks: Iterable[str] = ()) -> float:
    """The ``conflict`` feature of a candidate: 1.0 when continuing it contradicts what the input
    says, else 0.0. The input opens by addressing someone (``addressed``, normalised names) none
    of whom speaks in the candidate (``speakers``); or it is about one task (``target_task``) and
    the candidate's branch belongs to other tasks only (``tasks``: the tasks on its chain)."""
    named = {normalize_name(a) for a in addressed}
    if named and not named & {normalize_name(s) for s in speakers}:
        return 1.0
    on_branch = set(tasks)
    if target_task is not None and on_branch and target_task not in on_branch:
        return 1.0
    return 0.0


def features_of(values: Mapping[Feature | str, float]) -> dict[str, float]:
    """Return a features dict keyed by plain strings, each value clipped into [0, 1]."""
    return {Feature(k).value: unit(float(v)) for k, v in values.items()}
