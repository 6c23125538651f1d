"""A question that joins several facts, split into its parts (seed 001 §2.2: query decomposition).

Rules first (``decompose``); the chat model's split is used only when the rules find none and it
passes a check (``checked_model_parts``). The parts become the intent's ``sub_questions``; recall
retrieves for each on its own (``app.core.context.parts``) and the gate says which stay uncovered.

The rules, tried in order (the first that applies wins):

- several questions in one input, or "…, and what …?" (``split_sub_questions``). A piece without
  a content word of its own ("Which database did we pick and when?" → "when?") asks about the
  part before it and stays with it: alone it retrieves nothing, and the gate would note it
  uncovered beside the evidence that answers it;
- two people asked about together: "What do Jon and Gina both have in common?" → one part per
  person ("What do Jon have?" reads badly and retrieves well: the words are the question's);
- a time between two events: "How many weeks passed between Maria adopting Coco and Shadow?" →
  the events as written, the second sharing the first's head: "Maria adopting Coco", "Maria
  adopting Shadow";
- something before or after an event: "What did Caroline do after the adoption meeting?" → "What
  did Caroline do?" and "When was the adoption meeting?", with the relation ("after") kept: the
  first part is asked about the time after the second part's event (the last part). "since"
  reads as "after", "until" as "before". A date is no event ("the week before August 3, 2023"
  is the plan's date range).

``restate`` puts a question as the statement that would answer it, the reformulation the
retrieval loop searches with when a part stayed uncovered.

Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core.text.sentences import split_sub_questions
from app.core.text.times import first_mention
from app.core.text.words import content_stems

MAX_PARTS = 4
#: The intent's plan hint that carries the relation (``Intent.hint(TIME_RELATION)``: "before" | "after").
TIME_RELATION = "time_relation"
_QUESTION_START = re.compile(r"^\W*(?:what|when|where|who|whom|whose|which|why|how|is|are|was|were|do|does|did|"
                             r"has|have|had|can|could|will|would|should|in\s+what|in\s+which)\b", re.IGNORECASE)
_NAME = r"[A-Z][a-z]+(?:'s)?"
_PAIR = re.compile(rf"\b(?:both\s+)?(?P<a>{_NAME})\s+and\s+(?P<b>{_NAME})\b")
_TOGETHER = re.compile(r"\b(?:both|in\s+common|each|either)\b", re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\s+(?P<a>[^?]+?)\s+and\s+(?P<b>[^?]+?)\s*\??\s*$", re.IGNORECASE)
_RELATION = re.compile(r"^(?P<main>.+?)\s+(?P<rel>before|after|since|until)\s+(?P<event>[^?]+?)\s*\??\s*$",
                       re.IGNORECASE)
_RELATIONS = {"before": "before", "until": "before", "after": "after", "since": "after"}
_JOINER = re.compile(r"^\W*(?:and|or)\s+", re.IGNORECASE)
_ANY_DAY = datetime(2000, 1, 1)  # a date names itself whatever the moment it is read at


@dataclass(frozen=True)
class Decomposed:
    """The parts of a question (empty: it is one question) and, for "X before/after Y", the
    relation of the first part's time to the event of the last part."""

    parts: tuple[str, ...] = ()
    relation: str = ""  # "" | "before" | "after"


def is_question(text: str) -> bool:
    """Whether ``text`` reads as a question (a question mark, or a question word first)."""
    return "?" in text or _QUESTION_START.match(text) is not None


def _as_question(text: str) -> str:
    text = " ".join(text.split()).replace(" ?", "?").strip().rstrip(".,;")
    return text if text.endswith("?") else text + "?"


def _pair(text: str) -> Decomposed:
    """One part per person when two are asked about together ("both", "in common")."""
    found = _PAIR.search(text)
    if found is None or _TOGETHER.search(text) is None:
        return Decomposed()
    rest = lambda name: _TOGETHER.sub("", text[:found.start()] + name + text[found.end():])  # noqa: E731
    parts = tuple(_as_question(rest(found.group(g))) for g in ("a", "b"))
    return Decomposed(parts) if parts[0] != parts[1] else Decomposed()


