"""The data of recall: strategies, the request, channel runs and candidates.

Shared by the channels (``app.core.context.channels``), recall and fusion
(``app.core.context.retrieval``), the per-turn record and the evidence panel. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from app.core.context.channel_names import CHANNELS
from app.core.context.gate import GateSummary
from app.core.context.ranking import FusionMethod


class SearchPort(Protocol):
    """The search index (``app.store.index.SearchIndex`` implements it). Blocking."""

    def search_vector(
        self, query: Sequence[float], k: int = 10, *, session_id: str | None = None,
        kinds: Sequence[str] | None = None, since: str | None = None, until: str | None = None,
        trace: list[str] | None = None,
    ) -> list[tuple[str, float]]: ...

    def search_text(
        self, query: str, k: int = 10, *, session_id: str | None = None,
        kinds: Sequence[str] | None = None, since: str | None = None, until: str | None = None,
    ) -> list[tuple[str, float]]: ...


#: The PCM strategy's ``asking_discount``: fitted on two locomo-dev conversations and read on the
#: third, for each of the three (docs/ARCHITECTURE.md, "One build").
ASKING_DISCOUNT = 0.3
#: The PCM strategy's ``sentence_match`` and ``length_prior``, fitted the same way on a grid
#: (``length_prior`` 0–0.2 alone and beside ``sentence_match`` 0.2; ``sentence_match`` 0–0.3 beside
#: ``length_prior`` 0.1): each of the three folds chose 0.2 and 0.1.
SENTENCE_MATCH = 0.2
LENGTH_PRIOR = 0.1
#: The PCM strategy's ``sitting_lift``: the best mean recall at 512 and 1024 tokens on all of
#: locomo-dev over the grid 0–3 (``python -m app.eval.folds … --fit-on 512,1024``); the three folds
#: chose 1, 0.5 and 1.5.
SITTING_LIFT = 0.5


class RecallStrategy(BaseModel):
    """How channel lists become one ranking. Strategies are data; presets below."""

    name: str
    fusion: FusionMethod = FusionMethod.RELATIVE
    weights: dict[str, float]
    neighbour_alpha: float = 0.0  # share of the best neighbour's score a turn inherits
    rrf_k: int = 60
    # When the input asks, the share of its fused score an item loses when it mostly asks itself
    # (``app.core.context.retrieval``: "a turn that asks states nothing").
    asking_discount: float = 0.0
    # When the input asks, what an item states counts beyond its channels' scores
    # (``app.core.context.retrieval``, ``_Pool.stated``): ``sentence_match`` × the share of the
    # input's weighted words its best sentence holds is added to its fused score; a conversation
    # turn's is then multiplied by its length (words up to ``LENGTH_CAP``, over half of it) to the
    # ``length_prior``.
    sentence_match: float = 0.0
    length_prior: float = 0.0
    # When the input asks, the turns of the sitting that holds the best turn (``TurnView.sitting``)
    # gain ``sitting_lift`` × how far that sitting's best stands above the next sitting's best
    # (``_Pool.sitting_lifted``): when one sitting clearly holds the answer, what else was said
    # there is likelier to belong to it than a turn of equal score from another day.
    sitting_lift: float = 0.0

    def tuned(self, settings: Mapping[str, float]) -> RecallStrategy:
        """This strategy with ``settings`` in place of its own: a channel's name sets that
        channel's fusion weight, any other name (``TUNABLE``) the field of that name. An
        evaluation's grid point (``RecallRequest.tuning``); a name neither is a ``ValueError``."""
        if not settings:
            return self
        unknown = sorted(set(settings) - set(TUNABLE))
        if unknown:
            raise ValueError(f"unknown recall weight {', '.join(unknown)} (known: {', '.join(TUNABLE)})")
        weights = {**self.weights, **{k: v for k, v in settings.items() if k in CHANNELS}}
        return self.model_copy(update={**{k: v for k, v in settings.items() if k not in CHANNELS},
                                       "weights": weights})


#: What an evaluation may set on a strategy (``RecallStrategy.tuned``): each channel's fusion
#: weight by the channel's name, and these fields.
TUNABLE = (*CHANNELS, "neighbour_alpha", "asking_discount", "sentence_match", "length_prior", "sitting_lift")


PCM_FUSION = RecallStrategy(
    name="pcm",
    fusion=FusionMethod.RELATIVE,
    weights={"vector": 0.7, "fulltext": 0.3, "structured": 0.25, "graph": 0.1, "recent": 0.05, "memory": 0.5,
             "topic": 0.2, "time": 0.3},
    neighbour_alpha=0.3,
    asking_discount=ASKING_DISCOUNT,
    sentence_match=SENTENCE_MATCH,
    length_prior=LENGTH_PRIOR,
    sitting_lift=SITTING_LIFT,
)
HYBRID_RRF = RecallStrategy(
    name="hybrid_rrf", fusion=FusionMethod.RRF, weights={"vector": 1.0, "fulltext": 1.0}
)
STRATEGIES = {s.name: s for s in (PCM_FUSION, HYBRID_RRF)}


