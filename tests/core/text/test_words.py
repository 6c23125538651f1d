"""The tokenizers of app/core/text/words.py: the default and each variant's rule, the stemmer,
content words, and the memo that makes a text split once per tokenizer."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

from app.core.text import words
from app.core.text.words import (
    DEFAULT,
    MENTIONS,
    RANKING,
    ROUTING,
    SUMMARY,
    TOPIC_TERMS,
    TOPIC_WORDS,
    Tokenizer,
    content_stems,
    dedup_texts,
    negated_stems,
    spaced_spans,
    stem,
    stems_of,
    tokenize,
    tokenize_tail,
)


def test_default_keeps_contractions_and_snake_case_whole() -> None:
    assert tokenize("Don\u2019t DELETE my_file.txt, it's 2x!") == ("don't", "delete", "my_file", "txt", "it's", "2x")
    assert tokenize("  ,,  ") == ()


def test_stem_removes_one_suffix_then_a_final_e() -> None:
    assert [stem(w) for w in ("deleting", "deleted", "delete", "questions", "boxes", "cats", "is", "Running")] == [
        "delet", "delet", "delet", "quest", "box", "cat", "is", "runn"]


def test_content_stems_are_unique_in_order_and_a_fresh_list_each_time() -> None:
    assert content_stems("Please delete the deleted files and the file list") == ["delet", "fil", "list"]
    first = content_stems("deploy the build")
    first.append("mutated")
    assert content_stems("deploy the build") == ["deploy", "build"]  # the memo is not the caller's list
    assert stems_of(tokenize("deploy the build")) == ["deploy", "build"]


def test_negated_stems_and_dedup_texts() -> None:
    assert negated_stems("fix the build but don't delete the logs, please") == {"delet", "log"}
    assert dedup_texts(["a  b", "A B", " c ", "", "d" * 300], 5) == ["a b", "c", "d" * 200]


@pytest.mark.parametrize("text", [
    "Please fix the build", "please  fix it", "can you tell me", "let's go home", "pls!fix it",
    "letsgo home", "İstanbul trip please help", "ok so ΑΣ σ fix", "x’s thing", "a_b c_d", "don't  stop now",
])
def test_tokenize_tail_is_the_split_of_the_tail(text: str) -> None:
    for start in range(len(text) + 1):
        assert tokenize_tail(text, start) == tokenize(text[start:]), (text, start)


def test_tokenize_tail_agrees_on_random_text() -> None:
    rng = random.Random(7)
    alphabet = "ab_'’ .,İΣσ9\t-"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        start = rng.randint(0, len(text))
        assert tokenize_tail(text, start) == tokenize(text[start:]), (text, start)


def test_routing_keeps_names_whole_and_trims_their_ends() -> None:
    assert ROUTING.words("Bob: try `ls -la`, ok?") == ("bob", "try", "ls", "la", "ok")
    assert ROUTING.words("  ,,  ") == ()
    assert ROUTING.words("@O'Neil-2: mr_x, hi") == ("o'neil-2", "mr_x", "hi")
    assert tokenize("@O'Neil-2: mr_x, hi") == ("o'neil", "2", "mr_x", "hi")  # the default cuts the name
    assert ROUTING.content("The GRUB menu is gone!") == {"grub", "menu", "gone"}
    assert ROUTING.content("a b x") == frozenset()  # content words have two characters or more


def test_ranking_splits_contractions_and_snake_case() -> None:
    assert RANKING.words("Don't touch user_id") == ("don", "t", "touch", "user", "id")
    assert RANKING.content("What did the Cat eat?") == {"cat", "eat"}
    assert RANKING.content("x k z") == {"x", "k", "z"}  # no length floor: "x" is a term


def test_mentions_keeps_paths_hosts_and_handles_whole() -> None:
    assert MENTIONS.words("Update notes/plan.md, see news.example.org (@ops) ...") == (
        "update", "notes/plan.md", "see", "news.example.org", "@ops", "")
    assert MENTIONS.words("run ~/deploy.sh, @ops") == ("run", "~/deploy.sh", "@ops")
    assert ROUTING.words("run ~/deploy.sh, @ops") == ("run", "deploy.sh", "ops")  # routing trims such names
    assert tokenize("run ~/deploy.sh, @ops") == ("run", "deploy", "sh", "ops")  # the default cuts them apart


def test_summary_words_keep_case_hyphens_and_apostrophes() -> None:
    assert SUMMARY.words("Mel's well-known cafe, 2 days -- ok") == ("Mel's", "well-known", "cafe", "2", "days", "ok")


def test_topic_words_and_terms() -> None:
    assert TOPIC_WORDS.words("k8s on Docker, v2 at src/app.py") == ("k8s", "Docker", "src", "app")
    assert TOPIC_TERMS.words("k8s on Docker, v2 at src/app.py") == ("k8s", "on", "Docker", "v2", "at", "src/app.py")


def test_spaced_spans_are_the_white_space_words() -> None:
    text = " one\ttwo\u00a0three\n\nfour. "
    assert [text[a:b] for a, b in spaced_spans(text)] == text.split() == ["one", "two", "three", "four."]


def test_a_text_is_split_once_by_each_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    rule = DEFAULT.rule

    def counted(text: str) -> list[str]:
        calls[text] += 1
        return list(rule(text))

    monkeypatch.setattr(DEFAULT, "rule", counted)
    DEFAULT.forget()
    text = "split me once, whoever asks"
    assert tokenize(text) == tokenize(text) == DEFAULT.words(text)
    content_stems(text)
    words._content_stems.cache_clear()
    content_stems(text)  # the stems are worked out again, from the remembered split
    assert calls[text] == 1
    DEFAULT.forget()
    tokenize(text)
    assert calls[text] == 2


def test_a_pasted_text_shares_the_split_of_its_folded_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    rule = DEFAULT.rule
    monkeypatch.setattr(DEFAULT, "rule", lambda text: calls.update([text]) or rule(text))
    DEFAULT.forget()
    pasted, folded = "Bob\u2019s  build\n\nfailed ", "Bob's build failed"
    assert tokenize(folded) == tokenize(pasted) == ("bob's", "build", "failed")
    assert calls == {folded: 1}


def test_folding_never_changes_the_default_words() -> None:
    rng = random.Random(11)
    alphabet = "ab_9 \t\n\u00a0\u2028\u2019'\u03a3\u0130."
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert words._default_rule(text) == words._default_rule(words._default_fold(text)), repr(text)


def test_the_memo_is_bounded_and_shared_by_threads() -> None:
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def rule(text: str) -> list[str]:
        with lock:
            seen[text] += 1
        return text.split()

    tok = Tokenizer("test", rule, memo=64)
    texts = [f"w{i} x{i % 7}" for i in range(200)]
    results: list[list[tuple[str, ...]]] = []

    def run() -> None:
        results.append([tok.words(t) for t in texts])

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == [tuple(t.split()) for t in texts] for r in results)
    assert tok.words("w1 x1") == ("w1", "x1")
    before = sum(seen.values())
    tok.words(texts[0])  # long evicted: 64 texts are remembered, not 200
    assert sum(seen.values()) == before + 1
