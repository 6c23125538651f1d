"""The input's place in the prompt: its charge against the context budget, and its shortening.

A prompt is the chat template, the compiled context (the system message) and the input (the
user message); with the answer reserve it must fit the model's context. ``charge_input`` says
how much of the context budget the input takes: nothing while everything fits (the normal
case), else the context gives way down to a floor, and an input still too long for what remains
is shortened by ``shorten``, a deterministic extractive selection: the head, the tail and, in
between, the sentences most related to the rest of the text, in their original order, with a
marker where words were cut. The full text stays the stored input message (the evidence); the
record says which character spans were kept and which were cut. Pure functions, no stores.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from app.core.text.sentences import sentence_ends
from app.core.text.words import content_stems, spaced_spans

Count = Callable[[str], int]


class ShortenPolicy(BaseModel):
    """How a long input is shortened: the shares of the target kept from each end (the rest
    goes to the most related sentences) and the longest unit a sentence may be."""

    head_share: float = 0.3
    tail_share: float = 0.2
    max_unit_words: int = 40  # longer "sentences" (code, lists, no punctuation) are cut into pieces


DEFAULT_SHORTEN = ShortenPolicy()


class Shortened(BaseModel):
    """A shortened input: the text sent and what was kept and cut of the original."""

    text: str  # what the model is sent, with a marker at every cut
    tokens: int  # the full input, by the active counter
    kept_tokens: int  # ``text``, by the same counter
    units: int  # sentences (and pieces of long ones) of the full input
    head: int  # units kept from the start
    tail: int  # units kept from the end
    related: list[int] = Field(default_factory=list)  # indices of the other units kept
    kept: list[str] = Field(default_factory=list)  # selectors of the kept spans ("chars:a-b")
    cut: list[str] = Field(default_factory=list)  # selectors of the cut spans
    cut_words: int = 0

    def selector(self) -> str:
        """The kept spans as one selector of the input evidence ("chars:a-b,c-d")."""
        return "chars:" + ",".join(s.removeprefix("chars:") for s in self.kept)


class InputCharge(BaseModel):
    """How the input was charged against the prompt (recorded with every build)."""

    tokens: int  # the input as written, by the active counter
    template: int  # the chat template's own tokens (system and user message, answer cue)
    limit: int  # context size − answer reserve: what the whole prompt may take
    charged: int = 0  # tokens the context budget gave up to the input (0 when it fits)
    shortened: Shortened | None = None  # set when the input itself had to be cut


@dataclass(frozen=True)
class Room:
    """The split of the prompt's room between the compiled context and the input."""

    budget: int  # the context budget before the charge (at most the room there is)
    context_budget: int
    input_room: int
    charged: int
    floor: int


def charge_input(*, budget: int, limit: int, template: int, input_tokens: int, floor_share: float = 0.25) -> Room:
    """Charge the input against the context ``budget`` within ``limit`` (context − answer reserve).

    Only what overflows is charged: while template + budget + input fit, the budget is untouched.
    Else the budget gives way, but not below ``floor_share`` of itself (the instruction, the
    branch and the best evidence still need room); an input longer than what is left then has
    to be shortened to ``input_room``.
    """
    avail = max(0, limit - template)
    budget = max(0, min(budget, avail))
    floor = min(budget, math.floor(budget * floor_share))
    if budget + input_tokens <= avail:
        return Room(budget=budget, context_budget=budget, input_room=avail - budget, charged=0, floor=floor)
    context_budget = max(floor, avail - input_tokens)
    return Room(budget=budget, context_budget=context_budget, input_room=avail - context_budget, charged=budget - context_budget,
                floor=floor)


# --------------------------------------------------------------------------- extractive shortening


def units(text: str, max_words: int = DEFAULT_SHORTEN.max_unit_words) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (lines and sentence ends split; a unit of
    more than ``max_words`` words is cut into pieces of that many), whitespace trimmed."""
    words = spaced_spans(text)  # no word crosses a sentence end: white space or a line break ends it
    spans: list[tuple[int, int]] = []
    first = 0
    for end in sentence_ends(text):
        first = _add_unit(words, first, end, max_words, spans)
    _add_unit(words, first, len(text), max_words, spans)
    return spans


def _add_unit(words: Sequence[tuple[int, int]], first: int, end: int, max_words: int,
              out: list[tuple[int, int]]) -> int:
    """Add the unit of the words from ``words[first]`` up to ``end``; return the next word's index."""
    last = first
    while last < len(words) and words[last][0] < end:
        last += 1
    sentence = words[first:last]
    for i in range(0, len(sentence), max(1, max_words)):
        piece = sentence[i:i + max_words]
        out.append((piece[0][0], piece[-1][1]))
    return last


def _words_in(words: Sequence[tuple[int, int]], start: int, end: int) -> int:
    """How many of the word spans ``words`` lie in ``start``..``end`` (a unit's or a run's bounds)."""
    return bisect.bisect_left(words, end, key=_start) - bisect.bisect_left(words, start, key=_start)


def _start(span: tuple[int, int]) -> int:
    return span[0]


