from app.core.session.titles import title_from


def test_a_title_is_the_first_line_cut_at_a_word() -> None:
    assert title_from("  \n  Plan   the Kyoto\ttrip \nsecond line") == "Plan the Kyoto trip"
    assert title_from("") == "" and title_from(" \n\t") == ""
    long = "Why does my pandas merge drop rows when the keys have trailing whitespace in them"
    title = title_from(long)
    assert title.endswith("…") and len(title) <= 48 and long.startswith(title[:-1])
    assert title[:-1] == title[:-1].rstrip() and " ".join(title[:-1].split()[:-1]) in long
    one_word = "x" * 100
    assert title_from(one_word) == "x" * 47 + "…"


def test_a_card_title_is_the_inputs_key_words_not_its_first_words() -> None:
    from app.core.session.titles import key_titles

    texts = {
        "a": "Write a detailed packing list for a week of hiking in the Alps in September.",
        "b": "Explain how quicksort partitions an array around a pivot.",
        "c": "What is the worst case of quicksort and how do I avoid it?",
        "d": "ok",
    }
    titles = key_titles(texts)
    assert titles["a"] == "Packing hiking Alps"  # the request ("Write a detailed") and the dates left out
    assert titles["b"] == "Partitions array pivot" and "quicksort" in titles["c"]
    assert all(len(t.split()) <= 3 and len(t) <= 34 for t in titles.values())
    assert titles["d"] == "ok"  # no content word: the text's start


def test_titles_tell_the_cards_of_a_session_apart() -> None:
    from app.core.session.titles import key_titles

    texts = {f"t{i}": f"For the Lisbon trip, what about the {a} and the {b}?"
             for i, (a, b) in enumerate(zip("tram ferry museum bakery hostel beach".split(),
                                            "tiles fado Sintra Alfama train viewpoint".split(), strict=True))}
    texts["more"] = texts["t0"] + " And the tickets?"
    titles = key_titles(texts)
    assert len(set(titles.values())) == len(titles)  # the same first words; different titles
    assert titles["t1"] == "Lisbon ferry fado" and "tickets" in titles["more"]


def test_topic_words_are_what_most_turns_of_a_conversation_share() -> None:
    from app.core.session.titles import topic_words

    texts = ["Which Postgres index for the orders query?", "Vacuum settings for Postgres replicas",
             "Postgres index bloat after the migration", "And the backup of the index?"]
    assert topic_words(texts, k=2) == ["Postgres", "index"]
    assert topic_words(texts, k=2, skip="postgres") == ["index", "orders"]
