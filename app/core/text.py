"""Generic text helpers shared by the profile, intent and plan modules.

Word tokens, a light stemmer, stop words, content words, the words inside a negated clause,
order-keeping de-duplication of short strings, the split of a compound question into its
sub-questions, and the fence that marks outside text (files, feeds, tool results) as a quotation. Nothing here knows about intents or plans. Everything is pure and deterministic.
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


_SUBQ_SPLIT_RE = re.compile(r",?\s+(?:and|also|plus)\s+(?=(?:what|who|when|where|why|which|how|is|are|does|do|"
                            r"did|can|could|should|will)\b)", re.IGNORECASE)


def split_sub_questions(text: str) -> list[str]:
    """Split a compound question into atomic sub-questions (empty when it is not compound)."""
    sentences = [s.strip() for s in re.findall(r"[^?]+\?", text) if s.strip()]
    if len(sentences) >= 2:
        return [re.sub(r"^[\s.,;!]+", "", s) for s in sentences]
    parts = [p.strip() for p in _SUBQ_SPLIT_RE.split(text.strip()) if p.strip()]
    if len(parts) >= 2 and "?" in text:
        return [p if p.endswith("?") else p.rstrip(".,;") + "?" for p in parts]
    return []


FENCE_OPEN, FENCE_CLOSE = "<<<", ">>>"


def fence(header: str, content: str) -> str:
    """``[header]`` then ``content`` between ``<<<`` / ``>>>`` lines: outside text as a quotation.

    Delimiter runs inside ``content`` are broken up (``>>>`` → ``> > >``) so a file or feed item
    cannot close the quotation early and continue as if it were part of the instructions.
    """
    body = content.replace(FENCE_OPEN, "< < <").replace(FENCE_CLOSE, "> > >").strip("\n")
    return f"[{header}]\n{FENCE_OPEN}\n{body}\n{FENCE_CLOSE}"
