"""The sentence splitters of app/core/text/sentences.py: each variant's rule, where they differ."""

from __future__ import annotations

from app.core.text.sentences import (
    CLAUSE_ENDS,
    piece_spans,
    sentence_ends,
    split_after_stops,
    split_before_capitals,
    split_sub_questions,
    statements,
)

TEXT = "We ship v1.2 today! Never log passwords; always rotate keys. Is it done? e.g. the \u201cnew\u201d build.\nDone"


def test_statements_leave_questions_out_and_a_clause_ends_at_a_semicolon() -> None:
    assert statements("I\u2019ll go.\nWhy not? Fine!!") == ["I'll go", "Fine"]
    assert statements("Never X; always Y.") == ["Never X; always Y"]
    assert statements("Never X; always Y.", CLAUSE_ENDS) == ["Never X", "always Y"]
    assert statements(" .") == [""]  # a piece of nothing but an end mark


def test_piece_spans_tile_the_text_and_cut_at_every_stop() -> None:
    spans = piece_spans(TEXT)
    assert "".join(TEXT[a:b] for a, b in spans) == TEXT  # no white space between the pieces here
    assert TEXT[spans[0][0]:spans[0][1]] == "We ship v1."  # a stop ends a piece wherever it stands
    assert piece_spans("  \n") == []


def test_sentence_ends_need_white_space_after_the_stop() -> None:
    ends = list(sentence_ends(TEXT))
    pieces = [TEXT[a:b] for a, b in zip([0, *ends], [*ends, len(TEXT)])]
    assert pieces == ["We ship v1.2 today!", " Never log passwords; always rotate keys.", " Is it done?", " e.g.",
                      " the \u201cnew\u201d build.", "\n", "Done"]  # "v1.2" goes on; "e.g." before a space ends
    quoted = "say \u201chi.\u201d Then"
    assert [quoted[:e] for e in sentence_ends(quoted)] == ["say \u201chi.\u201d"]  # closing quotes stay with it


def test_split_after_stops_and_before_capitals() -> None:
    assert split_after_stops("Done. then more. 2 left") == ["Done.", "then more.", "2 left"]
    assert split_before_capitals("Done. then more. 2 left") == ["Done. then more.", "2 left"]
    assert split_before_capitals("One.\n\ntwo. (Three) four") == ["One.", "two.", "(Three) four"]


def test_split_sub_questions() -> None:
    assert split_sub_questions("What is Kafka and how does Zookeeper work?") == [
        "What is Kafka?", "how does Zookeeper work?"]
    assert split_sub_questions("Who wrote it? When was it published?") == ["Who wrote it?", "When was it published?"]
    assert split_sub_questions("Write a poem and a song") == []
    assert split_sub_questions("What is salt and pepper?") == []


def test_asked_share_is_the_share_of_words_in_questions() -> None:
    from app.core.text.sentences import asked_share

    assert asked_share("Looks fun! What other classes have you done?") == 6 / 8
    assert asked_share("Just yesterday I joined a church. It's great!") == 0.0
    assert asked_share("Did you go? Really?!") == 1.0  # "?!" still asks
    assert asked_share("I went to the beach with the kids. Have you been?") == 3 / 11
    assert asked_share("") == 0.0 and asked_share("   ") == 0.0
