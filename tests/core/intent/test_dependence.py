"""``read_dependence``: how much an input leans on what came before, and whether it opens a topic."""

from __future__ import annotations

import pytest

from app.core.intent.cues import analyse_text
from app.core.intent.dependence import read_dependence

#: Inputs that cannot be read alone: each continues the turn before it.
DEPENDENT = [
    "And how long does the train take?",
    "make it shorter",
    "What about Osaka?",
    "Thanks! Did you make it yourself?",
    "In metric?",
    "The second one.",
    "Is it safe to drink the water there?",
    "Could you make it more formal?",
    "Can you explain that again?",
    "Also add a line about the deposit.",
    "but cheaper",
    "How about the weekend instead?",
    "Why is that?",
    "wow, that sounds amazing",
    "Do they take cards?",
    "Which neighbourhood should we stay in?",
]

#: Inputs that stand alone: a whole question or request with words of its own.
STANDALONE = [
    "Write an email to my landlord about the broken heating in the flat.",
    "Why does my Python script raise KeyError when reading the config dictionary?",
    "How does the garbage collector work in Python?",
    "What are good vegetarian restaurants in Lisbon?",
    "I think that the quarterly budget spreadsheet has a wrong formula in column F.",
    "Summarise the main arguments of the attached paper on protein folding.",
    "Plan a three-day hiking trip in the Scottish Highlands for late September.",
    "Explain how a Kalman filter estimates position from noisy GPS readings.",
    "What is the capital of Peru?",  # short, but it names its own subject
    "Which programming language is best for beginners?",
    "What's a good name for a cat?",  # "what's" is no word of its own; "a cat" brings its subject
    "what changed in plan.md?",  # a file name is a subject of its own; "what changed" selects nothing
    "Small talk: the lamp in room 3 is blue.",
]


@pytest.mark.parametrize("text", DEPENDENT)
def test_a_dependent_input_scores_high(text: str) -> None:
    assert read_dependence(text).score >= 0.5, read_dependence(text)


@pytest.mark.parametrize("text", STANDALONE)
def test_a_standalone_input_scores_low(text: str) -> None:
    assert read_dependence(text).score <= 0.2, read_dependence(text)


def test_every_dependent_input_outscores_every_standalone_one() -> None:
    assert min(read_dependence(t).score for t in DEPENDENT) > max(read_dependence(t).score for t in STANDALONE)


@pytest.mark.parametrize("text,shift", [
    ("By the way, what is the capital of Peru?", 0.8),
    ("btw, unrelated: how do I reset my router?", 0.8),
    ("New question: what is a monad?", 0.8),
    ("Hi! How are you doing?", 0.6),
    ("Hello, long time no see", 0.6),
    ("And how long does the train take?", 0.0),
    ("Hi, thanks for the help earlier", 0.0),  # a greeting leading into thanks opens nothing
])
def test_topic_shift(text: str, shift: float) -> None:
    assert read_dependence(text).topic_shift == shift


def test_a_long_input_is_damped_even_with_a_pronoun() -> None:
    long = ("It would help to compare the rail pass prices for Tokyo, Kyoto, Osaka, Hiroshima and Nara "
            "against single tickets, including the shinkansen reservation fees and the airport transfer.")
    assert read_dependence(long).score < read_dependence("Is it cheaper?").score
    assert read_dependence(long).score <= 0.3


def test_the_reading_is_deterministic_and_in_the_unit_interval() -> None:
    for text in DEPENDENT + STANDALONE + ["", "   ", "?", "ok"]:
        first, again = read_dependence(text), read_dependence(text)
        assert first == again
        assert 0.0 <= first.score <= 1.0 and 0.0 <= first.topic_shift <= 1.0


def test_the_cues_carry_it_to_the_intent() -> None:
    cues = analyse_text("And how long does the train take?")
    assert cues.dependence == read_dependence("And how long does the train take?").score > 0.5
    assert analyse_text("By the way, what is the capital of Peru?").topic_shift == 0.8


@pytest.mark.parametrize("text,responds,states", [
    ("Thanks! It was great.", True, True),
    ("Wow, that sounds amazing", True, True),
    ("I just started going to boot camps. How about you?", False, True),
    ("Gonna continue my studies", False, True),
    ("What is it?", False, False),
    ("Is it far from the station?", False, False),
    ("The train, then?", False, False),
])
def test_response_tokens_and_statements(text: str, responds: bool, states: bool) -> None:
    from app.core.intent import dependence

    assert dependence.responds(text) is responds
    assert dependence.states(text) is states


def test_an_answer_asks_when_its_last_sentence_is_a_question() -> None:
    from app.core.intent.dependence import asks

    assert asks("That's cool. What now?") and asks('He said "why?"')
    assert not asks("Is it? No, it is 450 km.") and not asks("Noted.")


#: (the question an answer ended with, the user's next input, whether the input takes it up).
UPTAKE = [
    # an open question takes any statement for an answer
    ("What have you been up to lately?", "I started a pottery class last week.", True),
    ("How did the interview go?", "My cousin is visiting from Lisbon next month.", True),
    # a yes/no question waits for a position on it
    ("Have you tried it yet?", "Not yet, but it is on my list.", True),
    ("Have you tried it yet?", "Yes, twice.", True),
    ("Have you tried it yet?", "I haven't had the time.", True),  # its auxiliary echoed
    ("Have you tried it yet?", "I've been meaning to.", True),
    ("Was the hotel close to the station?", "It was a five-minute walk.", True),
    ("Should I mention the deposit too?", "I think the deposit can wait.", True),  # its words repeated
    ("So, do you want the rail pass?", "Definitely, for both ways.", True),
    # … and a statement with news of its own answers none of that
    ("Have you tried it yet?", "My sister got engaged in Porto last weekend!", False),
    ("Do you want me to draft a reply?", "You won't believe what the plumber told me this morning.", False),
    ("Would you like the recipe?", "Our team finally shipped the new billing service.", False),
]


@pytest.mark.parametrize("question,text,taken", UPTAKE)
def test_a_yes_no_question_waits_for_a_position_an_open_one_for_any_statement(question: str, text: str,
                                                                               taken: bool) -> None:
    from app.core.intent.dependence import takes_up

    assert takes_up(text, question) is taken


def test_the_last_question_of_an_answer() -> None:
    from app.core.intent.dependence import last_question

    assert last_question("Pottery is relaxing. Have you tried it yet?") == "Have you tried it yet?"
    assert last_question("What now? I think we are done.") == "What now?"
    assert last_question("Noted.") is None
