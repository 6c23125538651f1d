"""Time expressions → the date range recall is restricted to."""

from __future__ import annotations

import pytest

from app.core.plan.timespan import date_range

NOW = "2024-03-20T15:00:00Z"  # a Wednesday


@pytest.mark.parametrize("text, start, end, mode", [
    ("what did we decide yesterday?", "2024-03-19T00:00:00", "2024-03-20T00:00:00", "filter"),
    ("the notes from last week", "2024-03-11T00:00:00", "2024-03-18T00:00:00", "filter"),
    ("what happened 3 days ago", "2024-03-17T00:00:00", "2024-03-18T00:00:00", "filter"),
    ("changes over the past 2 weeks", "2024-03-06T15:00:00", "2024-03-20T15:00:00", "filter"),
    ("on Monday we said", "2024-03-18T00:00:00", "2024-03-19T00:00:00", "filter"),
    ("the plan we made in March", "2024-03-01T00:00:00", "2024-03-20T15:00:01", "prefer"),
    ("what did Anna do in May 2023", "2023-05-01T00:00:00", "2023-06-01T00:00:00", "prefer"),
    ("anything new recently?", "2024-03-13T15:00:00", "2024-03-20T15:00:00", "prefer"),
    # an event's weekend, which a turn may speak of long after: favoured, not restricted to
    ("what event did John volunteer at last weekend?", "2024-03-16T00:00:00", "2024-03-18T00:00:00", "prefer"),
    # calendar dates: one day; said within the last month → filter, earlier → prefer
    ("what did Maria plan on the evening of 7 March, 2024?", "2024-03-07T00:00:00", "2024-03-08T00:00:00", "filter"),
    ("notes of March 7th", "2024-03-07T00:00:00", "2024-03-08T00:00:00", "filter"),
    ("the log of 2024-03-01", "2024-03-01T00:00:00", "2024-03-02T00:00:00", "filter"),
    ("what did John share on 16 June, 2023?", "2023-06-16T00:00:00", "2023-06-17T00:00:00", "prefer"),
    ("the 3rd of December", "2023-12-03T00:00:00", "2023-12-04T00:00:00", "prefer"),  # no year: the latest one
    ("the call on May 2", "2023-05-02T00:00:00", "2023-05-03T00:00:00", "prefer"),
])
def test_expressions_become_ranges(text: str, start: str, end: str, mode: str) -> None:
    found = date_range(text, NOW)
    assert found is not None and (found.start, found.end, found.mode) == (start, end, mode)


def test_no_expression_no_time_or_a_future_span_gives_no_range() -> None:
    assert date_range("what is the capital of France?", NOW) is None
    assert date_range("yesterday", "") is None
    assert date_range("what will we do in December 2024", NOW) is None
    assert date_range("the meeting on 30 February", NOW) is None  # not a date
    assert date_range("we may 2 times try it", NOW) is None  # "may" the verb is lowercase
    assert date_range("4 may be enough", NOW) is None
    assert date_range("İstanbul: we may 2 times try it", NOW) is None  # "İ" lowers to two characters


def test_a_date_that_does_not_exist_lets_a_later_expression_count() -> None:
    found = date_range("not 31 April but yesterday", NOW)
    assert found is not None and found.expression == "yesterday"