def relatedness(texts: Sequence[str]) -> list[float]:
    """For each text, the cosine between its content words and those of all the others
    (tf-idf over the texts): how much it shares with the rest. Rounded, so ties are exact."""
    terms = [sorted(set(content_stems(t))) for t in texts]
    n = len(texts)
    df: dict[str, int] = {}
    for ts in terms:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    idf2 = {t: (1.0 + math.log(n / d)) ** 2 for t, d in df.items()}
    whole = sum(d * d * idf2[t] for t, d in sorted(df.items()))  # |Σ all vectors|²
    out: list[float] = []
    for ts in terms:
        if not ts:
            out.append(0.0)
            continue
        dot = sum((df[t] - 1) * idf2[t] for t in ts)
        own = sum(idf2[t] for t in ts)
        rest = whole - sum((2 * df[t] - 1) * idf2[t] for t in ts)
        out.append(round(dot / math.sqrt(own * rest), 9) if dot > 0 and rest > 0 else 0.0)
    return out


def _marker(words: int) -> str:
    return f"[… {words} words cut …]"


def render(text: str, spans: Sequence[tuple[int, int]], kept: Sequence[int]) -> tuple[str, list[str], list[str], int]:
    """The kept units in order, runs of neighbours joined as written, a marker at each cut;
    with the selectors of the kept and the cut spans and the number of words cut."""
    chosen = set(kept)
    parts: list[str] = []
    kept_sel: list[str] = []
    cut_sel: list[str] = []
    cut_words = 0
    i = 0
    while i < len(spans):
        j = i
        while j + 1 < len(spans) and ((j + 1) in chosen) == (i in chosen):
            j += 1
        a, b = spans[i][0], spans[j][1]
        if i in chosen:
            parts.append(text[a:b])
            kept_sel.append(f"chars:{a}-{b}")
        else:
            words = sum(_words_in(spaced_spans(text), s, e) for s, e in spans[i:j + 1])
            parts.append(_marker(words))
            cut_sel.append(f"chars:{a}-{b}")
            cut_words += words
        i = j + 1
    return "\n".join(parts), kept_sel, cut_sel, cut_words


def shorten(text: str, max_tokens: int, count: Count, policy: ShortenPolicy = DEFAULT_SHORTEN) -> Shortened:
    """Shorten ``text`` to at most ``max_tokens`` (by ``count``): its head, its tail and the
    sentences most related to the rest, in order. Deterministic: same text, target and counter,
    same result."""
    spans = units(text, policy.max_unit_words)
    pieces = [text[a:b] for a, b in spans]
    marker = count(_marker(len(spaced_spans(text)))) + 1  # a marker and its line break
    kept = _selection_order(pieces, [count(p) for p in pieces], max_tokens, marker, policy)
    while True:
        out, kept_sel, cut_sel, cut_words = render(text, spans, kept)
        used = count(out)
        if used <= max_tokens or not kept:
            break
        kept.pop()  # the last chosen goes first: related units, then the tail's inner end, then the head's
    if not kept:  # not even the first sentence fits: as many of its leading words as do
        out, kept_sel, cut_sel, cut_words, used = _leading_words(text, max_tokens, count)
    n, taken = len(spans), set(kept)
    head = next((i for i in range(n) if i not in taken), n)
    tail = min(next((k for k in range(n) if n - 1 - k not in taken), n), n - head)
    related = sorted(i for i in taken if head <= i < n - tail)
    return Shortened(text=out, tokens=count(text), kept_tokens=used, units=n, head=head, tail=tail,
                     related=related, kept=kept_sel, cut=cut_sel, cut_words=cut_words)


def _selection_order(pieces: Sequence[str], cost: Sequence[int], target: int, marker: int,
                     policy: ShortenPolicy) -> list[int]:
    """Units in the order they are chosen: the head up to its share, the tail up to its share
    (from the last unit inwards), then the middle by relatedness while the estimate fits
    (``marker`` is the cost of one cut's marker)."""
    n = len(pieces)
    chosen: list[int] = []
    used = 0
    for i in range(n):
        if used + cost[i] + marker > target or (chosen and used + cost[i] > target * policy.head_share):
            break
        chosen.append(i)
        used += cost[i]
    head = len(chosen)
    for i in range(n - 1, head - 1, -1):
        if used + cost[i] + marker > target or (len(chosen) > head and used + cost[i] > target * (policy.head_share + policy.tail_share)):
            break
        chosen.append(i)
        used += cost[i]
    tail = len(chosen) - head
    scores = relatedness(pieces)
    gaps = 1 if len(chosen) < n else 0
    taken = set(chosen)
    for i in sorted(range(head, n - tail), key=lambda k: (-scores[k], k)):
        # between two kept units it closes a cut; beside one it shrinks a cut; alone it splits one
        extra = (1 if i - 1 not in taken and i + 1 not in taken else 0) - (1 if i - 1 in taken and i + 1 in taken else 0)
        if used + cost[i] + (gaps + extra) * marker <= target:
            chosen.append(i)
            taken.add(i)
            used += cost[i]
            gaps += extra
    return chosen


def _leading_words(text: str, max_tokens: int, count: Count) -> tuple[str, list[str], list[str], int, int]:
    """The longest run of leading words that fits with its marker (binary search on the count)."""
    words = spaced_spans(text)
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:words[mid - 1][1]] + "\n" + _marker(len(words) - mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    end = words[lo - 1][1] if lo else 0
    out = (text[:end] + "\n" if lo else "") + _marker(len(words) - lo)
    start = words[lo][0] if lo < len(words) else len(text)
    kept = [f"chars:0-{end}"] if lo else []
    return out, kept, [f"chars:{start}-{len(text)}"], len(words) - lo, count(out)
