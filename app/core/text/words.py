"""Words: the tokenizers of the house, the light stemmer, the stop words, content words.

A :class:`Tokenizer` is a named rule that splits a text into words, with the stop words its
users leave out. ``DEFAULT`` (``tokenize``) is the house tokenizer: lower-cased ``[a-z0-9_]+``
words, apostrophe contractions kept whole ("don't"), typographic apostrophes read as ASCII; with
``STOPWORDS`` and ``stem`` it gives the ``content_stems`` that intent, plan, tool selection, the
profile, memory and retrieval's key test compare. The others are *variants*, each the rule a
stage's figures were set with; sharing the default would move a route, a grade or a summary
(the comment above each says why it differs):

- ``ROUTING``: the words anchor routing reads (names, addresses, keyword overlap);
- ``RANKING``: the words recall ranks by (the relevance gate, compression, near-duplicates, MMR);
- ``MENTIONS``: the words environment routing looks a file's or a feed's name up among;
- ``SUMMARY``: the words the extractive summarizer counts and weighs;
- ``TOPIC_WORDS`` / ``TOPIC_TERMS``: a message's words that may join a topic, a query's terms
  that may name one;
- ``spaced_spans``: the white-space words a long input is counted and cut by.

A text is split once per tokenizer: ``Tokenizer.words`` and ``Tokenizer.content`` remember the
last texts they saw (``functools.lru_cache``: bounded, and coherent when the executors' threads
share it; two threads splitting one new text at once both get the same words), so the input of
a turn, read by a dozen stages, is split once by each tokenizer that reads it. What they return
is immutable (tuples, frozensets) for the same reason. Pure and deterministic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence


class Tokenizer:
    """A named way of splitting text into words, and the stop words its users leave out.

    ``words(text)`` is the split, remembered for the last ``memo`` texts; ``content(text)`` the
    split's words of at least ``min_len`` characters that are not stop words (a frozenset),
    remembered for the last ``content_memo`` texts. ``rule`` is the split itself, never
    remembered (looked up at each split, so a test may wrap it to count the splits). ``fold``,
    when given, maps a text to the one whose split it shares (the rule gives both the same
    words): a text the memo does not know is split as its folded form, once for both."""

    def __init__(self, name: str, rule: Callable[[str], Iterable[str]], stopwords: frozenset[str] = frozenset(), *,
                 min_len: int = 1, memo: int = 2048, content_memo: int = 2048,
                 fold: Callable[[str], str] | None = None) -> None:
        self.name = name
        self.rule = rule
        self.stopwords = stopwords
        self.min_len = min_len
        self.fold = fold
        words = functools.lru_cache(maxsize=memo)(self._split)
        content = functools.lru_cache(maxsize=content_memo)(self._content)
        self._memos = (words, content)
        self.words: Callable[[str], tuple[str, ...]] = words
        self.content: Callable[[str], frozenset[str]] = content

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r})"

    def _split(self, text: str) -> tuple[str, ...]:
        if self.fold is not None and (folded := self.fold(text)) != text:
            return self.words(folded)
        return tuple(self.rule(text))

    def _content(self, text: str) -> frozenset[str]:
        return frozenset(w for w in self.words(text) if len(w) >= self.min_len and w not in self.stopwords)

    def forget(self) -> None:
        """Drop what the memos remember (tests that count splits start from here)."""
        for memo in self._memos:
            memo.cache_clear()


# --------------------------------------------------------------------------- the default

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


def _default_rule(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower().replace("\u2019", "'"))


def _default_fold(text: str) -> str:
    """White space folded to single spaces and typographic apostrophes made ASCII, as intent
    reads an input (``IntentEngine.infer``): the words stay the same, as no word holds white
    space and the rule reads both apostrophes alike, so a pasted input and the intent's copy of
    it share one split."""
    return " ".join(text.replace("\u2019", "'").split())


#: The house tokenizer (see the module docstring); its content words are compared as stems
#: (``content_stems``), so ``DEFAULT.content`` is not used.
DEFAULT = Tokenizer("default", _default_rule, STOPWORDS, min_len=2, memo=4096, content_memo=0, fold=_default_fold)

#: The lower-cased word tokens of a text (apostrophe contractions kept whole): ``DEFAULT.words``.
tokenize = DEFAULT.words


def tokenize_tail(text: str, start: int) -> tuple[str, ...]:
    """``tokenize(text[start:])``, read off the split of the whole ``text`` when white space ends
    ``text[:start]``: no word crosses it then, so the whole's words are the head's and then the
    tail's, and only the head is split (an input less its "please"). Else the tail is split."""
    if start <= 0:
        return tokenize(text)
    if not text[start - 1].isspace():
        return tokenize(text[start:])
    return tokenize(text)[len(tokenize(text[:start])):]


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


def stems_of(words: Iterable[str]) -> list[str]:
    """The stems of the words (``DEFAULT``'s) that are not stop words, unique, in order of first use."""
    seen: dict[str, None] = {}
    for token in words:
        if token in STOPWORDS or len(token) < 2:
            continue
        seen.setdefault(stem(token), None)
    return list(seen)


@functools.lru_cache(maxsize=4096)
def _content_stems(text: str) -> tuple[str, ...]:
    return tuple(stems_of(tokenize(text)))


def content_stems(text: str) -> list[str]:
    """Return the stems of the non-stop-words of ``text``, unique, in order of first use."""
    return list(_content_stems(text))


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


