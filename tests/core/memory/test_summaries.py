"""The summarizer alone (issue 14): identifiers, the extractive levels, anchored updates,
temporal compression, the model's validity check and the parts an update covers."""

from __future__ import annotations

from app.core.memory.summaries import (
    SummaryTurn,
    anchored_brief,
    compose,
    extractive,
    identifiers,
    model_valid,
    retention,
    words,
)
from app.core.memory.summary_subjects import Made, Subject, cache_key, new_parts, next_record

TURNS = [
    SummaryTurn("m0", 0, "Ana", "We should move the parser into src/pcm/parse.py before the release."),
    SummaryTurn("m1", 1, "Bo", "Agreed. The release is on 2024-05-14 and Carla wants version 2.3 by then."),
    SummaryTurn("m2", 2, "Ana", "Nice weather today. I had a long walk by the river with my dog."),
    SummaryTurn("m3", 3, "Bo", "We decided to drop the YAML loader; the JSON config stays in settings.json."),
    SummaryTurn("m4", 4, "Ana", "Great. Also the budget is 4096 tokens per request, as Dmitri measured."),
    SummaryTurn("m5", 5, "Bo", "Thanks. Talk soon!"),
    SummaryTurn("m6", 6, "Ana", "Haha sure. By the way, the meeting moved to March 3 in Lisbon."),
]


def test_identifiers_keep_paths_dates_numbers_and_names_but_not_sentence_openers() -> None:
    found = identifiers(" ".join(t.text for t in TURNS))
    assert {"src/pcm/parse.py", "2024-05-14", "2.3", "Carla", "settings.json", "4096", "Dmitri", "March 3",
            "Lisbon", "YAML", "JSON"} <= found
    assert not {"Nice", "Great", "Thanks", "Talk", "Agreed"} & found  # openers name nothing


def test_levels_grow_in_size_and_identifier_coverage() -> None:
    brief, standard, detailed = (extractive(TURNS, level) for level in ("brief", "standard", "detailed"))
    assert words(brief) < words(standard) <= words(detailed) < sum(words(t.text) for t in TURNS)
    assert retention(brief, TURNS) < retention(standard, TURNS) <= retention(detailed, TURNS)
    assert retention(detailed, TURNS) >= 0.8
    assert "src/pcm/parse.py" in detailed and "2024-05-14" in detailed  # verbatim
    assert "long walk by the river" not in brief  # small talk is not what a brief keeps


def test_a_model_summary_that_drops_identifiers_is_refused() -> None:
    reference = extractive(TURNS, "standard")
    assert not model_valid("They talked about a release and some files.", TURNS, "standard", reference)
    assert not model_valid("", TURNS, "standard", reference)
    assert model_valid(reference, TURNS, "standard", reference)


def test_anchored_brief_keeps_at_most_two_sentences_from_the_previous_and_the_new() -> None:
    brief = anchored_brief("Ana moved the parser to src/pcm/parse.py. It rained.",
                           "The meeting moved to March 3 in Lisbon with Dmitri.")
    assert "It rained" not in brief  # the least salient of the three sentences gives way
    assert "Lisbon" in brief and "src/pcm/parse.py" in brief


def test_temporal_compression_shows_older_parts_coarser() -> None:
    parts = [{"brief": f"b{n}", "standard": f"s{n}", "detailed": f"d{n}"} for n in range(8)]
    text = compose(parts, "detailed").splitlines()
    assert text[-2:] == ["d6", "d7"]  # the newest at the level asked
    assert text[2:6] == ["s2", "s3", "s4", "s5"]  # then one level coarser
    assert text[:2] == ["b0", "b1"]  # the oldest at brief


def test_new_parts_cut_at_a_pause_and_after_what_is_covered() -> None:
    turns = [SummaryTurn(f"m{n}", n, "A", f"line {n}", at=f"2024-01-01T{10 + (n >= 3) * 5}:00:0{n}Z")
             for n in range(6)]
    parts = new_parts(turns, None)
    assert [[t.index for t in p] for p in parts] == [[0, 1, 2], [3, 4, 5]]
    assert [[t.index for t in p] for p in new_parts(turns, 3)] == [[4, 5]]


def test_an_update_is_based_on_the_previous_version_and_keeps_its_parts() -> None:
    subject = Subject("branch", "root", tuple(TURNS))
    texts = {level: extractive(TURNS[:4], level) for level in ("brief", "standard", "detailed")}
    first = next_record(None, subject, "detailed", TURNS[:4], texts, Made(texts["detailed"], "extractive"),
                        key=cache_key("branch", "root", "detailed", ["m0", "m1", "m2", "m3"], None), tokens=words)
    more = {level: extractive(TURNS[4:], level) for level in ("brief", "standard", "detailed")}
    second = next_record(first, subject, "detailed", TURNS[4:], more, Made(more["detailed"], "extractive"),
                         key="k2", tokens=words)
    assert second.based_on == first.summary_id
    assert (second.covers.first, second.covers.last) == (0, 6)
    assert second.covers.ids == [t.message_id for t in TURNS]
    assert second.content.startswith(first.content)  # anchored: the earlier part is kept as it was
    assert len(second.parts) == 2 and second.tokens == words(second.content) + 1  # two parts, a newline between
    assert cache_key("branch", "root", "detailed", ["m0"], None) != cache_key("branch", "root", "detailed", ["m0"], "x")


def test_the_plan_chooses_the_summary_level_by_budget_and_confidence() -> None:
    from app.core.intent.model import Intent, Mode, TaskType
    from app.core.plan.policies import summary_level

    work = Intent(text="continue the refactor", mode=Mode.TASK, task_type=TaskType.CHANGE)
    assert [summary_level(work, "balanced", b) for b in (400, 1024, 4096)] == ["brief", "standard", "detailed"]
    assert summary_level(work, "wide", 1024) == "detailed"  # unsure: one level finer
    lookup = Intent(text="when was the release?", mode=Mode.QA, task_type=TaskType.RETRIEVAL)
    assert summary_level(lookup, "wide", 4096) == "brief"  # evidence answers a standalone lookup


def test_a_composed_level_is_counted_line_by_line_so_a_long_chain_costs_linear_counting() -> None:
    """Issue 40: the composed levels grew with every update and were counted whole each time
    (quadratic over a 100,000-turn import); each line is now counted once, with the counter's cache."""
    asked: list[str] = []
    cache: dict[str, int] = {}

    def count(text: str) -> int:  # a caching counter, as ModelTokenCounter is
        if text not in cache:
            asked.append(text)
            cache[text] = words(text)
        return cache[text]

    subject = Subject("session", "s", tuple(TURNS))
    record = None
    for n in range(60):
        part = [SummaryTurn(f"m{n}", n, "Ana", f"Step {n} moved file{n}.py to the release branch.")]
        texts = {level: f"{level} {n}: file{n}.py" for level in ("brief", "standard", "detailed")}
        record = next_record(record, subject, "standard", part, texts, Made(texts["standard"], "extractive"),
                             key=f"k{n}", tokens=count)
    assert record is not None and len(record.parts) == 60
    assert record.tokens == words(record.content) + record.content.count("\n")  # its lines plus the newlines
    assert sum(len(t) for t in asked) < 4 * sum(len(p["standard"]) + len(p["brief"]) for p in record.parts)
