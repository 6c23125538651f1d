"""Recall: several channels in parallel, one fused ranking, near-duplicates out, diversity kept.

Channels (each bounded by the plan's recall size):
  vector      LanceDB nearest neighbours of the query embedding
  fulltext    LanceDB BM25 full-text match
  structured  metadata filter in memory: speakers named in the input, kind, time window
  graph       the main chain back from the anchor along ``continues`` with the turns merged into
              it (``merges`` edges from chain nodes), plus the anchor's neighbours
  recent      the most recent messages of the session
  memory      memory notes, and environment events when the input asks about files, feeds or
              API values (vector search restricted to those kinds)
  topic       messages that mention the topics the input names (the topic index)
  time        messages that mention a time inside the plan's date range; and when the input asks
              for a time ("when…"), the candidates that mention one (``app.core.context.timeline``)

The plan bounds what it names: a date range read from the input restricts the structured,
vector and full-text channels (pushed into the index query) or, for long and vague spans, marks
the items inside it; ``candidate_pool`` bounds the distinct candidates taken from the channel
lists (best ranks first, channel by channel); ``timeout_ms`` bounds each channel (one past it is
skipped and recorded); the relevance gate (``app.core.context.gate``) drops weak candidates
before the crop; ``per_channel_cap`` bounds the kept items that only one channel found.

When the input asks (and not about what was asked), a conversation turn that mostly asks itself
loses the strategy's ``asking_discount`` of its fused score (a document's part, a feed item or a
memory never does: a question there heads its answer), after the neighbours' propagation: a question
in the history resembles a question by meaning and words, but the answer is in what was said.
For the same reason, what an item states counts then too (``_Pool.stated``): an item whose best
sentence holds much of the input's weighted words gains the strategy's ``sentence_match`` of that
share, and a turn's score is multiplied by its length (up to ``LENGTH_CAP`` words, relative to
half of it) to the ``length_prior``: a turn that says more is likelier to hold the answer.
Last, the sitting (``TurnView.sitting``: turns without an hour's pause) that holds the best turn
lifts its other turns towards that turn by the strategy's ``sitting_lift`` of its lead over the
next sitting's best (``_Pool.sitting_lifted``): when one sitting clearly holds the answer, the rest
of it is likelier to belong to the answer than a turn of equal score from another day.

The recent window is the anchor's branch: the latest turns of the tree the anchor belongs to
(without an anchor, of the whole session). Turns of other branches enter only through the
gate, on their own merit.

Every candidate keeps its per-channel rank and score, its grade and the reason it was kept or
dropped, so the evidence panel and replay can show exactly why something reached the context.
The neighbours propagation reaches are candidates when they are graded on their support; those
too far below the best to pass (most of them: the neighbours of weak hits) are only counted
(``GateSummary.unlisted``).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import math
from collections.abc import Awaitable, Callable, Collection, Container, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np

from app.core.context import gate, ranking, timeline
from app.core.context.channel_names import CHANNELS, INDEX_CHANNELS
from app.core.context.channels import TopicSearch, item_text, ranking_items, root_of_message
from app.core.context.channels import graph as _graph
from app.core.context.channels import memory_kinds as _memory_kinds
from app.core.context.channels import recent as _recent
from app.core.context.channels import structured as _structured
from app.core.context.channels import topic as _topic
from app.core.context.gate import GatePolicy, GateSummary, Relation
from app.core.context.parts import Embed, Rounds
from app.core.context.ranking import FusionMethod
from app.core.context.recall_model import (
    HYBRID_RRF,
    PCM_FUSION,
    STRATEGIES,
    Candidate,
    ChannelHit,
    ChannelRun,
    RecallRequest,
    RecallResult,
    RecallStrategy,
    SearchPort,
)
from app.core.context.runner import ChannelRunner, EarlyText, RunBlocking
from app.core.intent.decompose import is_question
from app.core.session.state import NoteView, SessionState
from app.core.text.sentences import asked_share
from app.core.text.words import RANKING, content_stems

_T = TypeVar("_T")
_NEIGHBOUR = "neighbour of a hit"
#: An item "asks" when at least this share of its words stand in questions (``asked_share``).
ASKING = 0.5
#: The words of a turn the length prior counts at most: a long paragraph (the 90th percentile of
#: locomo-dev's turns is 47 words) says no more for being longer still; a turn of half as many
#: (its median, 24) keeps its score. Set, not fitted.
LENGTH_CAP = 48
#: Words of an input that asks about questions themselves ("what did I ask about the database?"):
#: there the turns that ask are the evidence, and no discount applies.
_ABOUT_ASKING = frozenset(content_stems("ask asked asking question questions"))


def asks_for_statements(query: str) -> bool:
    """Whether ``query`` is a question whose evidence is what was said, not what was asked."""
    return is_question(query) and not _ABOUT_ASKING & set(content_stems(query))


__all__ = ["CHANNELS", "HYBRID_RRF", "INDEX_CHANNELS", "PCM_FUSION", "STRATEGIES", "Candidate", "ChannelHit",
           "ChannelRun", "RecallRequest", "RecallResult", "RecallStrategy", "SearchPort", "TopicSearch", "fuse",
           "recall", "ranking_items"]


async def recall(
    state: SessionState,
    req: RecallRequest,
    *,
    query_vector: Sequence[float] | None,
    search: SearchPort | None,
    run_blocking: RunBlocking,
    recorded: Mapping[str, ChannelRun] | None = None,
    known_sem: Mapping[str, float] | None = None,
    outside: Callable[[list[str]], Awaitable[list[NoteView]]] | None = None,
    topics: TopicSearch | None = None,
    embed: Embed | None = None,
    early: EarlyText | None = None,
) -> tuple[RecallResult, list[NoteView]]:
    """Run the channels concurrently, fuse, propagate to neighbours, gate, dedup, diversify; then
    the sub-questions' own retrieval and the loop's second round (``app.core.context.parts``).
    ``run_blocking(fn, *args, **kw)`` runs an index query off the event loop (an executor);
    ``recorded`` runs (by ``runner.run_key``) are used as observed; ``known_sem``: query cosines
    the caller has (recent turns), for the gate; ``topics(query, k, session or None)`` is the topic
    channel; ``outside(ids)`` reads other sessions' hits (workspace scope) as notes, fused on a view
    of ``state``, returned; ``embed(text)`` embeds a sub-question or a reformulation; ``early``: the
    input's full-text query, started with the build (``runner.EarlyText``)."""
    sizes = {c: max(0, int(req.channel_sizes.get(c, 0))) for c in CHANNELS}
    scoped = None if req.scope == "workspace" else state.session_id  # the workspace: every session's messages
    runner = ChannelRunner(req, search=search, run_blocking=run_blocking, scoped=scoped, recorded=recorded,
                           early=early)

    async def given() -> Sequence[float] | None:
        return query_vector

    async def memory() -> list[tuple[str, float]]:
        if search is None or query_vector is None:
            return []
        return await _memory_channel(state, req, search, query_vector, sizes["memory"], run_blocking)

    def local(fn: Callable[[], list[tuple[str, float]]]) -> Callable[[], Awaitable[list[tuple[str, float]]]]:
        async def work() -> list[tuple[str, float]]:
            return fn()
        return work

    runs = await asyncio.gather(
        runner.vector(sizes["vector"], given),
        runner.fulltext(sizes["fulltext"]),
        runner.run("structured", sizes["structured"], local(lambda: _structured(state, req, sizes["structured"]))),
        runner.run("graph", sizes["graph"], local(lambda: _graph(state, req, sizes["graph"]))),
        runner.run("recent", sizes["recent"], local(lambda: _recent(state, req, sizes["recent"]))),
        runner.run("memory", sizes["memory"], memory),
        runner.run("topic", sizes["topic"], local(lambda: _topic(state, req, topics, sizes["topic"], scoped))),
        runner.run("time", sizes["time"], local(lambda: timeline.hits(state, req, sizes["time"]))),
    )
    notes = [] if outside is None or req.scope != "workspace" else await outside(  # other sessions' messages
        [i for run in runs for i, _ in run.hits if i not in state.messages and i not in state.notes])
    seen = state.with_notes(notes) if notes else state
    strategy = STRATEGIES.get(req.strategy, PCM_FUSION).tuned(req.tuning)
    rounds = Rounds(seen, req, runner, lambda st, rq, rs: fuse(st, rq, strategy, rs, known_sem=known_sem), embed, sizes)
    return await rounds.recall(list(runs)), notes


