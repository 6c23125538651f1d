"""Word tokens, a light stemmer, stop words, content words, the words inside a negated clause,
order-keeping de-duplication of short strings. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD_RE = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?")

STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if then else of to in on at by for with from into onto about as is are
    was were be been being am do does did doing have has had having i me my mine we us our you your
    he him his she her it its they them their this that these those there here what which who whom
    whose when where why how all any some each every no not so than too very can could would should
    will shall may might must just also please pls ok okay hey hi hello thanks thank use using used
    up out over again once more most other such only own same s t don't dont i'm i'd i've you're
    it's that's let's lets get got one thing things something anything stuff""".split()
)

_NEGATION_RE = re.compile(
    r"\b(?:never|don't|dont|do not|does not|doesn't|did not|didn't|must not|mustn't|should not|"
    r"shouldn't|without|not|no|avoid|stop)\b([^.;,!?]*)",
    re.IGNORECASE,
)


def tokenize(text: str) -> list[str]:
    """Return the lower-cased word tokens of ``text`` (apostrophe contractions kept whole)."""
    return _WORD_RE.findall(text.lower().replace("\u2019", "'"))


def stem(word: str) -> str:
    """Return a light stem: one of -ing/-ion(s)/-ed/-es/-s removed, then a final -e (delete → delet)."""
    w = word.lower()
    for suffix in ("ing", "ions", "ion", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def content_stems(text: str) -> list[str]:
    """Return the stems of the non-stop-words of ``text``, unique, in order of first use."""
    seen: dict[str, None] = {}
    for token in tokenize(text):
        if token in STOPWORDS or len(token) < 2:
            continue
        seen.setdefault(stem(token), None)
    return list(seen)


def negated_stems(text: str) -> set[str]:
    """Return the stems that occur inside a negated clause ("don't X", "without X", ...)."""
    out: set[str] = set()
    for match in _NEGATION_RE.finditer(text):
        out.update(content_stems(match.group(1)))
    return out


def dedup_texts(items: Sequence[str], cap: int) -> list[str]:
    """Return ``items`` with whitespace collapsed, case-insensitive duplicates dropped, each cut to
    200 characters and at most ``cap`` of them, in order of first use."""
    seen: dict[str, str] = {}
    for item in items:
        v = re.sub(r"\s+", " ", str(item)).strip()
        if v and v.lower() not in seen:
            seen[v.lower()] = v[:200]
    return list(seen.values())[:cap]
