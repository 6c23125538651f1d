"""The input's charge against the context budget and its extractive shortening (pure, no stores)."""

from __future__ import annotations

import re

from app.core.context.input_fit import charge_input, relatedness, shorten, units
from app.core.ports import WordTokenCounter
from tests.texts import long_paste

COUNT = WordTokenCounter().count


def _spans(selectors: list[str]) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in s.removeprefix("chars:").split("-")) for s in selectors]  # type: ignore[misc]


def test_an_input_that_fits_is_not_charged() -> None:
    # today's defaults: budget 1024, context 2048, answer reserve 256 → the prompt may take 1792
    room = charge_input(budget=1024, limit=1792, template=14, input_tokens=120)
    assert (room.context_budget, room.charged) == (1024, 0)
    edge = charge_input(budget=1024, limit=1792, template=14, input_tokens=1792 - 14 - 1024)
    assert (edge.context_budget, edge.charged) == (1024, 0)


def test_only_the_overflow_is_charged_down_to_the_floor() -> None:
    room = charge_input(budget=1024, limit=1792, template=14, input_tokens=900)
    assert room.context_budget == 1792 - 14 - 900 and room.charged == 1024 - room.context_budget
    assert room.input_room == 900  # the input fits whole
    huge = charge_input(budget=1024, limit=1792, template=14, input_tokens=5000)
    assert huge.context_budget == 256 == huge.floor  # a quarter of the budget stays for the context
    assert huge.input_room == 1792 - 14 - 256 < 5000  # the input has to be shortened to this
    # a budget above what the model can take is first clamped to the room there is
    assert charge_input(budget=4096, limit=1792, template=14, input_tokens=10).budget == 1778


def test_shorten_keeps_head_tail_and_fits() -> None:
    text = long_paste(3000)
    cut = shorten(text, 900, COUNT)
    assert COUNT(cut.text) == cut.kept_tokens <= 900
    assert cut.tokens == COUNT(text) > 900
    assert cut.text.startswith("Here is the warehouse report for this month.")
    assert cut.text.endswith("What should we fix first?")
    assert cut.head >= 1 and cut.tail >= 1 and cut.related
    # kept and cut spans tile the text in order, every cut is marked, the words add up
    spans = sorted(_spans(cut.kept) + _spans(cut.cut))
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    markers = [int(n) for n in re.findall(r"\[… (\d+) words cut …\]", cut.text)]
    assert len(markers) == len(cut.cut) and sum(markers) == cut.cut_words
    kept_words = sum(len(text[a:b].split()) for a, b in _spans(cut.kept))
    assert kept_words + cut.cut_words == len(text.split())
    assert cut.selector() == "chars:" + ",".join(f"{a}-{b}" for a, b in _spans(cut.kept))


def test_shorten_is_deterministic_and_prefers_related_sentences() -> None:
    on_topic = "The cold storage upgrade needs new compressors for the cold storage rooms."
    filler = ["Parrots mimic voices.", "Violins need rosin.", "Glaciers carve valleys slowly.",
              "Sonnets have fourteen lines.", "Marathons test endurance.", "Origami folds paper.",
              "Tectonics shifts continents.", "Jazz improvises freely."]
    body = [
        "We plan the cold storage upgrade this spring.",
        *filler[:4], on_topic, *filler[4:],
        "The compressors for the cold storage upgrade arrive in May.",
    ]
    text = "\n".join(body)
    a = shorten(text, 60, COUNT)
    b = shorten(text, 60, COUNT)
    assert a == b
    assert on_topic in a.text and a.related == [5]  # the middle sentence sharing the most with the rest
    assert not any(f in a.text for f in filler[1:])  # (the first one is part of the head)


def test_relatedness_scores_shared_words() -> None:
    scores = relatedness(["red apples and green apples", "apples are red", "quantum chromodynamics"])
    assert scores[0] > 0 and scores[1] > 0 and scores[2] == 0.0


def test_units_split_sentences_lines_and_long_runs() -> None:
    text = "One two. Three four!\nFive six\n\n" + " ".join(f"w{i}" for i in range(100))
    pieces = [text[a:b] for a, b in units(text, max_words=40)]
    assert pieces[:3] == ["One two.", "Three four!", "Five six"]
    assert [len(p.split()) for p in pieces[3:]] == [40, 40, 20]


def test_a_target_below_the_first_sentence_keeps_leading_words() -> None:
    text = " ".join(f"word{i}" for i in range(30)) + "."
    cut = shorten(text, 12, COUNT)
    assert cut.kept_tokens <= 12 and cut.text.startswith("word0 word1")
    assert cut.cut and "words cut" in cut.text
