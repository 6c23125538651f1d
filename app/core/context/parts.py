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
  cosine with an item); an uncovered one
  gets one more round, searching with its restatement (``decompose.restate``: "When did Melanie
  paint a sunrise?" → "Melanie: I paint a sunrise"), without the date range, while the recall's
  time limit allows (half of ``RecallRequest.timeout_ms`` left; none: always; on replay, when the
  record holds its runs: the wall clock never decides a replay). Only a sub-question
  still uncovered after it is noted "uncovered" (``GateSummary.uncovered``), and the evidence is
  "insufficient" only when nothing passed in any round.

Every extra channel run is returned with the text it searched (``ChannelRun.query``, its round):
replay answers the index channels from the record by that key (``runner.run_key``). The runs are
listed by the order the parts started in, then round — not in the order the concurrent searches
finished, which the machine's load decides — so a replay lists them as the record does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from app.core.context import gate, timeline
from app.core.context.channels import item_text
from app.core.context.gate import GatePolicy
from app.core.context.recall_model import Candidate, ChannelRun, PartRecall, RecallRequest, RecallResult
from app.core.context.runner import ChannelRunner
from app.core.intent.decompose import is_question, restate
from app.core.session.state import SessionState
from app.core.text.times import asks_time

#: Embeds a sub-question or a reformulation (None: no embedder).
Embed = Callable[[str], Awaitable[Sequence[float] | None]]
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


class Rounds:
    """The rounds after the first fusion, for one recall (see the module doc)."""

    def __init__(self, state: SessionState, req: RecallRequest, runner: ChannelRunner, fuse: Fuse,
                 embed: Embed | None, sizes: Mapping[str, int]) -> None:
        self.state, self.req, self.runner, self.fuse, self.embed = state, req, runner, fuse, embed
        self.sizes = sizes
        # Each extra search's (part's rank, round, runs, fused result). The parts search concurrently, so
        # they finish in an order the machine's load decides: ``merged`` lists them by the order the
        # parts started in (``ranks``) and round, the same live and on replay.
        self.searched: list[tuple[int, int, list[ChannelRun], RecallResult]] = []
        self.ranks: dict[str, int] = {}
        self.loop = ""

    async def recall(self, runs: list[ChannelRun]) -> RecallResult:
        """The first fusion of ``runs``, with the parts' leads and the loop's round added."""
        result = self.fuse(self.state, self.req, runs)
        questions = list(self.req.sub_questions) if len(self.req.sub_questions) >= 2 else []
        kept = {c.id: item_text(self.state, c.id) for c in result.candidates if c.kept}
        if questions:
            parts = await self.parts(questions, kept)
        else:  # the whole question: one more round only when what was kept does not cover it
            cosines = {i: s for run in runs if run.channel == "vector" for i, s in run.hits}
            parts = [await self.whole(kept, cosines)]
        return self.merged(result, runs, [p for p in parts if p.lead or p.rounds > 1 or questions])

    async def parts(self, questions: list[str], kept: Mapping[str, str]) -> list[PartRecall]:
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

    async def part(self, question: str, share: int, kept: Mapping[str, str], *, since: str = "",
                   until: str = "") -> PartRecall:
        """One sub-question's retrieval on its share of the pool, and its second round if uncovered."""
        rank = self.ranks.setdefault(question, len(self.ranks))  # before the first await: in start order
        req = self.part_request(question, share, since, until)
        found = await self.search(req, question, ranged=True, rank=rank)
        out = PartRecall(question=question, lead=_lead(found.result), since=since, until=until)
        return await self.covered(out, req, found, kept)

    async def whole(self, kept: Mapping[str, str], cosines: Mapping[str, float]) -> PartRecall:
        """The whole question: covered by what was kept, or searched again restated."""
        out = PartRecall(question=self.req.query)
        out.covered = gate.covering(self.req.query, kept, cosines, kept.values(), GatePolicy())
        if out.covered or not self.req.relevance_threshold or not is_question(self.req.query):
            return out  # covered, or no gate to find it uncovered, or nothing asked
        return await self.again(out, self.req.model_copy(update={"sub_questions": []}), 1)

    async def covered(self, out: PartRecall, req: RecallRequest, found: _Found, kept: Mapping[str, str]) -> PartRecall:
        """``out`` with its coverage (by its lead and what was kept), after a second round when uncovered."""
        texts = {**kept, **{i: item_text(self.state, i) for i in out.lead}}
        pool = [item_text(self.state, c.id) for c in found.result.candidates]
        out.covered = gate.covering(out.question, texts, found.cosines(), pool, GatePolicy())
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
        req = req.model_copy(update={"query": text, "since": "", "until": "", "date_mode": ""})
        rank = self.ranks.get(out.question, 0)
        found = await self.search(req, text, ranged=False, round_=2, share=share, rank=rank)
        lead = [i for i in _lead(found.result) if i not in out.lead]
        texts = {i: item_text(self.state, i) for i in [*out.lead, *lead]}
        pool = [item_text(self.state, c.id) for c in found.result.candidates]
        out.lead, out.rounds = [*out.lead, *lead], 2
        out.covered = gate.covering(out.question, texts, found.cosines(), pool, GatePolicy())
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
                     share: int | None = None, rank: int = 0) -> _Found:
        """The vector and full-text channels (and the time channel, with a range) for ``text``, fused."""
        n = share or len(self.req.sub_questions) or 1
        size = {c: max(1, self.sizes.get(c, 0) // n) if self.sizes.get(c, 0) else 0 for c in (*_SEARCHED, "time")}

        async def vector() -> Sequence[float] | None:
            return await self.embed(text) if self.embed is not None else None

        async def timed() -> list[tuple[str, float]]:
            return timeline.hits(self.state, req, size["time"])

        dated = req.index_range() if ranged else {}
        runs = list(await asyncio.gather(self.runner.vector(size["vector"], vector, text, dated),
                                         self.runner.fulltext(size["fulltext"], text, dated)))
        if req.since or req.until:
            runs.append(await self.runner.run("time", size["time"], timed, text))
        for run in runs:
            run.round = round_
        fused = self.fuse(self.state, req, runs)
        self.searched.append((rank, round_, runs, fused))
        return _Found(runs, fused)

    def merged(self, result: RecallResult, runs: list[ChannelRun], parts: list[PartRecall]) -> RecallResult:
        """``result`` with the parts' leads kept and marked, their runs, coverage and rounds."""
        by_id = {c.id: c for c in result.candidates}
        searched = sorted(self.searched, key=lambda s: (s[0], s[1]))
        found = {c.id: c for *_, fused in reversed(searched) for c in fused.candidates}
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
        extra = [run for _, _, made, _ in searched for run in made]
        return result.model_copy(update={
            "channels": [*runs, *extra], "candidates": ordered, "gate": summary, "parts": parts,
            "rounds": 2 if any(p.rounds > 1 for p in parts) else 1, "loop": self.loop})


def _lead(result: RecallResult) -> list[str]:
    """The part's best passing items."""
    return [c.id for c in result.candidates if c.kept][:LEAD]


def _added(by_id: dict[str, Candidate], found: Candidate | None, item: str) -> Candidate:
    cand = found.model_copy() if found is not None else Candidate(id=item, kind="message")
    by_id[item] = cand
    return cand

