"""Memory from natural phrasing: preferences, prohibitions, permissions and facts stated anywhere in
a sentence become memories; questions, conditions, quotes and other people's words do not."""

from __future__ import annotations

import pytest

from app.core.intent.profile import parse_profile_statements
from app.core.memory.extract import extract_memories

AT = "2024-03-01T10:00:00"

#: (what the user typed, the (type, content) memories it must give, in order).
POSITIVE: list[tuple[str, list[tuple[str, str]]]] = [
    ("By the way, I prefer metric units.", [("preference", "metric units")]),
    ("btw I'm vegetarian", [("fact", "the user is vegetarian")]),
    ("please always answer in French", [("preference", "answer in French")]),
    ("Please always answer in French.", [("preference", "answer in French")]),
    ("Thanks! By the way, never use emojis in code comments.", [("prohibition", "use emojis in code comments")]),
    ("Ok so basically I prefer dark mode", [("preference", "dark mode")]),
    ("Just so you know, I prefer tea over coffee", [("preference", "tea over coffee")]),
    ("As I told you, I prefer short answers.", [("preference", "short answers")]),
    ("I prefer metric, and never use emojis.", [("preference", "metric"), ("prohibition", "use emojis")]),
    ("By the way, I prefer metric units, and I'm allergic to peanuts.",
     [("preference", "metric units"), ("fact", "the user is allergic to peanuts")]),
    ("I prefer short answers because I read on my phone", [("preference", "short answers")]),
    ("I'd like answers in bullet points.", [("preference", "answers in bullet points")]),
    ("I would like you to always cite sources.", [("preference", "cite sources")]),
    ("I need you to always double-check units", [("preference", "double-check units")]),
    ("Thanks, and from now on answer in metric units.", [("preference", "answer in metric units")]),
    ("I don't want you to ever touch the prod database.", [("prohibition", "touch the prod database")]),
    ("Note that you may restart the staging server", [("permission", "restart the staging server")]),
    ("Also, feel free to rename variables.", [("permission", "rename variables")]),
    ("Great, thanks; don't ever push to main without asking.", [("prohibition", "push to main without asking")]),
    ("I am a strict vegetarian now", [("fact", "the user is vegetarian")]),
    ("Just so you know I'm lactose intolerant", [("fact", "the user is lactose intolerant")]),
    ("I don't drink alcohol", [("fact", "the user does not drink alcohol")]),
    ("I can't eat gluten, so keep that in mind", [("fact", "the user does not eat gluten")]),
    ("Looks good. I generally prefer British spelling.", [("preference", "British spelling")]),
]

#: What the user typed that states no standing wish or fact of theirs.
NEGATIVE: list[str] = [
    "My friend prefers tea.",
    "My friend said always use tabs.",
    "She always answers in French.",
    "My boss wants me to always use tabs",
    'He told me "never deploy on Fridays".',
    'The docs say "always use tabs" but I disagree',
    "If I preferred tea, what would you suggest?",
    "Suppose I prefer short answers, how would you change?",
    "Imagine I prefer cats.",
    "I wonder whether I prefer tea.",
    "Do you think I prefer tea",
    "Do I prefer tea?",
    "What do I prefer?",
    "Would it be better if I never used tabs?",
    "Should I always use tabs?",
    "Am I diabetic",
    "If I were vegan, what would I eat?",
    "Tom said I'm lactose intolerant.",
    "My sister is allergic to peanuts.",
    "I like it when you are brief.",
    "I don't know.",
    "I don't eat much these days",
    "Why don't you stop?",
    "Tell me why people always say never give up",
    "Hi, how are you?",
    "I need you to build a dashboard for the metrics API",
    "I would like you to summarise this paper.",
]


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(m.type, m.content) for m in extract_memories(text, evidence_id="m1", at=AT)
            if m.type in {"preference", "prohibition", "permission"} or m.content.startswith("the user ")]


@pytest.mark.parametrize("text,expected", POSITIVE)
def test_natural_phrasing_gives_the_memory(text: str, expected: list[tuple[str, str]]) -> None:
    assert _kinds(text) == expected


@pytest.mark.parametrize("text", NEGATIVE)
def test_questions_conditions_quotes_and_other_people_give_nothing(text: str) -> None:
    assert _kinds(text) == []


def test_the_memories_are_workspace_wide_and_the_profile_reads_the_same_statements() -> None:
    found = extract_memories("By the way, I prefer metric units, and I'm vegan.", evidence_id="m1", at=AT)
    assert {m.scope for m in found} == {"workspace"}
    assert [(s.kind, s.text) for s in parse_profile_statements("btw, never use emojis")] == [("prohibition", "use emojis")]