async def _memory_channel(state: SessionState, req: RecallRequest, search: SearchPort, query_vector: Sequence[float],
                          size: int, run_blocking: Callable[..., Awaitable[list[tuple[str, float]]]]
                          ) -> list[tuple[str, float]]:
    """The memory channel: memories of every session (the state keeps those it sees, its own and
    the workspace's; twice the size is asked, as the others are skipped) and, when the input asks
    about files, feeds or API values, the session's own env events."""
    kinds = _memory_kinds(state, req)
    if not size or not kinds:
        return []
    changed, recallable = state.derived("recallable memories", lambda: _memory_scan(state))
    # Only memories the state holds are recalled, and of those only the recallable ones: with none
    # (a session whose memories all restate its own turns) the search could only find what is
    # dropped, and would still hold an index thread beside the vector and full-text queries.
    memories = "memory" in kinds and recallable
    if "env" not in kinds and not memories:
        return []
    dated = req.index_range()
    hits = [] if not memories else await run_blocking(
        search.search_vector, query_vector, 2 * size, kinds=["memory"], **dated)
    hits = [(i, s) for i, s in hits if _recallable_memory(state, i, changed)][:size]
    if "env" in kinds:
        hits += await run_blocking(search.search_vector, query_vector, size, session_id=state.session_id,
                                   kinds=["env"], **dated)
    return sorted(hits, key=lambda h: -h[1])[:size]


