"""Time expressions of a text resolved against when it was said (app/core/text/times.py)."""

from __future__ import annotations

from datetime import datetime

import pytest

from app.core.text.times import asks_time, mentions, time_mentions


def _days(text: str, said: str) -> list[tuple[str, str, str]]:
    return [(m.expression, m.start.date().isoformat(), m.end.date().isoformat()) for m in time_mentions(text, said)]


@pytest.mark.parametrize("text, said, expected", [
    ("Yesterday, I went to a fair to show off my studio", "2023-04-25T10:00:00", [("yesterday", "2023-04-24", "2023-04-25")]),
    ("My mom and I made some dinner together last night!", "2023-05-04T10:00:00", [("last night", "2023-05-03", "2023-05-04")]),
    ("a quiet weekend after we went camping two weekends ago", "2023-07-17T10:00:00",  # a Monday
     [("two weekends ago", "2023-07-08", "2023-07-10")]),
    ("Last Friday at dance class", "2023-07-23T10:00:00", [("last friday", "2023-07-21", "2023-07-22")]),
    ("we went to the beach last summer", "2023-10-04T10:00:00", [("last summer", "2023-06-01", "2023-09-01")]),
    ("last summer was hot", "2023-07-04T10:00:00", [("last summer", "2022-06-01", "2022-09-01")]),  # this one has not ended
    ("next month we fly, on 7 July, 2023 we land", "2023-05-04T10:00:00",
     [("next month", "2023-06-01", "2023-07-01"), ("7 july, 2023", "2023-07-07", "2023-07-08")]),
    ("see you last weekend", "2023-07-19T10:00:00", [("last weekend", "2023-07-15", "2023-07-17")]),  # not "last week"
    ("I joined a group last Tues. and we met on wed", "2023-07-20T10:00:00",  # a Thursday
     [("last tues.", "2023-07-18", "2023-07-19"), ("on wed", "2023-07-19", "2023-07-20")]),
    ("I sat on the sun deck, nothing else", "2023-07-19T10:00:00", []),
])
def test_every_expression_is_resolved_against_when_it_was_said(text: str, said: str,
                                                               expected: list[tuple[str, str, str]]) -> None:
    assert _days(text, said) == expected


def test_mentions_do_not_overlap_and_an_unknown_moment_reads_nothing() -> None:
    found = mentions("in the past 2 weeks and yesterday", datetime(2024, 3, 20, 15))
    assert [m.expression for m in found] == ["in the past 2 weeks", "yesterday"]
    assert time_mentions("yesterday", "") == () and time_mentions("yesterday", "not a time") == ()


@pytest.mark.parametrize("text, asks", [
    ("When did Maria go to the beach?", True),
    ("How long has Caroline had her current group of friends for?", True),
    ("In what year did John start?", True),
    ("How many weeks passed between Maria adopting Coco and Shadow?", True),
    ("since when do we ship on Fridays?", True),
    ("What did Caroline do when she was young?", False),
    ("What did Ana say about tomatoes and the garden plan?", False),
])
def test_a_question_asking_for_a_time(text: str, asks: bool) -> None:
    assert asks_time(text) is asks
