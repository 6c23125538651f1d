"""The time channel: turns found by the times they mention (app/core/context/timeline.py)."""

from __future__ import annotations

import asyncio

from app.core.context.retrieval import RecallRequest, recall
from app.core.context.timeline import dated, hits
from app.core.session.state import SessionState
from app.core.types import Author, AuthorKind, Message, Role


def _state() -> SessionState:
    state = SessionState("s")
    rows = [("Maria", "2023-05-04T10:00:00", "My mom and I made some dinner together last night!"),
            ("John", "2023-05-04T10:01:00", "That sounds lovely, what did you cook?"),
            ("Maria", "2023-05-20T10:00:00", "We cooked a lot last year, a dinner every week."),
            ("Maria", "2023-05-03T21:00:00", "Dinner is ready, everyone come to the table.")]
    for i, (who, at, text) in enumerate(rows):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=text, at=at,
                                  author=Author(kind=AuthorKind.USER, id=who), turn_id=f"t{i}"))
    return state


def test_a_turn_is_found_by_the_day_it_speaks_of() -> None:
    may3 = RecallRequest(query="Who did Maria have dinner with on May 3, 2023?", channel_sizes={},
                         since="2023-05-03T00:00:00", until="2023-05-04T00:00:00", date_mode="prefer")
    # said on 4 May about the night before; "last year" is not about 3 May; m3 was said on 3 May
    # but mentions no time (the date range's own marks find it)
    assert hits(_state(), may3, 10) == [("m0", 1.0)]
    year = may3.model_copy(update={"since": "2022-01-01T00:00:00", "until": "2023-01-01T00:00:00"})
    assert [i for i, _ in hits(_state(), year, 10)] == ["m2"]
    assert hits(_state(), may3.model_copy(update={"since": "", "until": ""}), 10) == []
    assert hits(_state(), may3, 0) == []


def test_a_when_question_marks_the_candidates_that_say_when() -> None:
    state = _state()
    assert dated(state, ["m0", "m1", "m3"]) == ["m0"]

    async def fulltext(_fn, *_a, **_k):  # the index's full-text hits: the question turn first
        return [("m1", 2.0), ("m0", 1.0), ("m3", 0.9)]

    class Search:
        search_text = search_vector = None

    def ranked(asks: bool) -> list[str]:
        req = RecallRequest(query="When did Maria make dinner with her mom?", channel_sizes={"fulltext": 3},
                            asks_time=asks, top_k=3)
        result, _ = asyncio.run(recall(state, req, query_vector=None, search=Search(),  # type: ignore[arg-type]
                                       run_blocking=fulltext))
        return result.kept_ids()

    assert ranked(False)[0] == "m1"
    assert ranked(True)[0] == "m0"  # the turn that says when
