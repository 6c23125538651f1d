"""Conflict exposure (seed 000 §8.2): when a fact changed over time, does the context say so?

The set is generated here, deterministically (scripted sessions, not drawn from LoCoMo: its
conversations state few facts that later change, and none of them in one checkable form). Each
item is a session of its own: the user states a fact ("My dentist appointment is on April 3."),
small talk follows over several days, the user changes it ("Update: my dentist appointment is now
on April 10.") — a third of the items change it twice —, more small talk, then the question ("When
is my dentist appointment?"). The amount of small talk before and after the change varies, so that
recency alone holds the change at some budgets and not at others.

A context is then classified (``exposure``) by what it shows of the item's values, the current one
(the last stated) and its predecessor:

- ``exposed``: both, with their order stated — a line holding both (a conflict line), the
  predecessor marked as no longer true (``until …``, ``no longer``, ``previously``), or each on a
  dated line (the line, or the day label its block opens with, holds a date);
- ``unordered``: both, with nothing to tell which is current (the model must guess);
- ``current``: the current value only (right, but the change is silent);
- ``stale``: an earlier value without the current one (the context misleads);
- ``neither``.

The conflict-exposure rate is the share of ``exposed``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: (fact subject, question, values in the order they are stated: the last is current)
SUBJECTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("dentist appointment", "When is my dentist appointment?", ("on April 3", "on April 10", "on April 17")),
    ("project deadline", "What is my project deadline?", ("March 14", "March 21")),
    ("travel budget", "What is my travel budget?", ("1500 euros", "1800 euros")),
    ("office room", "Which is my office room?", ("room B204", "room C310", "room A115")),
    ("phone number", "What is my phone number?", ("0612 448 219", "0687 112 905")),
    ("team lead", "Who is my team lead?", ("Marta Kowalski", "Jonas Berg")),
    ("wifi password", "What is my wifi password?", ("blue-otter-42", "green-falcon-17", "red-heron-88")),
    ("train", "When does my train leave?", ("at 08:15", "at 07:40")),
    ("gym class", "When is my gym class?", ("on Tuesday evenings", "on Thursday mornings")),
    ("hotel", "Which is my hotel?", ("Hotel Aurora", "Hotel Miramar", "Hotel Belvedere")),
    ("car", "What is my car?", ("a grey Skoda Octavia", "a red Mazda 3")),
    ("favourite editor", "What is my favourite editor?", ("Vim", "Emacs")),
    ("database version", "What is my database version?", ("Postgres 14", "Postgres 16", "Postgres 17")),
    ("meeting room", "Which is my meeting room?", ("Orion", "Vega")),
    ("landlord", "Who is my landlord?", ("Mr Petrov", "Mrs Osei")),
    ("doctor", "Who is my doctor?", ("Dr Alvarez", "Dr Lindqvist", "Dr Moreau")),
    ("bank", "Which is my bank?", ("Nordbank", "Unibank")),
    ("flight number", "What is my flight number?", ("LX 318", "LX 1612")),
    ("language course", "What is my language course?", ("Spanish A2", "Spanish B1", "Spanish B2")),
    ("salary", "What is my salary?", ("52000 a year", "56000 a year")),
    ("bike lock code", "What is my bike lock code?", ("4471", "9025")),
    ("laptop", "What is my laptop?", ("a ThinkPad X1", "a MacBook Air", "a Framework 13")),
    ("dog sitter", "Who is my dog sitter?", ("Priya", "Lena")),
    ("parking spot", "Which is my parking spot?", ("P17", "P42")),
)
_SMALL_TALK = (
    "I watched a documentary about whales last night.", "The weather was rainy all weekend.",
    "I tried a new pasta recipe with basil and lemon.", "My cat knocked over the plant again.",
    "We talked about the football match at lunch.", "I am reading a novel about sailors in the Arctic.",
    "The neighbours are painting their fence green.", "I finally fixed the squeaky kitchen door.",
    "There was a long queue at the bakery this morning.", "I went for a run along the river.",
    "My sister sent photos from her trip to the mountains.", "The new coffee machine makes too much noise.",
    "I spent the evening sorting old photographs.", "We played a board game until midnight.",
    "The bus was late again because of road works.", "I bought a new pair of hiking boots.",
    "The garden tomatoes are finally turning red.", "I listened to a podcast about ancient Rome.",
    "Our street had a power cut for an hour.", "I cleaned the windows before the guests came.",
)
_REPLIES = ("That sounds nice.", "Good to hear.", "Oh, I see.", "Interesting!", "Thanks for telling me.")
_CHANGES = ("Update: my {key} is now {value}.", "Change of plan: my {key} is now {value}.")
#: Small-talk exchanges (before the first change, after the last) by item, cycled: short to long.
_SPANS = ((3, 2), (10, 6), (24, 12), (40, 24))
OUTCOMES = ("exposed", "unordered", "current", "stale", "neither")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_DAY_LABEL = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\b[^\n]{0,40}:\s*$")
_MARKED = re.compile(r"\b(?:until|no longer|previously|formerly|was changed|superseded)\b", re.IGNORECASE)


@dataclass(frozen=True)
class ConflictItem:
    """One scripted session: its messages (id, role, text, at), the fact's values in the order
    stated, the question and when it is asked."""

    item_id: str
    key: str
    question: str
    values: tuple[str, ...]
    messages: tuple[Mapping[str, str], ...]
    at: str


def conflict_set(n: int = len(SUBJECTS), seed: int = 0) -> list[ConflictItem]:
    """``n`` items (at most one per subject), the same ones for the same ``seed``."""
    items = []
    for k, (key, question, values) in enumerate(SUBJECTS[:n]):
        rng = random.Random(f"{seed}:{key}")
        before, after = _SPANS[k % len(_SPANS)]
        script: list[tuple[str, str]] = [("user", f"My {key} is {values[0]}."), ("assistant", "Noted.")]
        for n_change, value in enumerate(values[1:]):
            script += _small_talk(rng, before if n_change == 0 else max(2, after // 2))
            script += [("user", rng.choice(_CHANGES).format(key=key, value=value)), ("assistant", "Noted, thanks.")]
        script += _small_talk(rng, after)
        messages = tuple({"id": f"c{k}:{i}", "role": role, "text": text, "at": _at(i)} for i, (role, text) in enumerate(script))
        items.append(ConflictItem(f"c{k}", key, question, values, messages, _at(len(script) + 8)))
    return items


def _small_talk(rng: random.Random, exchanges: int) -> list[tuple[str, str]]:
    return [pair for _ in range(exchanges) for pair in (("user", rng.choice(_SMALL_TALK)), ("assistant", rng.choice(_REPLIES)))]


def _at(i: int) -> str:
    """Message ``i``'s time: eight messages a day from 1 March 2024, a minute apart."""
    day, minute = divmod(i, 8)
    return f"2024-{3 + day // 28:02d}-{1 + day % 28:02d}T10:{minute:02d}:00"


