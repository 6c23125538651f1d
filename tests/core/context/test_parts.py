"""Recall's further rounds (app/core/context/parts.py): a part bounded by an event's time, the
loop's second round with the restated question, and the round skipped past the time limit."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app.core.context.recall_model import RecallRequest
from app.core.context.retrieval import recall
from app.core.context.runner import recorded_runs
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role

ROWS = [("Caroline", "2023-04-20T10:00:00", "I painted a lake by the old mill."),
        ("Caroline", "2023-05-01T10:00:00", "The adoption meeting is today, wish me luck!"),
        ("Caroline", "2023-05-10T10:00:00", "I signed up for a pottery class downtown."),
        ("Melanie", "2023-05-11T10:00:00", "Which colours do you like best?"),
        ("Melanie", "2023-05-12T10:00:00", "I paint a sunrise over the lake every Sunday.")]


def _state() -> SessionState:
    state = SessionState("s")
    for i, (who, at, text) in enumerate(ROWS):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{i}"))
    return state


class WordIndex:
    """A full-text index over the rows: shared lower-case words, ties to the earliest, within
    since/until; asked texts are recorded. ``deaf``: texts it finds nothing for."""

    def __init__(self, deaf: tuple[str, ...] = (), delay: float = 0.0) -> None:
        self.asked: list[str] = []
        self.deaf, self.delay = deaf, delay

    def search_text(self, query: str, k: int, since: str | None = None, until: str | None = None,
                    **_kw: Any) -> list[tuple[str, float]]:
        self.asked.append(query)
        time.sleep(self.delay)
        if query in self.deaf:
            return []
        words = {w.strip("?,.!:").lower() for w in query.split()}
        scored = [(f"m{i}", float(len(words & {w.strip("?,.!:").lower() for w in f"{who}: {text}".split()})))
                  for i, (who, at, text) in enumerate(ROWS) if (since or "") <= at < (until or "9")]
        return sorted([h for h in scored if h[1] > 0], key=lambda h: -h[1])[:k]

    def search_vector(self, *_a: Any, **_k: Any) -> list[tuple[str, float]]:
        return []


async def _blocking(fn, *args, **kw):  # type: ignore[no-untyped-def]
    return fn(*args, **kw)


def test_a_part_after_an_event_is_asked_about_the_time_after_it() -> None:
    req = RecallRequest(query="What did Caroline do after the adoption meeting?", channel_sizes={"fulltext": 5},
                        top_k=3, sub_questions=["What did Caroline do?", "When was the adoption meeting?"],
                        time_relation="after", speakers=["Caroline"])
    result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=WordIndex(),  # type: ignore[arg-type]
                                   run_blocking=_blocking))
    first, event = result.parts
    assert event.lead[0] == "m1"  # the meeting's turn
    assert first.since == "2023-05-02T00:00:00" and not first.until  # after its day ("today" on 1 May)
    assert first.lead[0] == "m2"  # what Caroline did after it, not the lake painted before
    lead = {c.id: c.part for c in result.candidates if c.part is not None}
    assert lead["m2"] == 0 and lead["m1"] == 1
    # each part's own runs are recorded with the text they searched: replay finds them by it
    assert {"fulltext|What did Caroline do?", "fulltext|When was the adoption meeting?"} <= set(
        recorded_runs(result.channels))


def test_an_uncovered_question_searches_again_restated() -> None:
    question = "When did Melanie paint a sunrise?"
    index = WordIndex(deaf=(question,))
    req = RecallRequest(query=question, channel_sizes={"fulltext": 5}, top_k=3, relevance_threshold=0.3,
                        speakers=["Melanie"])
    result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=index,  # type: ignore[arg-type]
                                   run_blocking=_blocking))
    assert index.asked == [question, "Melanie: I paint a sunrise"]
    assert result.rounds == 2 and result.parts[0].covered == "words"
    assert result.parts[0].lead[0] == "m4" and "m4" in result.kept_ids()
    assert [r.round for r in result.channels if r.channel == "fulltext"] == [1, 2]
    assert result.gate is not None and not result.gate.insufficient

    # replay: the recorded runs answer both rounds, the index is not asked again
    again = WordIndex()
    replayed, _ = asyncio.run(recall(_state(), req, query_vector=None, search=again,  # type: ignore[arg-type]
                                     run_blocking=_blocking, recorded=recorded_runs(result.channels)))
    assert again.asked == [] and replayed.kept_ids() == result.kept_ids()


def test_no_second_round_past_half_the_time_limit() -> None:
    question = "When did Melanie paint a sunrise?"
    index = WordIndex(deaf=(question,), delay=0.05)
    req = RecallRequest(query=question, channel_sizes={"fulltext": 5}, top_k=3, relevance_threshold=0.3,
                        speakers=["Melanie"], timeout_ms=80)
    result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=index,  # type: ignore[arg-type]
                                   run_blocking=_blocking))
    assert index.asked == [question] and result.rounds == 1
    assert result.loop.startswith("no second round")
    # replay follows the record, not the clock: no limit now, and still no second round
    again = WordIndex()
    replayed, _ = asyncio.run(recall(_state(), req.model_copy(update={"timeout_ms": 0}), query_vector=None,
                                     search=again, run_blocking=_blocking,  # type: ignore[arg-type]
                                     recorded=recorded_runs(result.channels)))
    assert again.asked == [] and replayed.rounds == 1 and replayed.kept_ids() == result.kept_ids()


def test_the_parts_runs_are_listed_in_the_parts_order_whichever_finishes_first() -> None:
    # The parts search at once: the first part's full-text search is the slow one here. The record
    # (and a replay, compared with it run by run) must not depend on which finished first.
    questions = ["What did Caroline paint?", "Which class did Caroline sign up for?"]

    async def first_is_slow(fn, *args, **kw):  # type: ignore[no-untyped-def]
        if args and args[0] == questions[0]:
            await asyncio.sleep(0.05)
        return fn(*args, **kw)

    req = RecallRequest(query="What did Caroline paint and which class did she sign up for?",
                        channel_sizes={"fulltext": 5}, top_k=3, sub_questions=questions, speakers=["Caroline"])
    result, _ = asyncio.run(recall(_state(), req, query_vector=None, search=WordIndex(),  # type: ignore[arg-type]
                                   run_blocking=first_is_slow))
    assert [r.query for r in result.channels if r.channel == "fulltext" and r.query in questions] == questions
    replayed, _ = asyncio.run(recall(_state(), req, query_vector=None, search=WordIndex(),  # type: ignore[arg-type]
                                     run_blocking=_blocking, recorded=recorded_runs(result.channels)))
    def runs(res):  # type: ignore[no-untyped-def]
        return [(r.channel, r.query, r.round, r.hits) for r in res.channels]

    assert runs(replayed) == runs(result)