def _memory_scan(state: SessionState) -> tuple[set[str], bool]:
    """The subjects of the facts whose value changed (a memory of one closed), and whether any
    memory the state holds is recallable (``_recallable_memory``)."""
    changed = {n.key for n in state.notes.values() if n.key and n.valid_to and n.kind == "memory"}
    return changed, any(_recallable_memory(state, n.note_id, changed) for n in state.notes.values()
                        if n.kind == "memory")


def _recallable_memory(state: SessionState, item: str, changed_keys: set[str]) -> bool:
    """A memory note worth recalling: not one that only restates, in other words, messages of this
    very session that recall reaches itself. Other sessions' memories are; so is a fact whose value
    changed (``changed_keys``: subjects with a closed value), as it carries the times."""
    note = state.notes.get(item)
    if note is None or note.kind != "memory":
        return False
    restates = not note.origin and bool(note.source_ids) and all(s in state.messages for s in note.source_ids)
    return not restates or (bool(note.key) and note.key in changed_keys)


class _Pool:
    """The candidates of one fusion, by id in first-seen order, with each channel's scores."""

    def __init__(self, state: SessionState, exclude_ids: Sequence[str]) -> None:
        self.state = state
        self.excluded = set(exclude_ids)
        self.per_channel: dict[str, dict[str, float]] = {}
        self.candidates: dict[str, Candidate] = {}
        self.admitted: set[str] | None = None  # None: every known id
        self.left_out = 0
        self._weights: dict[str, float] | None = None

    def bound(self, runs: Sequence[ChannelRun], pool: int) -> None:
        """Admit at most ``pool`` distinct ids: rank 1 of every channel, then rank 2, and so on."""
        lists = [[i for i, _ in run.hits if self.known(i)] for run in runs if not run.skipped]
        distinct = {i for hits in lists for i in hits}
        if pool <= 0 or len(distinct) <= pool:
            return
        admitted: dict[str, None] = {}
        for rank in range(max(len(h) for h in lists)):
            for hits in lists:
                if rank < len(hits) and len(admitted) < pool:
                    admitted.setdefault(hits[rank], None)
        self.admitted = set(admitted)
        self.left_out = len(distinct) - len(admitted)

    def known(self, item: str) -> bool:
        """A message or note of the session that the request does not exclude (and the pool admits);
        never a revoked memory, nor a profile statement (the profile lines carry those)."""
        if item in self.excluded or (self.admitted is not None and item not in self.admitted):
            return False
        if item in self.state.messages:  # most are (asked of every neighbour propagation meets)
            return True
        note = self.state.notes.get(item)
        return note is not None and not note.removed_at and note.kind != "profile"

    def candidate(self, item: str) -> Candidate:
        if item not in self.candidates:
            kind = "message" if item in self.state.messages else self.state.notes[item].kind
            # validated, not model_construct: pydantic's model_construct inspects the default factory's
            # signature on every call (10x slower; a build makes hundreds)
            self.candidates[item] = Candidate(id=item, kind=kind)
        return self.candidates[item]

    def add_run(self, run: ChannelRun) -> None:
        """A channel's hits (unknown and repeated ids skipped), each noted on its candidate."""
        scores: dict[str, float] = {}
        for rank, (item, score) in enumerate([] if run.skipped else run.hits, start=1):
            if not self.known(item) or item in scores:
                continue
            scores[item] = score
            hit = ChannelHit(rank=rank, score=round(float(score), 6))  # validated is faster than model_construct here
            self.candidate(item).channels[run.channel] = hit
        self.per_channel[run.channel] = scores

    def mark_speakers(self, speakers: Sequence[str]) -> None:
        """The structured filter also marks matching candidates that other channels found."""
        wanted = {s.lower() for s in speakers}
        if not wanted:
            return
        marks = self.per_channel.setdefault("structured", {})
        for item, cand in self.candidates.items():
            view = self.state.messages.get(item) or self.state.notes.get(item)
            if view is not None and view.speaker.lower() in wanted and item not in marks:
                marks[item] = 1.0
                cand.channels["structured"] = ChannelHit(rank=0, score=1.0)

    def fused(self, strategy: RecallStrategy, query: str = "", reach: int = 0) -> dict[str, float]:
        """One score per item by the strategy's fusion, then spread to the hits' neighbours; when
        ``query`` asks, a turn that mostly asks itself (``asks``) loses the strategy's ``asking_discount``."""
        if strategy.fusion == FusionMethod.RRF:
            lists = {c: ranking.ranked(s) for c, s in self.per_channel.items()}
            fused = ranking.rrf(lists, strategy.weights, k=strategy.rrf_k)
        else:
            fused = ranking.relative_fusion(self.per_channel, strategy.weights)
        if strategy.neighbour_alpha > 0:
            neighbours = lambda i: (n for n in self.state.neighbours(i) if self.known(n))  # noqa: E731
            fused = ranking.propagate(fused, neighbours, strategy.neighbour_alpha)
        if asks_for_statements(query):
            if strategy.asking_discount > 0:
                # After propagation: a question that matches the input still lifts the turn that answers it.
                fused = ranking.discounted(fused, lambda i: self.asks(i), strategy.asking_discount)
            if strategy.sentence_match > 0 or strategy.length_prior > 0:
                fused = self.stated(fused, query, strategy, reach)
            if strategy.sitting_lift > 0:
                fused = self.sitting_lifted(fused, strategy.sitting_lift)
        return fused

    def turn_text(self, item: str) -> str:
        """The text of a conversation turn (this session's, or another's read as a note); "" for
        anything else: a document's part, a feed item or a memory."""
        view = self.state.messages.get(item)
        if view is not None:
            return view.text
        note = self.state.notes.get(item)
        return note.text if note is not None and note.kind == "outside" else ""

    def asks(self, item: str) -> bool:
        """Whether the item is a conversation turn that mostly asks (``ASKING`` of its words in
        questions): a turn that asks states nothing. A document's part, a feed item or a memory is
        never one: a question there heads its answer."""
        return asked_share(self.turn_text(item)) >= ASKING

    def query_weights(self, query: str) -> dict[str, float]:
        """The input's content words, each weighted by its rarity among the listed candidates (the
        channels' hits; ``gate.weights``): what the sentence match and the gate weigh words by.
        Computed once per fusion (the candidates are all listed by then)."""
        if self._weights is None:
            self._weights = gate.weights(query, (item_text(self.state, i) for i in self.candidates))
        return self._weights

    def stated(self, fused: Mapping[str, float], query: str, strategy: RecallStrategy, reach: int = 0) -> dict[str, float]:
        """``fused`` with what the items state counted. Each listed item (a channel's hit) gains
        ``sentence_match`` × the share of the input's weighted words (``query_weights``) that its
        best sentence holds: one sentence holding the question's words is about it, where the
        same words spread over a turn or a part may not be. Then each conversation turn's score is
        multiplied by (its words, up to ``LENGTH_CAP``, over half the cap) to the
        ``length_prior``: a short turn ("Cool! Sounds fun.") says little that could answer
        anything. A turn of half the cap keeps its score, so turns as a whole stand where they
        stood against parts, feed items and memories, whose lengths a splitter or a writer set.
        ``reach`` (0: all) bounds the sentence match to the best listed items: as many as
        selection looks at (``_choosable``); those below could pass few of them."""
        out = dict(fused)
        if strategy.sentence_match > 0:
            weights = self.query_weights(query)
            listed = [i for i in self.candidates if i in out]
            if 0 < reach < len(listed):
                listed = heapq.nlargest(reach, listed, key=lambda i: (out[i], i))
            for item in listed:
                out[item] += strategy.sentence_match * gate.sentence_coverage(weights, item_text(self.state, item))
        if strategy.length_prior > 0:
            for item, score in out.items():
                text = self.turn_text(item) if score > 0 else ""
                if text:
                    out[item] = score * (_words(text) / (LENGTH_CAP / 2)) ** strategy.length_prior
        return out

    def sitting_lifted(self, fused: dict[str, float], lift: float) -> dict[str, float]:
        """``fused`` with the other turns of the best turn's sitting raised by ``lift`` × (the
        best score there − the best score of any other sitting), never above that best: the
        sitting's turns rise towards its best turn, and nothing moves against a document's part,
        a feed item or a memory that ranked above it. The lift is the sitting's lead: when the
        best hits are spread over several sittings (a question that gathers, "what has she done
        with her family?") it is small, and with one sitting only there is none."""
        sitting = {item: s for item in fused if (s := self.state.sitting_of(item)) is not None}
        best: dict[int, float] = {}
        for item, s in sitting.items():
            best[s] = max(best.get(s, float("-inf")), fused[item])
        if len(best) < 2:
            return fused
        (top, first), (_, second) = heapq.nlargest(2, best.items(), key=lambda kv: kv[1])
        gain = lift * (first - second)
        if gain <= 0:
            return fused
        below = math.nextafter(first, -math.inf)  # the best turn stays first: a lifted turn ends just under it
        return {item: min(below, score + gain) if sitting.get(item) == top and score < first else score
                for item, score in fused.items()}

    def list_neighbours(self, fused: Mapping[str, float]) -> None:
        """The neighbours propagation reached that are still in ``fused`` become candidates too."""
        for item in fused:
            if item not in self.candidates:
                self.candidate(item).reason = _NEIGHBOUR

    def mark_dates(self, req: RecallRequest) -> None:
        """In "prefer" mode the structured channel marks the candidates inside the date range."""
        if req.date_mode != "prefer":
            return
        marks = self.per_channel.setdefault("structured", {})
        for item, cand in self.candidates.items():
            at = self.state.messages[item].at if item in self.state.messages else self.state.notes[item].at
            if req.in_range(at) and item not in marks:
                marks[item] = 1.0
                cand.channels["structured"] = ChannelHit(rank=0, score=1.0)

    def mark_times(self, req: RecallRequest) -> None:
        """When the input asks for a time, the time channel marks the candidates that mention one."""
        if not req.asks_time:
            return
        marks = self.per_channel.setdefault("time", {})
        for item in timeline.dated(self.state, [i for i in self.candidates if i not in marks]):
            marks[item] = 1.0
            self.candidates[item].channels["time"] = ChannelHit(rank=0, score=1.0)

    def relation(self, item: str, anchor_root: str | None, asked: frozenset[str] = frozenset()) -> Relation:
        """How ``item`` stands to the anchor: linked by the graph (or a fact whose subject the
        input names: every word of its key among ``asked``, the input's content words), in its
        branch's recent window, elsewhere on its branch tree, or other (another branch, a note,
        or no anchor). A note restating turns of this session that all lie on other branch trees
        stands where they stand: another conversation's fact is judged as another branch is."""
        cand = self.candidates.get(item)
        channels = cand.channels if cand is not None else {}
        note = self.state.notes.get(item)
        if "graph" in channels:
            return "linked"
        if note is not None and anchor_root is not None and note.source_ids and all(
                s in self.state.messages and root_of_message(self.state, s) not in (None, anchor_root)
                for s in note.source_ids):
            return "other"
        if note is not None and note.key and set(content_stems(note.key)) <= asked:
            return "linked"
        if anchor_root is None or root_of_message(self.state, item) != anchor_root:
            return "other"
        return "branch" if "recent" in channels else "tree"

    def ruled_out(self, req: RecallRequest, anchor_root: str | None) -> Container[str]:
        """The turns of conversations routing ruled out for the input: another tree than the
        anchor's that is none of the alternatives routing kept (it scored far below, or routing
        did not consider it: a dormant conversation reaches the input through memory)."""
        if not req.routed:
            return frozenset()
        graph = self.state.graph
        kept = {graph.root_of(n) for n, _ in req.alternatives if n in graph} | {anchor_root}
        return _Where(lambda i: i in self.state.messages and root_of_message(self.state, i) not in (None, *kept))

    def continues(self, item: str) -> bool:
        """Whether ``item`` may stand as the conversation being continued (``relation`` "branch"
        or "linked"): a hit of the recent or graph channel, or a note."""
        cand = self.candidates.get(item)
        return item in self.state.notes or (cand is not None and bool({"recent", "graph"} & cand.channels.keys()))

    def gate(self, req: RecallRequest, fused: dict[str, float], known_sem: Mapping[str, float],
             enough: int) -> GateSummary:
        """Grade the fused items best first (module ``gate``) until ``enough`` have passed; drop
        those below the threshold from ``fused``, and those left ungraded."""
        anchor = req.anchor_node if req.anchor_node and req.anchor_node in self.state.graph else None
        # Other branches must be about the input by meaning and words at once while it continues a
        # branch, or when the session holds several conversations (a new one among them); with
        # several, so must the anchor tree's turns beyond its recent window (gate module doc).
        several = self.state.graph.several_conversations()
        policy = GatePolicy(threshold=req.relevance_threshold, strict_other=anchor is not None or several,
                            strict_tree=several)
        texts: _OnDemand[str] = _OnDemand(lambda i: item_text(self.state, i), fused)
        # The input's words weighed over the listed candidates only: the neighbours propagation
        # reached (most of ``fused``) are graded on the words these weights give.
        w = self.query_weights(req.query)
        sem = dict(known_sem)
        for item, cand in self.candidates.items():
            hit = cand.channels.get("vector") or cand.channels.get("memory")
            if hit is not None:
                sem[item] = hit.score
        root = self.state.graph.root_of(anchor) if anchor else None
        asked = frozenset(content_stems(req.query))
        # The full-text channel's own BM25 score relative to its best hit: a second, list-relative
        # lexical estimate (the gate uses it where relative standing is enough).
        bm25 = self.per_channel.get("fulltext", {})
        best = max(bm25.values(), default=0.0)
        lex_rank = {item: score / best for item, score in bm25.items()} if best > 0 else {}
        # Computed for the items graded only (grading stops once enough have passed).
        lex = _OnDemand(lambda i: gate.coverage(w, texts[i]), fused)
        relation: _OnDemand[Relation] = _OnDemand(lambda i: self.relation(i, root, asked), fused)
        # What the conversation being continued does not already say: another branch's turn must add some of it.
        unsaid = gate.unsaid(w, (texts[i] for i in fused if self.continues(i) and relation[i] in ("branch", "linked")))
        judged = {"other", "tree"} if several else {"other"}  # the relations held to the "adds" rule
        adds = _OnDemand(lambda i: relation[i] not in judged or bool(unsaid & RANKING.content(texts[i])), fused)
        grades = gate.grade(fused, sem=sem, lex=lex, lex_rank=lex_rank, relation=relation, policy=policy, adds=adds,
                            ruled_out=self.ruled_out(req, root) if several else frozenset(), enough=enough,
                            shown=_Where(lambda i: i in self.candidates or i in self.state.notes))
        unlisted = graded = 0
        for item in list(fused):
            g = grades.get(item)
            if item not in self.candidates:
                if g is None or g.grade is None:
                    unlisted += 1  # a neighbour of a weak hit, or one not needed: not listed, only counted
                    del fused[item]
                    continue
                self.candidate(item).reason = _NEIGHBOUR
            cand = self.candidate(item)
            if g is None:
                cand.reason = gate.UNGRADED
                del fused[item]
                continue
            graded += 1
            cand.grade, cand.relation = g.grade, g.relation
            if not g.passed:
                cand.reason = gate.reason(g, policy.threshold)
                del fused[item]
        return GateSummary(threshold=policy.threshold, graded=graded, passed=len(fused),
                           insufficient=not fused, unlisted=unlisted)


