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
