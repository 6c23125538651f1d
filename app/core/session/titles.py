"""Titles: a session's (the start of its first input, cut at a word, on one line) and a turn
card's (``key_titles``: the input's key content words, distinctive within its session), and a
conversation's topics (``topic_words``)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from app.core.text.words import STOPWORDS, stem, tokenize

MAX_TITLE_CHARS = 48


def title_from(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """The first non-empty line of ``text``, whitespace collapsed and cut at a word boundary to at
    most ``limit`` characters (an ellipsis marks the cut); "" for a blank text."""
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2:]:  # keep whole words when a space falls in the second half
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:-") + "…"


# --------------------------------------------------------------------------- card titles

# Words that ask for something or qualify the asking: never what a turn is about.
GENERIC_WORDS: frozenset[str] = frozenset(
    """write explain describe tell give make show list help need want like know think try find
    create build add get put take let ask answer question questions detailed detail details short
    brief quick simple good best better new step steps way ways example examples idea ideas kind
    really actually maybe please could would should also now still back again next first last
    many much few lot lots bit little sure right well yes okay thanks great nice around worth case
    am is are going able something anything everything via whether today tomorrow yesterday
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday week weeks day days compare remind
    decide decided said say says given handle draft note notes takes point points hour hours""".split()
)
TITLE_WORDS = 3
TITLE_MAX_CHARS = 34


def _content_tokens(text: str) -> list[str]:
    """The words of ``text`` a title may use, in order (repeats kept)."""
    return [t for t in tokenize(text) if t not in STOPWORDS and t not in GENERIC_WORDS and len(t) >= (2 if t.isdigit() else 3)]


def _surface(token: str, text: str) -> str:
    """``token`` as written in ``text`` (its case), or as given."""
    found = re.search(rf"(?<![\w]){re.escape(token)}(?![\w])", text, re.IGNORECASE)
    return found.group(0) if found else token


def _named(surface: str, text: str) -> bool:
    """Whether the word is written capitalised inside a sentence (a name: Lisbon, Postgres)."""
    if not surface[:1].isupper():
        return False
    at = text.find(surface)
    before = text[:at].rstrip()
    return bool(before) and before[-1] not in ".!?:\n"


def _ranked(text: str, tokens: list[str], df: Counter[str], docs: int) -> list[str]:
    """The text's distinct content words, best title words first: rare in the session (idf),
    names and numbers preferred, earlier ones before later ones on a tie."""
    scores: dict[str, float] = {}
    for position, token in enumerate(tokens):
        if token in scores:
            scores[token] += 0.5
            continue
        score = 0.3 + math.log((docs + 1) / df[stem(token)])
        surface = _surface(token, text)
        if _named(surface, text):
            score *= 1.5
        elif any(c.isdigit() for c in token):
            score *= 1.2
        scores[token] = score * (1.0 + 0.5 / (1.0 + position / 3))
    return sorted(scores, key=lambda t: -scores[t])


def _compose(text: str, tokens: list[str], chosen: Sequence[str]) -> str:
    """The chosen words in the order the text uses them, as written, the first capitalised."""
    order = {t: tokens.index(t) for t in chosen}
    words = [_surface(t, text) for t in sorted(chosen, key=order.__getitem__)]
    title = " ".join(words)
    if len(title) > TITLE_MAX_CHARS:
        title = title_from(title, TITLE_MAX_CHARS)
    return title[:1].upper() + title[1:]


def key_titles(texts: Mapping[str, str], words: int = TITLE_WORDS) -> dict[str, str]:
    """A short title for each text (id → text): its key content words — rare in ``texts`` as a
    whole, names and numbers first — in the order it uses them; where two titles would be the same,
    each takes more words until they differ (up to two more). A text without content words keeps
    its start (``title_from``)."""
    tokens = {key: _content_tokens(text) for key, text in texts.items()}
    df: Counter[str] = Counter()
    for toks in tokens.values():
        df.update({stem(t) for t in toks})
    ranked = {key: _ranked(texts[key], toks, df, len(texts)) for key, toks in tokens.items()}
    titles: dict[str, str] = {}
    for extra in range(3):
        taken = Counter(titles.values())
        for key, text in texts.items():
            if not ranked[key]:
                titles[key] = title_from(text, TITLE_MAX_CHARS)
            elif extra == 0 or taken[titles[key]] > 1:
                titles[key] = _compose(text, tokens[key], ranked[key][: words + extra])
    return titles


def topic_words(texts: Sequence[str], k: int = 4, skip: str = "") -> list[str]:
    """The words most of ``texts`` share (a conversation's topics), as written, most shared first
    (then the earliest), leaving out those in ``skip`` (its title)."""
    left_out = {stem(t) for t in tokenize(skip)}
    counts: Counter[str] = Counter()
    first: dict[str, tuple[int, str]] = {}
    for i, text in enumerate(texts):
        for token in dict.fromkeys(_content_tokens(text)):
            key = stem(token)
            if key in left_out:
                continue
            counts[key] += 1
            first.setdefault(key, (i, _surface(token, text)))
    best = sorted(counts, key=lambda key: (-counts[key], first[key][0]))
    return [first[key][1] for key in best[:k]]
