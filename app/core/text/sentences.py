"""Sentences: the ways the house splits a text into sentences, and a question into sub-questions.

Each splitter is the rule its users were built and measured with; they differ in what ends a
sentence and in what they return, and one shared rule would change a memory, a profile rule, a
compressed evidence, a shortened input or a summary. Only the statement splitters of memory
extraction and of the profile were one rule, now ``statements`` with the ends as a parameter.

- ``statements(text, ends)``: the statements of a user's text (memory extraction:
  ``SENTENCE_ENDS``; profile rules, which a semicolon also ends: ``CLAUSE_ENDS``);
- ``piece_spans``: pieces that tile a text, for query-aware compression's ``chars:`` selectors;
- ``asked_share``: how much of a text asks rather than tells, for recall's discount of turns that ask;
- ``sentence_ends``: where a sentence of an input ends, for its shortening;
- ``split_after_stops``: a task's output, for its result summary;
- ``split_before_capitals``: a turn, for the extractive summarizer;
- ``split_sub_questions``: a compound question;
- ``split_actions``: a task's request into the actions it lists, for the rule-made plan of its steps.

Pure and deterministic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

#: What ends a statement of memory extraction (``app.core.memory.extract``): . ! ? or a line break.
SENTENCE_ENDS = ".!?"
#: What ends a profile rule (``app.core.intent.profile``): a semicolon as well ("never X; always Y").
CLAUSE_ENDS = ".!?;"
_STATEMENT = {ends: re.compile(rf"[^{re.escape(ends)}\n]+[{re.escape(ends)}]?") for ends in (SENTENCE_ENDS, CLAUSE_ENDS)}


def statements(text: str, ends: str = SENTENCE_ENDS) -> list[str]:
    """The statements of ``text`` (typographic apostrophes read as ASCII): its pieces up to one of
    ``ends`` (``SENTENCE_ENDS`` or ``CLAUSE_ENDS``) or a line break, stripped, questions left out,
    the end marks removed. A piece of nothing but an end mark gives ""."""
    out: list[str] = []
    marks = ends.replace("?", "")
    for raw in _STATEMENT[ends].findall(text.replace("\u2019", "'")):
        sentence = raw.strip()
        if sentence and not sentence.endswith("?"):
            out.append(sentence.rstrip(marks).strip())
    return out


_PIECE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)\s*")


def piece_spans(text: str) -> list[tuple[int, int]]:
    """The character spans of ``text``'s pieces that hold more than white space: each runs to a
    run of . ! ? or a line break, with the white space after it, so together they tile the text
    (query-aware compression, ``app.core.context.compress``, cites what it keeps by offsets).
    A stop ends a piece wherever it stands ("v1.2" is cut), unlike ``sentence_ends``."""
    return [m.span() for m in _PIECE.finditer(text) if m.group(0).strip()]


_CLOSERS = " \t\n\"'\u201d\u2019)]"


@functools.lru_cache(maxsize=65_536)
def asked_share(text: str) -> float:
    """The share of ``text``'s words that stand in questions (its ``piece_spans`` pieces ending in
    a question mark, before closing quotes or brackets), in [0, 1]: 1.0 for a text that only asks,
    0.0 for one that asks nothing. Remembered: every build asks it of the same turns again."""
    if "?" not in text:  # most texts ask nothing: no need to split them (recall asks it of hundreds)
        return 0.0
    total = asked = 0
    for match in _PIECE.finditer(text):
        piece = match.group(0)
        words = len(piece.split())
        total += words
        if "?" in piece.rstrip(_CLOSERS)[-3:]:
            asked += words
    return asked / total if total else 0.0


_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s)|\n")


def sentence_ends(text: str) -> Iterator[int]:
    """The offsets where the sentences of ``text`` end: after . ! or ? (closing quotes and brackets
    included) where white space follows, and after a line break; a shortened input keeps or cuts
    whole sentences (``app.core.context.input_fit``). "v1.2" and "e.g.," go on. No white-space
    word crosses an end."""
    return (m.end() for m in _SENTENCE_END.finditer(text))


_AFTER_STOP = re.compile(r"(?<=[.!?])\s+")


def split_after_stops(text: str) -> list[str]:
    """``text`` split at the white space after . ! or ?, whatever follows: the sentences of a
    task's output whose first ones become its result summary (``app.core.tasks.stack``)."""
    return _AFTER_STOP.split(text)


_BEFORE_CAPITAL = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")


def split_before_capitals(text: str) -> list[str]:
    """``text`` split at line breaks and at the white space after . ! or ? when a capital or a
    digit comes next (after an opening quote or bracket, if any): the sentences of a turn for the
    extractive summarizer (``app.core.memory.summaries``), where "e.g. the" or "v2. then" is no
    sentence end, as a summary quotes whole sentences."""
    return _BEFORE_CAPITAL.split(text)


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


_LIST_ITEM_RE = re.compile(r"(?:^|\s)(?:\d{1,2}[.)]|[-*\u2022])\s+")
_ACTION_SPLIT_RE = re.compile(r"\s*(?:;|\n|,\s*(?:and\s+)?then\s+|\s+and\s+then\s+|\s+then\s+|,\s*and\s+|,\s+|"
                              r"\s+and\s+|\s+before\s+|\s+after\s+that\s+)\s*", re.IGNORECASE)


def split_actions(text: str) -> list[str]:
    """The parts of a task's request that may each be one action, in order: the items of a
    numbered or bulleted list when it has two or more, else its pieces between ";", line
    breaks, commas, "and", "then" and "before" (the caller keeps those that start with a verb).
    Trailing stops are dropped; empty pieces are left out."""
    items = [p.strip(" .;") for p in _LIST_ITEM_RE.split(text)]
    items = [p for p in items if p]
    if len(_LIST_ITEM_RE.findall(text)) >= 2:
        head = _LIST_ITEM_RE.split(text)[0].strip()
        return items[1:] if head and items and items[0] == head.strip(" .;") else items
    return [p.strip(" .;:") for p in _ACTION_SPLIT_RE.split(text.strip()) if p.strip(" .;:")]
