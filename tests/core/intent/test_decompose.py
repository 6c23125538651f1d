"""A question joining several facts, split into its parts (app/core/intent/decompose.py)."""

from __future__ import annotations

import pytest

from app.core.intent.decompose import Decomposed, checked_model_parts, decompose
from app.core.intent.engine import IntentEngine


@pytest.mark.parametrize("text, parts, relation", [
    ("What did Caroline do after the adoption meeting?",
     ("What did Caroline do?", "When was the adoption meeting?"), "after"),
    ("Which of her hobbies started before the move?", ("Which of her hobbies started?", "When was the move?"), "before"),
    ("How has John's fitness improved since starting boot camps?",
     ("How has John's fitness improved?", "When was starting boot camps?"), "after"),
    ("What do Jon and Gina both have in common?", ("What do Jon have?", "What do Gina have?"), ""),
    ("Did Jon and Gina both participate in dance competitions?",
     ("Did Jon participate in dance competitions?", "Did Gina participate in dance competitions?"), ""),
    ("How many weeks passed between Maria adopting Coco and Shadow?",
     ("Maria adopting Coco", "Maria adopting Shadow"), ""),
    ("Which database did we pick? And when do we launch?",
     ("Which database did we pick?", "And when do we launch?"), ""),
    # a piece without a content word of its own stays with the part it asks about
    ("Which database did we pick and when, and who writes the migration?",
     ("Which database did we pick and when?", "who writes the migration?"), ""),
    ("When? Which database did we pick? Where do the backups go?",
     ("Which database did we pick?", "Where do the backups go?"), ""),
])
def test_rules_split_a_joined_question(text: str, parts: tuple[str, ...], relation: str) -> None:
    assert decompose(text) == Decomposed(parts, relation)


@pytest.mark.parametrize("text", [
    "What did Ana say about tomatoes and the garden plan?",  # one fact about two things
    "When did Caroline and Melanie go to a pride festival together?",  # one event of both
    "What did John do the week before August 3, 2023?",  # a date is the plan's range, not an event
    "What happened after that?",  # nothing to look up
    "We moved the meeting after the launch.",  # not a question
    "Which database did we pick and when?",  # "when?" alone asks nothing: no part of its own
    "Which database did we pick, and why?",
])
def test_a_single_fact_is_not_split(text: str) -> None:
    assert decompose(text) == Decomposed()


def test_the_intent_carries_the_parts_and_the_time_relation() -> None:
    intent = IntentEngine().infer("What did Caroline do after the adoption meeting?")
    assert intent.sub_questions == ["What did Caroline do?", "When was the adoption meeting?"]
    assert intent.hint("time_relation") == "after"


def test_the_models_split_must_stay_within_the_question() -> None:
    text = "What did we pick for the database and the backups?"
    good = ["What did we pick for the database?", "What did we pick for the backups?"]
    assert checked_model_parts(text, good) == good
    assert checked_model_parts(text, ["What did we pick for the database?"]) == []  # one part
    assert checked_model_parts(text, [text, "What did we pick for the backups?"]) == []  # the whole again
    assert checked_model_parts(text, ["What did we pick for the database?", "What does Postgres cost?"]) == []
    assert checked_model_parts(text, ["What did we pick?", "Did we pick?"]) == []  # too little of the question