@functools.lru_cache(maxsize=65_536)
def _words(text: str) -> int:
    """A turn's words for the length prior, up to ``LENGTH_CAP`` (remembered: every build asks it
    of the same turns again)."""
    return max(1, min(len(text.split()), LENGTH_CAP))


class _OnDemand(Mapping[str, _T]):
    """A read-only map over ``keys`` whose values are computed on first reading: the gate reads
    its per-item facts for the items it grades only."""

    def __init__(self, compute: Callable[[str], _T], keys: Collection[str]) -> None:
        self._compute, self._keys, self._memo = compute, keys, dict[str, _T]()

    def __getitem__(self, item: str) -> _T:
        if item not in self._memo:
            if item not in self._keys:
                raise KeyError(item)
            self._memo[item] = self._compute(item)
        return self._memo[item]

    def __contains__(self, item: object) -> bool:
        return item in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class _Where(Container[str]):
    """The ids a predicate holds for (asked item by item)."""

    def __init__(self, test: Callable[[str], bool]) -> None:
        self._test = test

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and self._test(item)


def _capped(order: Sequence[str], candidates: Mapping[str, Candidate], cap: int) -> tuple[list[str], set[str]]:
    """``order`` without the items beyond ``cap`` per channel among those only that channel found."""
    if cap <= 0:
        return list(order), set()
    count: dict[str, int] = {}
    out: list[str] = []
    over: set[str] = set()
    for item in order:
        channels = list(candidates[item].channels) if item in candidates else []
        if len(channels) == 1:
            count[channels[0]] = count.get(channels[0], 0) + 1
            if count[channels[0]] > cap:
                over.add(item)
                continue
        out.append(item)
    return out, over


