"""Recall's further rounds (app/core/context/parts.py): a part bounded by an event's time, the
loop's second round with the restated question, the round skipped past the time limit, and the
coverage check deciding it: a kept item no vector run measured covers by its stored vector's
meaning, and a turn that only asks the question again covers nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from app.core.context.parts import said
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


def _state(rows: Sequence[tuple[str, str, str]] = ROWS) -> SessionState:
    state = SessionState("s")
    for i, (who, at, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{i}"))
    return state


class WordIndex:
    """A full-text index over the rows: shared lower-case words, ties to the earliest, within
    since/until; asked texts are recorded. ``deaf``: texts it finds nothing for."""

    def __init__(self, deaf: tuple[str, ...] = (), delay: float = 0.0,
                 rows: Sequence[tuple[str, str, str]] = ROWS) -> None:
        self.asked: list[str] = []
        self.deaf, self.delay, self.rows = deaf, delay, rows

    def search_text(self, query: str, k: int, since: str | None = None, until: str | None = None,
                    **_kw: Any) -> list[tuple[str, float]]:
        self.asked.append(query)
        time.sleep(self.delay)
        if query in self.deaf:
            return []
        words = {w.strip("?,.!:").lower() for w in query.split()}
        scored = [(f"m{i}", float(len(words & {w.strip("?,.!:").lower() for w in f"{who}: {text}".split()})))
                  for i, (who, at, text) in enumerate(self.rows) if (since or "") <= at < (until or "9")]
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


DECISION = [("ana", "2024-03-01T10:00:00", "For the order service we decided to go with Postgres."),
            ("ben", "2024-03-02T10:00:00", "Lunch on Friday? The ramen place reopened.")]


class StoredVectors:
    """The index's stored vectors by id; the ids asked are recorded."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors, self.asked = vectors, list[list[str]]()

    async def __call__(self, ids: Sequence[str]) -> dict[str, list[float]]:
        self.asked.append(list(ids))
        return {i: self.vectors[i] for i in ids if i in self.vectors}


def test_a_kept_item_no_vector_run_measured_covers_by_its_stored_vector() -> None:
    # The decision reached the context by full text alone ("we"); it shares no word of the question
    # that counts, and no vector run gave it a cosine: its stored vector does.
    question = "Which database did we pick?"
    req = RecallRequest(query=question, channel_sizes={"fulltext": 5}, top_k=3, relevance_threshold=0.3)
    stored = StoredVectors({"m0": [0.9, 0.3, 0.0], "m1": [0.0, 0.1, 1.0]})
    index = WordIndex(rows=DECISION)
    result, _ = asyncio.run(recall(_state(DECISION), req, query_vector=[1.0, 0.0, 0.0],  # type: ignore[arg-type]
                                   search=index, run_blocking=_blocking, stored=stored))
    assert "m0" in result.kept_ids()
    assert result.rounds == 1 and index.asked == [question]  # covered by meaning: no second round
    cover = [r for r in result.channels if r.channel == "cover"]
    assert len(cover) == 1 and cover[0].hits[0][0] == "m0" and cover[0].hits[0][1] > 0.9
    assert stored.asked == [sorted(result.kept_ids())]  # only the kept items, asked once

    # replay: the recorded cosines answer the check, the stored vectors are not read again
    again = StoredVectors({})
    replayed, _ = asyncio.run(recall(_state(DECISION), req, query_vector=[1.0, 0.0, 0.0],  # type: ignore[arg-type]
                                     search=WordIndex(rows=DECISION), run_blocking=_blocking, stored=again,
                                     recorded=recorded_runs(result.channels)))
    assert again.asked == [] and replayed.rounds == 1 and replayed.kept_ids() == result.kept_ids()


def test_no_stored_vector_is_read_when_the_words_cover() -> None:
    req = RecallRequest(query="Where did the ramen place reopen?", channel_sizes={"fulltext": 5}, top_k=3,
                        relevance_threshold=0.3)
    stored = StoredVectors({"m0": [1.0, 0.0]})
    result, _ = asyncio.run(recall(_state(DECISION), req, query_vector=[1.0, 0.0],  # type: ignore[arg-type]
                                   search=WordIndex(rows=DECISION), run_blocking=_blocking, stored=stored))
    assert result.rounds == 1 and stored.asked == []
    assert not any(r.channel == "cover" for r in result.channels)


def test_a_turn_asking_the_question_again_does_not_cover_it() -> None:
    # Yesterday's "Which database did we pick?" holds every word of today's: it is no answer.
    rows = [("ana", "2024-03-01T10:00:00", "Which database did we pick?"), *DECISION[1:]]
    question = "Which database did we pick?"
    index = WordIndex(rows=rows)
    req = RecallRequest(query=question, channel_sizes={"fulltext": 5}, top_k=3, relevance_threshold=0.3)
    result, _ = asyncio.run(recall(_state(rows), req, query_vector=None, search=index,  # type: ignore[arg-type]
                                   run_blocking=_blocking))
    assert "m0" in result.kept_ids()
    assert result.rounds == 2 and index.asked == [question, "database we pick"]
    assert result.parts[0].covered == ""


def test_what_a_users_turn_says_is_its_statements() -> None:
    state = _state([*DECISION, ("ben", "2024-03-03T10:00:00", "Which database? We picked Postgres, right?"),
                    ("ana", "2024-03-04T10:00:00", "Did we? I thought so. What about MySQL?")])
    assert said(state, "m0") == "ana: For the order service we decided to go with Postgres"
    assert said(state, "m1") == "ben: The ramen place reopened"
    assert said(state, "m2") == ""  # it only asks
    assert said(state, "m3") == "ana: I thought so"
