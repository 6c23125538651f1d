"""Recall's further rounds: each sub-question's own retrieval, and the loop's second round (seed 001 §2.3).

After the first fusion (``app.core.context.retrieval``), ``Rounds``:

- retrieves for every sub-question of a question that joins several facts (``RecallRequest.sub_questions``,
  from ``app.core.intent.decompose``) on its own share of the candidate pool: the vector and
  full-text channels search the part's text with the channel sizes divided among the parts, fused
  and gated for the part alone. Its best ``LEAD`` passing items are the part's lead: kept (added
  to the candidates when the first fusion had dropped them) and marked with the part's index, so
  the compiler packs the best evidence of every part before filling the rest. A part after or
  before an event ("What did Caroline do after the adoption meeting?", ``time_relation``) is asked
  about the time after (before) the time of the event part's lead: its channels keep to it;
- checks whether each part (the whole question when it has none: an input that asks, with the
  gate on) is covered by the kept items (``gate.covering``: by words, or by meaning — the part's
  cosine with an item). What a user's turn asks is no evidence of its answer: a kept turn of the
  user covers by the statements it holds only (``said``), and one that only asks covers nothing
  (the same question asked yesterday does not cover today's). The cosines are the part's own
  vector run's (and the input's channels', for the whole question); when the words fail and a kept
  item has none (a memory note, a turn another channel found), its stored vector is compared with
  the part's embedding (``Cover``; one "cover" run per check, recorded as an index channel is and
  fed back on replay). An uncovered one
  gets one more round, searching with its restatement (``decompose.restate``: "When did Melanie
  paint a sunrise?" → "Melanie: I paint a sunrise"), without the date range, while the recall's
  time limit allows (half of ``RecallRequest.timeout_ms`` left; none: always; on replay, when the
  record holds its runs: the wall clock never decides a replay). Only a sub-question
  still uncovered after it is noted "uncovered" (``GateSummary.uncovered``), and the evidence is
  "insufficient" only when nothing passed in any round.

Every extra channel run is returned with the text it searched (``ChannelRun.query``, its round):
replay answers the index channels from the record by that key (``runner.run_key``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.core.context import gate, timeline
from app.core.context.channels import item_text
from app.core.context.gate import GatePolicy
from app.core.context.ranking import query_cosines
from app.core.context.recall_model import Candidate, ChannelRun, PartRecall, RecallRequest, RecallResult
from app.core.context.runner import ChannelRunner
from app.core.intent.decompose import is_question, restate
from app.core.session.state import SessionState
from app.core.text.sentences import statements
from app.core.text.times import asks_time
from app.core.types import Role

#: Embeds a sub-question or a reformulation (None: no embedder).
Embed = Callable[[str], Awaitable[Sequence[float] | None]]
#: The stored vectors of items by id (those the index holds).
Stored = Callable[[Sequence[str]], Awaitable[Mapping[str, Sequence[float] | np.ndarray]]]
#: The pure fusion of ``app.core.context.retrieval`` for a request and its channel runs.
Fuse = Callable[[SessionState, RecallRequest, list[ChannelRun]], RecallResult]
#: The items of a part kept before the rest (its lead).
LEAD = 2
#: A second round runs while at least this share of the recall's time limit is left.
LOOP_LEFT = 0.5
_SEARCHED = ("vector", "fulltext")


class _Found:
    """One round's retrieval for one text: its channel runs and fused result."""

    def __init__(self, runs: list[ChannelRun], result: RecallResult) -> None:
        self.runs, self.result = runs, result

    def cosines(self) -> dict[str, float]:
        return {i: s for run in self.runs if run.channel == "vector" for i, s in run.hits}


@dataclass
class Cover:
    """The coverage check of one recall (``gate.covering`` over what the kept items say): the
    input's text and embedding (``given``), the embedder for the other texts a check measures by,
    and the stored vectors of the items no channel gave a cosine for."""

    state: SessionState
    runner: ChannelRunner
    text: str
    given: Sequence[float] | None
    embed: Embed | None = None
    stored: Stored | None = None
    runs: list[ChannelRun] = field(default_factory=list)  # the "cover" runs made (recorded with the channels)
    _vectors: dict[str, Sequence[float] | None] = field(default_factory=dict, init=False, repr=False)

    async def vector(self, text: str) -> Sequence[float] | None:
        """The embedding of ``text`` (the input's as given; the others embedded once)."""
        if text == self.text:
            return self.given
        if text not in self._vectors:
            self._vectors[text] = await self.embed(text) if self.embed is not None else None
        return self._vectors[text]

    async def check(self, question: str, items: Iterable[str], cosines: Mapping[str, float], pool: Iterable[str],
                    *, by: str, round_: int) -> str:
        """How ``items`` cover ``question`` ("words", "meaning", ""): by what each says (``said``),
        by ``cosines``, and, when the words fail, by the cosines of ``by``'s embedding with the
        stored vectors of the items ``cosines`` lacks (a "cover" run; the text it measured by is
        its query, "" for the input, so replay finds it)."""
        texts = {i: t for i in dict.fromkeys(items) if (t := said(self.state, i))}
        pool = list(pool)
        how = gate.covering(question, texts, cosines, pool, GatePolicy())
        missing, stored = sorted(i for i in texts if i not in cosines), self.stored
        if how or not missing or stored is None:
            return how

        async def work() -> list[tuple[str, float]]:
            qv = await self.vector(by)
            found = query_cosines(qv, await stored(missing)) if qv is not None else {}
            return sorted(found.items(), key=lambda h: (-h[1], h[0]))

        run = await self.runner.run("cover", len(missing), work, "" if by == self.text else by)
        run.round = round_
        self.runs.append(run)
        return gate.covering(question, texts, {**cosines, **({} if run.skipped else dict(run.hits))}, pool, GatePolicy())


