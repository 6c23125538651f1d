"""Summaries at three levels: the extractive summarizer, identifiers, and temporal compression.

Pure functions over turns (seed 004 §4.3, DESIGN.md §4 "Summary"). A summary keeps the
identifiers of the turns it covers verbatim — names, numbers, dates, file paths and code names —
because those are what a later question asks for and what a paraphrase loses (seed 003 §4, the
restorable breadcrumbs: a dropped detail is reached again through the turns a summary covers).

- ``identifiers(text)``: the verbatim tokens a summary should keep.
- ``extractive(turns, level)``: sentences chosen by salience (identifiers, decisions, rare words),
  kept word for word under the speaker who said them. ``brief`` is one or two sentences,
  ``standard`` a paragraph, ``detailed`` covers most identifiers (a greedy cover, best
  identifiers per word first). Sizes and identifier coverage grow from brief to detailed.
- ``anchored_brief``: the brief of a subject updated from the previous brief and the new part's.
- ``compose(parts, level)``: temporal compression — the newest parts at the level asked for,
  older ones one level coarser, the oldest at brief.
- ``model_valid``: whether a model's summary may replace the extractive one (it must keep the
  identifiers the extractive one keeps, nearly as well).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.core.text.sentences import split_before_capitals
from app.core.text.words import SUMMARY

Level = Literal["brief", "standard", "detailed"]
LEVELS: tuple[Level, ...] = ("brief", "standard", "detailed")
COARSER: dict[str, Level] = {"detailed": "standard", "standard": "brief", "brief": "brief"}

BRIEF_SENTENCES = 2
STANDARD_WORDS = (60, 140)  # a paragraph: a fifth of the turns' words, at least 60 (a third of short turns), at most 140
DETAILED_COVER = 0.9  # identifiers a detailed summary covers before it stops adding sentences
DETAILED_SHARE = (0.35, 0.55)  # ... and at least the first share of the turns' words, at most the second
RECENT_PARTS = 2  # parts at the level asked for; the next 2×RECENT_PARTS one level coarser; older at brief

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_IDENT = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?)?\b"  # ISO dates and times
    rf"|\b\d{{1,2}}\s+(?:{_MONTHS})\b(?:,?\s+\d{{4}})?"  # 7 May 2023
    rf"|\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?"  # May 7, 2023
    r"|(?:~|\.{1,2})?(?:[\w.-]+/)+[\w.-]+"  # paths: src/app.py, ./run.sh
    r"|\b[\w-]+\.(?:py|md|json|jsonl|txt|toml|yaml|yml|csv|js|ts|rs|go|c|h|cpp|sh|html|css|sql|gguf|lock)\b"
    r"|\b[a-z]+(?:_[a-z0-9]+)+\b|\b[a-z]+[A-Z]\w*\b"  # snake_case, camelCase
    r"|\$?\d+(?:[.,:]\d+)*%?"  # numbers, money, times, versions
    r"|\b[A-Z][\w'&-]*(?:\s+[A-Z][\w'&-]*)*"  # capitalised names (runs of them: "New York")
)
#: Capitalised words that name nothing (sentence openers, pronouns, weekdays are dates).
_COMMON = frozenset("""A An The I I'm I've I'd I'll Im Ive It It's Its He She We They You Your My Our His Her Their
This That These Those There Here Then Now So And But Or If When What Why How Who Where Which Yes No Not Oh Ok
Okay OK Hey Hi Hello Wow Thanks Thank Sure Well Also Just Maybe Really Great Good Nice Cool Yeah Yep Let Let's
Me Do Does Did Is Are Was Were Be Been Have Has Had Can Could Would Should Will Shall May Might Must As At By
For From In Into Of On To With Without After Before Since Until While Because Though Although Still Even
Totally Absolutely Definitely Awesome Amazing Sounds Glad Sorry Happy Please Love Haha Lol That's It'll
What's Don't Didn't Can't Won't Isn't There's Here's You're We're They're Wasn't Aren't""".split())
_DECISION = re.compile(r"\b(decided?|decision|agreed?|chose|choose|will|going to|plan(?:ned|s)?|must|never|always|"
                       r"deadline|due|finished|completed|started|bought|moved|won|lost|because)\b", re.I)


@dataclass(frozen=True, slots=True)
class SummaryTurn:
    """One message a summary may cover: its id, its position in the session, who said it."""

    message_id: str
    index: int
    speaker: str
    text: str
    at: str = ""


@dataclass(frozen=True, slots=True)
class _Sentence:
    pos: int  # order in the turns
    speaker: str
    text: str
    idents: frozenset[str]
    words: int


_OPENER = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[\"'(\[])$")