# --------------------------------------------------------------------------- variants
#
# Each variant below is a rule its stage's figures were tuned with. Sharing ``DEFAULT`` would
# change what they measure: the comment above each says why it differs.

#: The punctuation ``ROUTING`` trims from a word's ends (and anchor routing from a name's).
ROUTING_EDGES = "\"'`.,:;!?()[]{}<>@*~|=-_/\\^&%$"


def _routing_rule(text: str) -> list[str]:
    out = []
    for raw in text.split():
        word = raw.strip(ROUTING_EDGES).lower()
        if word:
            out.append(word)
    return out


#: Anchor routing's words (``app.core.routing.anchor``: mentions, addresses, keyword overlap;
#: ``app.eval.route`` too): white-space words, lower-cased, punctuation trimmed from their ends
#: only. A chat name stays one word whatever it holds inside ("o'neil", "mr_x", "bob-2"), and the
#: first word is how a message addresses someone ("bob:", "@bob,"): ``DEFAULT`` splits such names
#: apart. Content words have two characters or more; the stop words are the ones the routing
#: weights (``SESSION_DEFAULT``, ``CHAT_STREAM``) were fitted with. With the default's rule,
#: ``pcm eval route`` on irc-dev falls from 89.8% to 89.0% thread accuracy (67.1% → 65.7% parent).
ROUTING = Tokenizer("routing", _routing_rule, frozenset(
    "a an the and or but if then so to of in on at for with from by as is are was were be been "
    "it its this that these those i you he she we they me my your our their him her them do does "
    "did done have has had not no yes can could will would should may might just also there here "
    "what which who whom when where why how all any some one about into out up down over than too "
    "very s t im i'm it's don't dont get got ok okay thanks thank hi hello hey please".split()), min_len=2)

_RANKING_WORD = re.compile(r"[a-z0-9]+")


def _ranking_rule(text: str) -> list[str]:
    return _RANKING_WORD.findall(text.lower())


#: The words recall ranks by (``app.core.context``: the relevance gate's lexical support and
#: "adds" test, query-aware compression, near-duplicates, MMR): lower-cased ``[a-z0-9]+``, so a
#: contraction falls apart ("don", "t": the stop words hold the pieces) and so does a snake_case
#: name ("user_id" holds "user"). ``content`` (its terms: every non-stop word, however short) is
#: remembered for 65,536 texts: a build grades the same turns several times, and every build again.
#: With the default's rule and stop words (or its stop words alone), the gate's lexical support
#: changes: 2 of the 17 turns of the golden session replay with other grades.
RANKING = Tokenizer("ranking", _ranking_rule, frozenset(
    """a an the and or but if of to in on at by for with about from into over after before between
    through during as is are was were be been being am do does did doing have has had having i me my
    mine we us our you your he him his she her it its they them their what which who whom whose this
    that these those there here when where why how not no nor so than too very can will just would
    should could may might must shall s t don didn doesn ll ve re d m o y""".split()),
    content_memo=65_536)

#: The punctuation ``MENTIONS`` trims from a word's ends: sentence punctuation only.
MENTIONS_EDGES = ".,;:!?()[]{}<>\"'`*"


def _mentions_rule(text: str) -> list[str]:
    return [t.strip(MENTIONS_EDGES) for t in text.lower().split()]


#: The words environment routing looks a file's or a feed's name up among
#: (``app.core.routing.environment.RouteIndex``): white-space words, lower-cased, sentence
#: punctuation trimmed from their ends, so a path, a file name, a host or a handle stays one word
#: ("~/deploy.sh", "news.example.org", "@ops"): ``DEFAULT`` cuts them apart and ``ROUTING``
#: trims their ends, and an event would no longer be routed to the turn that names it exactly.
#: A word may be empty ("...").
MENTIONS = Tokenizer("mentions", _mentions_rule, content_memo=0)

_SUMMARY_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")

#: The words the extractive summarizer counts and weighs (``app.core.memory.summaries``): case
#: kept, hyphenated and apostrophe words whole ("well-known", "Mel's"). A summary's sizes
#: (``STANDARD_WORDS``, the brief's 80 words) and its sentences' salience were set on them;
#: with ``DEFAULT``'s rule 34 of the 210 extractive summaries of locomo-dev's sessions change.
SUMMARY = Tokenizer("summary", _SUMMARY_WORD.findall, content_memo=0)

_TOPIC_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
_TOPIC_TERM = re.compile(r"[\w./-]{2,}")

#: The words of a message that may join a topic as an alias (``app.core.memory.topics``): case
#: kept, a letter and then two letters or digits at least ("k8s", "Docker"); every message is
#: read once, so nothing is remembered.
TOPIC_WORDS = Tokenizer("topic words", _TOPIC_WORD.findall, memo=0, content_memo=0)

#: The terms of a query that may name a topic (the ``topic`` recall channel): case kept, a path,
#: a version or a dotted name one term ("src/app.py", "py3.11"), as topics are named.
TOPIC_TERMS = Tokenizer("topic terms", _TOPIC_TERM.findall, memo=256, content_memo=0)

_SPACED = re.compile(r"\S+")


def _spaced_rule(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(m.span() for m in _SPACED.finditer(text))


@functools.lru_cache(maxsize=64)
def spaced_spans(text: str) -> tuple[tuple[int, int], ...]:
    """The character spans of ``text``'s white-space words, what a reader counts as words: an
    input too long for the prompt is counted and cut by them (``app.core.context.input_fit``).
    Remembered for the last 64 texts (such inputs are long and few); ``_spaced_rule`` splits."""
    return _spaced_rule(text)