def said(state: SessionState, item: str) -> str:
    """What ``item`` holds as evidence: its text, but of a user's turn only its statements — what
    it asks is no evidence of the answer ("" when it only asks)."""
    view = state.messages.get(item)
    if view is None or view.role != Role.USER:
        return item_text(state, item)
    told = " ".join(statements(view.text))
    return replace(view, text=told).render() if told else ""


class Rounds:
    """The rounds after the first fusion, for one recall (see the module doc)."""

    def __init__(self, state: SessionState, req: RecallRequest, runner: ChannelRunner, fuse: Fuse, cover: Cover,
                 sizes: Mapping[str, int]) -> None:
        self.state, self.req, self.runner, self.fuse, self.cover = state, req, runner, fuse, cover
        self.sizes = sizes
        self.extra: list[ChannelRun] = []
        self.found: list[RecallResult] = []  # the extra rounds' fused results
        self.loop = ""

    async def recall(self, runs: list[ChannelRun], known: Mapping[str, float]) -> RecallResult:
        """The first fusion of ``runs``, with the parts' leads and the loop's round added; ``known``:
        the input's cosines with items the caller has (recent turns)."""
        result = self.fuse(self.state, self.req, runs)
        questions = list(self.req.sub_questions) if len(self.req.sub_questions) >= 2 else []
        kept = [c.id for c in result.candidates if c.kept]
        if questions:
            parts = await self.parts(questions, kept)
        else:  # the whole question: one more round only when what was kept does not cover it
            cosines = {**known, **{i: s for run in runs if run.channel in ("vector", "memory") for i, s in run.hits}}
            parts = [await self.whole(kept, cosines)]
        return self.merged(result, runs, [p for p in parts if p.lead or p.rounds > 1 or questions])

    async def parts(self, questions: list[str], kept: Sequence[str]) -> list[PartRecall]:
        """Each sub-question's own retrieval; the event part first when the first part is asked
        before or after its time."""
        share = len(questions)
        if self.req.time_relation and len(questions) >= 2:
            event = await self.part(questions[-1], share, kept)
            since, until = self.bounds(event)
            first = await self.part(questions[0], share, kept, since=since, until=until)
            middle = await asyncio.gather(*(self.part(q, share, kept) for q in questions[1:-1]))
            return [first, *middle, event]
        return list(await asyncio.gather(*(self.part(q, share, kept) for q in questions)))

    def bounds(self, event: PartRecall) -> tuple[str, str]:
        """The time before or after the event part's lead (its first item's time)."""
        span = next((s for s in (timeline.span_of(self.state, i) for i in event.lead) if s is not None), None)
        if span is None:
            return "", ""
        iso = lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
        return (iso(span[1]), "") if self.req.time_relation == "after" else ("", iso(span[0]))

    async def part(self, question: str, share: int, kept: Sequence[str], *, since: str = "",
                   until: str = "") -> PartRecall:
        """One sub-question's retrieval on its share of the pool, and its second round if uncovered."""
        req = self.part_request(question, share, since, until)
        found = await self.search(req, question, ranged=True)
        out = PartRecall(question=question, lead=_lead(found.result), since=since, until=until)
        return await self.covered(out, req, found, kept)

    async def whole(self, kept: Sequence[str], cosines: Mapping[str, float]) -> PartRecall:
        """The whole question: covered by what was kept, or searched again restated."""
        out = PartRecall(question=self.req.query)
        pool = [item_text(self.state, i) for i in kept]
        out.covered = await self.cover.check(self.req.query, kept, cosines, pool, by=self.req.query, round_=1)
        if out.covered or not self.req.relevance_threshold or not is_question(self.req.query):
            return out  # covered, or no gate to find it uncovered, or nothing asked
        return await self.again(out, self.req.model_copy(update={"sub_questions": []}), 1)

    async def covered(self, out: PartRecall, req: RecallRequest, found: _Found, kept: Sequence[str]) -> PartRecall:
        """``out`` with its coverage (by its lead and what was kept), after a second round when uncovered."""
        pool = [item_text(self.state, c.id) for c in found.result.candidates]
        out.covered = await self.cover.check(out.question, [*kept, *out.lead], found.cosines(), pool,
                                             by=out.question, round_=1)
        return out if out.covered else await self.again(out, req, len(self.req.sub_questions))

    async def again(self, out: PartRecall, req: RecallRequest, share: int) -> PartRecall:
        """The loop's second round for ``out``: its restatement searched without the date range."""
        text = restate(out.question, self.req.speakers)
        limit = self.req.timeout_ms
        if self.runner.recorded:  # replay: the round ran live exactly when its runs were recorded
            if not any(self.runner.has(c, text) for c in _SEARCHED):
                self.loop = "no second round (as recorded)"
                return out
        elif limit > 0 and self.runner.elapsed_ms() > limit * (1 - LOOP_LEFT):
            self.loop = f"no second round: {self.runner.elapsed_ms():.0f} ms of the {limit} ms limit spent"
            return out
        req = req.model_copy(update={"query": text, "since": "", "until": "", "date_mode": "", "uncovered": True})
        found = await self.search(req, text, ranged=False, round_=2, share=share)
        lead = [i for i in _lead(found.result) if i not in out.lead]
        pool = [item_text(self.state, c.id) for c in found.result.candidates]
        out.lead, out.rounds = [*out.lead, *lead], 2
        out.covered = await self.cover.check(out.question, out.lead, found.cosines(), pool, by=text, round_=2)
        return out

    def part_request(self, question: str, share: int, since: str, until: str) -> RecallRequest:
        """The request of one part: its text, its share of the pool, its own time."""
        req = self.req
        update: dict[str, object] = {
            "query": question, "sub_questions": [], "top_k": max(LEAD, req.top_k // share),
            "candidate_pool": max(1, req.candidate_pool // share), "asks_time": req.asks_time or asks_time(question),
            "time_relation": ""}
        if since or until:
            update.update(since=since, until=until, date_mode="filter")
        return req.model_copy(update=update)

    async def search(self, req: RecallRequest, text: str, *, ranged: bool, round_: int = 1,
                     share: int | None = None) -> _Found:
        """The vector and full-text channels (and the time channel, with a range) for ``text``, fused."""
        n = share or len(self.req.sub_questions) or 1
        size = {c: max(1, self.sizes.get(c, 0) // n) if self.sizes.get(c, 0) else 0 for c in (*_SEARCHED, "time")}

        async def vector() -> Sequence[float] | None:
            return await self.cover.vector(text)

        async def timed() -> list[tuple[str, float]]:
            return timeline.hits(self.state, req, size["time"])

        dated = req.index_range() if ranged else {}
        runs = list(await asyncio.gather(self.runner.vector(size["vector"], vector, text, dated),
                                         self.runner.fulltext(size["fulltext"], text, dated)))
        if req.since or req.until:
            runs.append(await self.runner.run("time", size["time"], timed, text))
        for run in runs:
            run.round = round_
        self.extra.extend(runs)
        self.found.append(self.fuse(self.state, req, runs))
        return _Found(runs, self.found[-1])

    def merged(self, result: RecallResult, runs: list[ChannelRun], parts: list[PartRecall]) -> RecallResult:
        """``result`` with the parts' leads kept and marked, their runs, coverage and rounds."""
        by_id = {c.id: c for c in result.candidates}
        found = {c.id: c for extra in reversed(self.found) for c in extra.candidates}
        rank = max((c.rank for c in result.candidates if c.kept), default=0)
        for n, part in enumerate(parts):
            for item in part.lead:
                cand = by_id.get(item) or _added(by_id, found.get(item), item)
                if cand.part is None:
                    cand.part = n
                if not cand.kept:
                    rank += 1
                    cand.kept, cand.rank, cand.reason = True, rank, f"kept: best evidence of \"{part.question}\""
        ordered = sorted(by_id.values(), key=lambda c: (not c.kept, c.rank, -c.fused, c.id))
        summary = result.gate
        if summary is not None:
            several = len(parts) >= 2
            summary = summary.model_copy(update={
                "uncovered": [p.question for p in parts if several and not p.covered],
                "insufficient": summary.insufficient and not any(p.lead for p in parts)})
        return result.model_copy(update={
            "channels": [*runs, *self.extra, *self.cover.runs], "candidates": ordered, "gate": summary, "parts": parts,
            "rounds": 2 if any(p.rounds > 1 for p in parts) else 1, "loop": self.loop})


def _lead(result: RecallResult) -> list[str]:
    """The part's best passing items."""
    return [c.id for c in result.candidates if c.kept][:LEAD]


def _added(by_id: dict[str, Candidate], found: Candidate | None, item: str) -> Candidate:
    cand = found.model_copy() if found is not None else Candidate(id=item, kind="message")
    by_id[item] = cand
    return cand