class RecallRequest(BaseModel):
    """What the plan asks recall for (sizes per channel, filters, crop settings)."""

    query: str
    channel_sizes: dict[str, int]
    speakers: list[str] = Field(default_factory=list)
    anchor_node: str | None = None
    chain_turns: int = 6
    top_k: int = 40
    dedup_threshold: float = 0.9
    mmr_lambda: float = 1.0
    exclude_ids: list[str] = Field(default_factory=list)
    strategy: str = PCM_FUSION.name
    kinds: list[str] = Field(default_factory=list)  # plan filter kinds: file | feed | api | memory | task
    now: str = ""
    # The plan's date range: "filter" keeps only items with since <= at < until, "prefer" marks them.
    since: str = ""
    until: str = ""
    date_mode: str = ""  # "" (no range) | "filter" | "prefer"
    candidate_pool: int = 0  # distinct candidates taken from the channel lists (0: no bound)
    per_channel_cap: int = 0  # kept items found by one channel alone, per channel (0: no bound)
    timeout_ms: int = 0  # each channel's time limit (0: none)
    relevance_threshold: float = 0.0  # the gate's threshold (0: every candidate passes)
    sub_questions: list[str] = Field(default_factory=list)
    # What the input asks of time (the plan's ``retrieval.time``): ``asks_time`` marks the dated
    # candidates; ``time_relation`` ("before" | "after") bounds the first sub-question's recall
    # by the time of the last one's event (``app.core.context.parts``).
    asks_time: bool = False
    time_relation: str = ""
    scope: str = "session"  # "workspace": the index channels search every session (the plan's scope)
    # Other branch trees routing gave a share of the input (``session.membership``): (their best
    # node, the share); the graph channel adds their soft members. ``routed``: the shares are
    # routing's own, so among several conversations the others' turns need their tree among these.
    alternatives: list[tuple[str, float]] = Field(default_factory=list)
    routed: bool = False
    # An evaluation's settings of the strategy's weights (``RecallStrategy.tuned``, ``pcm eval
    # recall --tune``): a grid point whose held-out figures ``app.eval.folds`` reads. The app never
    # sets them.
    tuning: dict[str, float] = Field(default_factory=dict)

    def in_range(self, at: str) -> bool:
        """True when ``at`` falls in the date range (always, without one)."""
        return (not self.since or at >= self.since) and (not self.until or at < self.until)

    def index_range(self) -> dict[str, str | None]:
        """The range the index queries are restricted to (only in "filter" mode)."""
        if self.date_mode != "filter":
            return {}
        return {"since": self.since or None, "until": self.until or None}




class ChannelHit(BaseModel):
    rank: int
    score: float


class ChannelRun(BaseModel):
    channel: str
    size: int
    query: str = ""  # what it searched for when not the input (a sub-question, a reformulation)
    round: int = 1  # 2: the retrieval loop's second round
    hits: list[tuple[str, float]] = Field(default_factory=list)
    elapsed_ms: float = 0.0
    error: str = ""
    skipped: bool = False  # past the plan's time limit: its hits are not used
    path: str = ""  # the vector channel: how the index searched ("flat": exact scan, "ann": approximate index)


class Candidate(BaseModel):
    id: str
    kind: str  # message | memory | env
    channels: dict[str, ChannelHit] = Field(default_factory=dict)
    fused: float = 0.0
    rank: int = 0
    kept: bool = False
    reason: str = ""
    grade: float | None = None  # the relevance gate's grade (None: not graded)
    relation: str = ""  # to the anchor: branch | linked | other
    part: int | None = None  # the sub-question (index) it is among the best evidence of: kept first


class PartRecall(BaseModel):
    """One sub-question's own retrieval (``app.core.context.parts``): its best evidence (kept
    before the rest), whether that covers it ("words", "meaning"; "" uncovered), the rounds it took
    (2: the loop ran again for it) and the time a before/after relation bounded it to."""

    question: str
    lead: list[str] = Field(default_factory=list)
    covered: str = ""
    rounds: int = 1
    since: str = ""
    until: str = ""


class RecallResult(BaseModel):
    channels: list[ChannelRun]
    candidates: list[Candidate]  # every candidate seen, best first; ``kept`` marks the selection
    strategy: str
    gate: GateSummary | None = None
    pool_left_out: int = 0  # distinct ids beyond the candidate pool
    parts: list[PartRecall] = Field(default_factory=list)  # the sub-questions' own retrieval
    rounds: int = 1  # 2: the retrieval loop ran a second round (for a part, or the whole question)
    loop: str = ""  # why a second round that was wanted did not run (past the latency budget)

    def kept_ids(self) -> list[str]:
        return [c.id for c in self.candidates if c.kept]