def _holds(line: str, value: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", line, re.IGNORECASE) is not None


def _dated_lines(blocks: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    """Every line of the context with whether it is dated (it holds a date, or the day label of
    its block above it does)."""
    out: list[tuple[str, bool]] = []
    for block in blocks:
        label = False
        for line in str(block.get("content", "")).split("\n"):
            if _DAY_LABEL.match(line):
                label = True
            out.append((line, label or bool(_DATE.search(line))))
    return out


def exposure(blocks: Sequence[Mapping[str, Any]], values: Sequence[str]) -> str:
    """How a context (its blocks' contents) shows a fact stated as ``values`` over time (module doc)."""
    lines = _dated_lines(blocks)
    current, previous, older = values[-1], values[-2], values[:-1]
    cur = [(line, dated) for line, dated in lines if _holds(line, current)]
    prev = [(line, dated) for line, dated in lines if _holds(line, previous)]
    if cur and prev:
        together = any(_holds(line, current) for line, _ in prev)
        marked = any(_MARKED.search(line) for line, _ in prev)
        dated = any(d for _, d in cur) and any(d for _, d in prev)
        return "exposed" if together or marked or dated else "unordered"
    if cur:
        return "current"
    if any(_holds(line, v) for line, _ in lines for v in older):
        return "stale"
    return "neither"