def identifiers(text: str, context: str | None = None) -> set[str]:
    """The verbatim identifiers of ``text``: dates, paths, file and code names, numbers, names.

    A capitalised word that opens a sentence is a name only when ``context`` (``text`` itself by
    default: the turns a summary covers) also writes it capitalised inside a sentence, or it is
    written in capitals ("LGBTQ"): "Painting looks great" names nothing.
    """
    named = _mid_names(text if context is None else context)
    out: set[str] = set()
    for match in _IDENT.finditer(text):
        token = match.group(0).strip(" .,;:'\"")
        if not token:
            continue
        if token[0].isupper():
            parts = [w for w in token.split() if w not in _COMMON and w.rstrip("'s") not in _COMMON]
            if parts and parts[0] == token.split()[0] and _OPENER.search(text[:match.start()]) \
                    and not _named(parts[0], named):
                parts = parts[1:]
            token = " ".join(parts)
            if len(token) < 2:
                continue
        out.add(token)
    return out


def _mid_names(text: str) -> set[str]:
    """Capitalised words written inside a sentence (not opening one) in ``text``."""
    return {m.group(1) for m in re.finditer(r"(?<=[\w,] )([A-Z][\w'&-]*)", text)}


def _named(word: str, named: set[str]) -> bool:
    return word in named or (word.isupper() and len(word) > 1) or any(c.isdigit() for c in word)


def contains(summary: str, ident: str) -> bool:
    """Whether ``summary`` keeps ``ident`` verbatim (as a whole token)."""
    return re.search(rf"(?<![\w]){re.escape(ident)}(?![\w])", summary) is not None


def turn_identifiers(turns: Sequence[SummaryTurn]) -> set[str]:
    """The identifiers of ``turns`` (names judged against all of them) and the speakers' names."""
    context = "\n".join(t.text for t in turns)
    return set().union(*(identifiers(t.text, context) for t in turns)) | {t.speaker for t in turns if t.speaker}


def retention(summary: str, turns: Sequence[SummaryTurn]) -> float:
    """Share of the turns' identifiers (speakers' names included) the summary keeps verbatim (1.0: none to keep)."""
    wanted = turn_identifiers(turns)
    if not wanted:
        return 1.0
    return sum(1 for i in wanted if contains(summary, i)) / len(wanted)


def words(text: str) -> int:
    """How many words ``text`` has (``SUMMARY``'s: hyphenated and apostrophe words whole)."""
    return len(SUMMARY.words(text))


def _sentences(turns: Sequence[SummaryTurn]) -> list[_Sentence]:
    context = "\n".join(t.text for t in turns)
    out: list[_Sentence] = []
    for turn in turns:
        for piece in split_before_capitals(turn.text):
            piece = " ".join(piece.split())
            idents = frozenset(identifiers(piece, context))
            if words(piece) < 2 and not idents:
                continue
            out.append(_Sentence(len(out), turn.speaker, piece, idents, max(1, words(piece))))
    return out


def _salience(sentences: Sequence[_Sentence]) -> dict[int, float]:
    """Score each sentence: identifiers it holds (rare ones more), a decision's words, rare words; per word^0.5."""
    df = Counter(w.lower() for s in sentences for w in set(SUMMARY.words(s.text)))
    idf = Counter({w: math.log((1 + len(sentences)) / (1 + n)) for w, n in df.items()})
    ident_df = Counter(i for s in sentences for i in s.idents)
    scores: dict[int, float] = {}
    for s in sentences:
        terms = {w.lower() for w in SUMMARY.words(s.text) if len(w) > 3}
        score = sum(idf[w] for w in terms) / 4
        score += sum(1.0 + 1.0 / ident_df[i] for i in s.idents)
        decision = _DECISION.search(s.text) is not None
        score += 1.5 if decision else 0.0
        score *= 1.0 if decision or s.idents else 0.5  # neither a fact nor a decision: small talk
        scores[s.pos] = score / math.sqrt(s.words) * min(1.0, s.words / 6)  # "Thanks, Mel!" says little
    return scores


def _render(chosen: Iterable[_Sentence]) -> str:
    """The chosen sentences in their order, each run of one speaker's under the speaker's name."""
    lines: list[str] = []
    last = None
    for s in sorted(chosen, key=lambda s: s.pos):
        if s.speaker != last or not lines:
            lines.append(f"{s.speaker}: {s.text}" if s.speaker else s.text)
        else:
            lines[-1] += " " + s.text
        last = s.speaker
    return "\n".join(lines)


