"""Deterministic texts for tests: long, varied prose for inputs longer than the model's context, and
a decision log whose every message names a file, a version and a date (what summaries keep)."""

from __future__ import annotations

import random

_SUBJECTS = ["The warehouse team", "Our supplier in Lyon", "The night shift", "The finance office", "The new forklift",
             "The loading dock", "The inventory system", "The safety inspector", "The regional manager", "The courier"]
_VERBS = ["reported", "asked about", "delayed", "approved", "questioned", "scheduled", "reviewed", "cancelled",
          "moved", "documented"]
_OBJECTS = ["the pallet audit", "the cold storage upgrade", "the Friday shipment", "the overtime budget",
            "the barcode scanners", "the fire drill", "the return policy", "the spring stock count",
            "the damaged crates", "the holiday rota"]
_TAILS = ["after the meeting on Tuesday", "because the numbers did not match", "without telling the drivers",
          "so that the trucks can leave earlier", "once the new racks arrive", "before the end of the quarter",
          "which surprised everyone", "as the contract requires", "despite the heavy rain", "for the third time"]


def long_paste(words: int = 3000, *, seed: int = 7) -> str:
    """A report of about ``words`` words in paragraphs of sentences, ending with a question."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    count = 0
    while count < words:
        sentences = []
        for _ in range(rng.randint(3, 6)):
            sentence = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
            sentences.append(sentence)
            count += len(sentence.split())
        paragraphs.append(" ".join(sentences))
    body = "\n\n".join(paragraphs)
    return "Here is the warehouse report for this month.\n\n" + body + "\n\nWhat should we fix first?"


def step_history(n: int, start: int = 0) -> list:
    """``n`` messages (from step ``start``) of one conversation between Ana and Bo, each naming a file,
    a version and a date: a long branch whose summaries must keep those identifiers."""
    from app.core.types import Author, AuthorKind, Message, Role

    out = []
    for k in range(start, start + n):
        who = "Ana" if k % 2 == 0 else "Bo"
        text = (f"Step {k}: we decided to keep the parser in src/step_{k}.py and ship version 1.{k} "
                f"on 2024-03-{k % 28 + 1:02d}. The weather was fine.")
        out.append(Message(role=Role.USER, author=Author(kind=AuthorKind.USER, id=who, name=who), content=text,
                           at=f"2024-03-01T10:{k // 60:02d}:{k % 60:02d}Z"))
    return out