def _between(text: str) -> Decomposed:
    """The two events a time between is asked about; "adopting Coco and Shadow" shares its head."""
    found = _BETWEEN.search(text)
    if found is None:
        return Decomposed()
    a, b = found.group("a").strip(), found.group("b").strip()
    if len(b.split()) == 1 and len(a.split()) > 1:
        b = " ".join([*a.split()[:-1], b])
    return Decomposed((a, b)) if content_stems(a) and content_stems(b) else Decomposed()


def _relation(text: str) -> Decomposed:
    """"X before/after Y": the question without the event, and the event's own time."""
    found = _RELATION.search(text)
    if found is None:
        return Decomposed()
    main, event = found.group("main").strip(), found.group("event").strip()
    dated = first_mention(event, _ANY_DAY)
    if (dated is not None and dated.offset == 0) or not content_stems(event) or not content_stems(main):
        return Decomposed()  # "before August 3", "after that": a date or nothing to look up
    return Decomposed((_as_question(main), f"When was {event}?"), _RELATIONS[found.group("rel").lower()])


def _with_fragments_joined(parts: Sequence[str]) -> list[str]:
    """``parts`` with each one that holds no content word ("when?", "and why?") joined to the one
    before it ("Which database did we pick and when?"); one before any other is left out (the
    whole question is still what the first retrieval searches)."""
    out: list[str] = []
    for part in parts:
        if not content_stems(part):
            if out:
                joined = _JOINER.sub("", part)
                out[-1] = f"{out[-1].rstrip('?').rstrip()} and {joined[:1].lower()}{joined[1:]}"
        else:
            out.append(part)
    return out


def decompose(text: str) -> Decomposed:
    """The parts of a question that joins several facts, by the rules (see the module doc)."""
    text = " ".join(text.split())
    if not is_question(text):
        return Decomposed()
    several = _with_fragments_joined(split_sub_questions(text))
    if len(several) >= 2:
        return Decomposed(tuple(several[:MAX_PARTS]))
    for rule in (_pair, _between, _relation):
        found = rule(text)
        if found.parts:
            return found
    return Decomposed()


def checked_model_parts(text: str, parts: Sequence[str]) -> list[str]:
    """The model's parts of ``text`` when they pass the check, else none: two to ``MAX_PARTS``
    distinct parts, none the whole question again, each about the question (at least two thirds
    of its content words are the question's: a part that brings its own subject is a guess),
    together holding at least half of the question's content words."""
    asked = set(content_stems(text))
    clean = list(dict.fromkeys(" ".join(p.split()) for p in parts if p.strip()))
    if not asked or not 2 <= len(clean) <= MAX_PARTS:
        return []
    held: set[str] = set()
    for part in clean:
        words = set(content_stems(part))
        if not words or words == asked or len(words & asked) * 3 < 2 * len(words):
            return []
        held |= words & asked
    return clean if 2 * len(held) >= len(asked) else []


_WH = re.compile(r"^\W*(?:in\s+|on\s+|at\s+)?(?:what|which|who|whom|whose|when|where|why|"
                 r"how(?:\s+(?:many|much|long|often|old))?)\b\s*", re.IGNORECASE)
_AUX = re.compile(r"\b(?:did|does|do|is|are|was|were|has|have|had|can|could|will|would|should)\b\s*",
                  re.IGNORECASE)
_THIRD = re.compile(r"\b(?:her|his)\b", re.IGNORECASE)


def restate(question: str, speakers: Sequence[str] = ()) -> str:
    """``question`` put as the statement that would answer it, for a second retrieval: its
    question word and first auxiliary dropped, and a person it asks about (one of ``speakers``)
    speaking in the first person, as stored turns read ("Speaker: text"): "When did Melanie paint a
    sunrise?" → "Melanie: I paint a sunrise"; "Which database did we pick?" → "database we pick".
    A question's embedding sits nearer the questions asked around an answer than the answer."""
    text = _AUX.sub("", _WH.sub("", question.strip().rstrip("?").strip(), count=1), count=1)
    for name in speakers:
        if re.search(rf"\b{re.escape(name)}\b", text):
            text = re.sub(rf"\b{re.escape(name)}'s\b", "my", text)
            text = _THIRD.sub("my", re.sub(rf"\b{re.escape(name)}\b", "I", text))
            return f"{name}: {' '.join(text.split())}"
    return " ".join(text.split())