def _choosable(req: RecallRequest) -> int:
    """How many of the best-ranked items selection looks at: beyond a few times top_k nothing can
    be selected (the crop comes before the quadratic-ish steps, and bounds what the gate grades)."""
    return max(2 * req.top_k, 30)


def _select(state: SessionState, req: RecallRequest, fused: Mapping[str, float],
            candidates: Mapping[str, Candidate]) -> tuple[list[str], dict[str, str]]:
    """The top_k kept after near-duplicates are dropped, the per-channel cap applied and diversity
    kept (MMR), and the items left out with why (near-duplicate of …, over the per-channel cap)."""
    order = [i for i in ranking.ranked(fused) if fused[i] > 0]
    pool = order[: _choosable(req)]
    texts = {i: item_text(state, i) for i in pool}
    sim = ranking.jaccard_matrix([texts[i] for i in pool])
    dupes = ranking.near_duplicates(pool, texts, req.dedup_threshold, sim=sim)
    unique, over = _capped([i for i in pool if i not in dupes], candidates, req.per_channel_cap)
    row = {i: n for n, i in enumerate(pool)}
    keep_rows = [row[i] for i in unique]
    chosen = ranking.mmr(unique, fused, texts, lam=req.mmr_lambda, k=req.top_k,
                         sim=sim[np.ix_(keep_rows, keep_rows)] if keep_rows else None)
    why = {i: f"near-duplicate of {d}" for i, d in dupes.items()}
    why.update({i: f"over the per-channel cap of {req.per_channel_cap} (found only by "
                   f"{next(iter(candidates[i].channels))})" for i in over})
    return chosen, why