def extractive(turns: Sequence[SummaryTurn], level: str) -> str:
    """The level's summary of ``turns`` made of their own sentences (see the module docstring).
    Each level holds the sentences of the level below and adds to them."""
    sentences = _sentences(turns)
    if not sentences:
        return ""
    score = _salience(sentences)
    total = sum(s.words for s in sentences)
    # brief: two whole statements (salience per sentence, not per word)
    whole = sorted(sentences, key=lambda s: (-score[s.pos] * math.sqrt(min(s.words, 30)), s.pos))
    chosen = whole[:BRIEF_SENTENCES]
    if level == "brief":
        return _render(chosen)
    cap = sum(s.words for s in chosen) + min(STANDARD_WORDS[1], max(total // 5, min(STANDARD_WORDS[0], total // 3)))
    used = sum(s.words for s in chosen)
    for s in sorted(sentences, key=lambda s: (-score[s.pos], s.pos)):
        if s not in chosen and used + s.words <= cap:
            chosen.append(s)
            used += s.words
    if level == "standard":
        return _render(chosen)
    return _render(_cover(sentences, score, total, chosen))


def _cover(sentences: Sequence[_Sentence], score: dict[int, float], total: int,
           start: Sequence[_Sentence]) -> list[_Sentence]:
    """A detailed summary's sentences: ``start`` and a greedy cover of the identifiers (most new
    ones per word first, salience breaking ties) until ``DETAILED_COVER`` of them and the least
    share of the words, never past the largest share."""
    wanted = set().union(*(s.idents for s in sentences)) | {s.speaker for s in sentences if s.speaker}
    chosen = list(start)
    have = set().union(*(s.idents | {s.speaker} for s in chosen)) if chosen else set()
    used = sum(s.words for s in chosen)
    left = [s for s in sentences if s not in chosen]
    while left:
        gain = {s.pos: sum(_weight(i) for i in s.idents - have) + (1 if s.speaker not in have else 0) for s in left}
        best = max(left, key=lambda s: (gain[s.pos] / math.sqrt(s.words) + 0.2 * score[s.pos], -s.pos))
        covered = len(have & wanted) / len(wanted) if wanted else 1.0
        hard = any(_weight(i) == 2 for i in wanted - have)  # a path, date or number still missing
        if (covered >= DETAILED_COVER and not hard or gain[best.pos] == 0) and used >= total * DETAILED_SHARE[0]:
            break
        if used + best.words > total * DETAILED_SHARE[1] and len(chosen) > len(start):
            break
        chosen.append(best)
        used += best.words
        have |= best.idents | {best.speaker}
        left.remove(best)
    return chosen


def _weight(ident: str) -> int:
    """A path, a date, a number or a code name weighs twice a name in the cover: it is what a
    later question cannot get back from anything but the words themselves."""
    return 2 if any(c.isdigit() or c in "/._" for c in ident) else 1


def anchored_brief(previous: str, new: str) -> str:
    """A subject's brief after an update: the two most salient of the previous brief's sentences
    and the new part's brief (the newer wins a tie), in their order."""
    turns = [SummaryTurn("prev", 0, "", previous), SummaryTurn("new", 1, "", new)] if previous else \
        [SummaryTurn("new", 1, "", new)]
    sentences = _sentences(turns)
    if len(sentences) <= BRIEF_SENTENCES:
        return " ".join(s.text for s in sentences)
    score = _salience(sentences)
    ranked = sorted(sentences, key=lambda s: (-score[s.pos] - 0.1 * s.pos, -s.pos))
    return " ".join(s.text for s in sorted(ranked[:BRIEF_SENTENCES], key=lambda s: s.pos))


def part_level(age: int, level: str) -> str:
    """The level a part ``age`` updates old is shown at in a summary of ``level`` (0: the newest)."""
    shown = level
    if age >= RECENT_PARTS:
        shown = COARSER[shown]
    if age >= RECENT_PARTS * 3:
        shown = COARSER[shown]
    return shown


def composed_lines(parts: Sequence[dict[str, str]], level: str) -> list[str]:
    """The lines of ``compose``: each part's text at the level its age shows it at (empty ones left out)."""
    n = len(parts)
    texts = [part.get(part_level(n - 1 - k, level), "") for k, part in enumerate(parts)]
    return [t for t in texts if t]


def compose(parts: Sequence[dict[str, str]], level: str) -> str:
    """A subject's summary from its parts (oldest first, each a text per level), older parts
    coarser (temporal compression); empty texts are left out."""
    return "\n".join(composed_lines(parts, level))


def model_valid(text: str, turns: Sequence[SummaryTurn], level: str, reference: str) -> bool:
    """A model's summary may stand for the extractive ``reference`` when it says something, is
    not longer than the turns, and keeps at least 80 % of the identifiers the reference keeps."""
    if not text.strip() or words(text) > max(20, sum(words(t.text) for t in turns)):
        return False
    if level == "brief" and words(text) > 80:
        return False
    keep = [i for i in turn_identifiers(turns) if contains(reference, i)]
    if not keep:
        return True
    return sum(1 for i in keep if contains(text, i)) >= 0.8 * len(keep)