def _explain(candidates: Mapping[str, Candidate], fused: Mapping[str, float], chosen: Sequence[str],
             why: Mapping[str, str], top_k: int) -> None:
    """Each candidate's fused score, rank if kept, and why it was kept or dropped (a gate drop
    keeps the reason the gate gave)."""
    position = {item: n for n, item in enumerate(chosen, start=1)}
    for item, cand in candidates.items():
        if item in fused:
            cand.fused = round(fused[item], 6)
        if item in position:
            cand.kept, cand.rank = True, position[item]
            cand.reason = "kept" if cand.reason.startswith(gate.BELOW) else (cand.reason or "kept")
        elif item in why:
            cand.reason = why[item]
        elif cand.reason.startswith(gate.BELOW) or cand.reason == gate.UNGRADED:
            continue
        elif item in fused and fused[item] > 0:
            cand.reason = f"below top {top_k} after diversity"
        else:
            cand.reason = "no weight in this strategy"


def fuse(state: SessionState, req: RecallRequest, strategy: RecallStrategy, runs: list[ChannelRun], *,
         known_sem: Mapping[str, float] | None = None) -> RecallResult:
    """The pure half of recall: channel lists in, one graded, ranked and cropped candidate list out.

    Replay calls this with the recorded channel lists of a turn.
    """
    pool = _Pool(state, req.exclude_ids)
    pool.bound(runs, req.candidate_pool)
    for run in runs:
        pool.add_run(run)
    pool.mark_speakers(req.speakers)
    pool.mark_dates(req)
    pool.mark_times(req)
    fused = pool.fused(strategy, req.query, reach=_choosable(req))
    scores = dict(fused)
    summary = pool.gate(req, fused, known_sem or {}, _choosable(req)) if req.relevance_threshold > 0 else None
    pool.list_neighbours(fused)
    chosen, why = _select(state, req, fused, pool.candidates)
    _explain(pool.candidates, scores, chosen, why, req.top_k)
    ordered = sorted(pool.candidates.values(), key=lambda c: (not c.kept, c.rank, -c.fused, c.id))
    return RecallResult(channels=runs, candidates=ordered, strategy=strategy.name, gate=summary,
                        pool_left_out=pool.left_out)
