"""The history section of the prompt: the branch so far, raw and summarized.

For each subject — the anchor, and a node the user focused — the main chain back from it is the
raw window: its turns' messages, nearest turn first in priority (minus excluded ones and those
the user collapsed into the summary: up to index ``through``). Before the window, the branch's
summary (``BranchSummary``: the record the build was offered and the level each part is shown at,
decided by the pipeline from the plan's history policy and the user's progressive detail) gives
one line per part that ends before it, bound to the summary by a ref whose selector is
``turns:a-b`` (the message indexes it covers); a part shown ``RAW`` gives its turns instead, a
``HIDDEN`` one nothing.

Summary lines pass the relevance gate like any candidate: the part just before the window stands
for the branch's continuity (grade 1.0, as the branch's own turns do); an older part must be about
the input by its words (the gate's lexical support against the plan's threshold). In a session of
several conversations every part, the last one too, must hold the input's words as another
conversation's turn must (``other_lex_full``): its branch was grown by routing, and the older
turns a part summarizes may be another conversation's (the gate's ``strict_tree``). They are
packed at low priority, from what the budget leaves once everything else is placed; a part the
user chose to see is neither graded away nor left to what the budget leaves (priority must).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.context.compiler import Item
from app.core.context.gate import GatePolicy, rarity, support
from app.core.text.words import RANKING
from app.core.types import BlockType, Priority, SummaryRecord

if TYPE_CHECKING:
    from app.core.session.state import SessionState

#: A summary part shown as its raw turns, or left out.
RAW, HIDDEN = "raw", "hidden"


@dataclass(frozen=True)
class BranchSummary:
    """A branch's summary as the history section shows it: the record, the level each of its
    parts is shown at (one per part: a level the record holds, ``RAW`` or ``HIDDEN``), and the
    spans of the parts the user chose to see."""

    record: SummaryRecord
    levels: tuple[str, ...]
    chosen: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Subject:
    """A branch the history section shows: from ``node`` back, with its summary (when one was
    offered) and the index up to which its messages are carried by the summary, not raw."""

    node: str
    summary: BranchSummary | None = None
    through: int | None = None


@dataclass(frozen=True)
class History:
    """What the history section shows: its subjects (the anchor first), how many turns of each
    main chain are carried raw, the relevance threshold summary lines are graded against, and the
    messages left out (another version's)."""

    subjects: tuple[Subject, ...] = ()
    chain_turns: int = 0
    threshold: float = 0.0
    excluded: tuple[str, ...] = ()


def span_of(part: Mapping[str, Any]) -> str:
    """The span ``a-b`` of a summary part."""
    return f"{part['first']}-{part['last']}"


def history_items(state: SessionState, history: History, query: str) -> list[Item]:
    """Each subject's raw window and the summary lines before it (one item per id, the first)."""
    items: list[Item] = []
    for subject in history.subjects:
        items += conversation_items(state, subject.node, history.chain_turns, history.excluded, subject.through)
        if subject.summary is not None:
            items += summary_lines(state, subject, subject.summary, history, query)
    first: dict[str, Item] = {}
    for it in items:
        first.setdefault(it.item_id, it)
    return list(first.values())


def conversation_items(state: SessionState, anchor: str, chain_turns: int, excluded: Sequence[str] = (),
                       through: int | None = None) -> list[Item]:
    """The anchor's main chain, nearest turn first in priority (its messages, minus excluded
    ones and those up to index ``through``, which the user collapsed into the summary)."""
    if anchor not in state.graph:
        return []
    left_out = set(excluded)
    items: list[Item] = []
    for distance, node in enumerate(state.main_chain(anchor, chain_turns)):
        for mid in state.turn_messages(node):
            view = state.messages[mid]
            if mid in left_out or (through is not None and view.seq <= through):
                continue
            items.append(
                Item(mid, BlockType.CONVERSATION, state.render_message(view), Priority.HIGH if distance == 0 else Priority.MEDIUM,
                     score=1.0 / (1 + distance), order=view.seq, evidence_ids=(mid,))
            )
    return items


def _window_start(state: SessionState, subject: Subject, history: History) -> int:
    """The index of the first message the raw window carries (what ends before it is summarized)."""
    window = [state.messages[m].seq for n in state.main_chain(subject.node, history.chain_turns)
              for m in state.turn_messages(n) if m not in history.excluded]
    start = min(window) if window else state.messages[state.order[-1]].seq + 1 if state.order else 0
    return start if subject.through is None else max(start, subject.through + 1)


@dataclass(frozen=True)
class _PartWords:
    """A branch summary's parts as the gate reads them: each part's last message index, its quoted
    text at the level it is shown at (none for a part shown ``RAW`` or ``HIDDEN``), and the parts
    whose text holds each content word. Made once per record, levels and quoting, not per build:
    a 100,000-turn branch has thousands of parts, and a build weighs and grades only those that
    hold a word of the input."""

    lasts: tuple[int, ...]
    texts: dict[int, str]
    holding: dict[str, list[int]]  # word → the parts (ascending) whose text holds it

    @classmethod
    def of(cls, state: SessionState, record: SummaryRecord, levels: Sequence[str]) -> _PartWords:
        texts = {k: state.quoted(p[levels[k]]) for k, p in enumerate(record.parts) if levels[k] not in (RAW, HIDDEN)}
        holding: dict[str, list[int]] = {}
        for k, text in texts.items():
            for word in RANKING.content(text):
                holding.setdefault(word, []).append(k)
        return cls(tuple(p["last"] for p in record.parts), texts, holding)


def part_words(state: SessionState, record: SummaryRecord, levels: Sequence[str]) -> _PartWords:
    """The words of ``record``'s parts at ``levels``, made once per record, levels and quoting
    (one kept per branch and level)."""
    return state.memo(f"summary words {record.subject}:{record.subject_id}:{record.level}",
                      (record.summary_id, tuple(levels), state.quoting), lambda: _PartWords.of(state, record, levels))


def summary_lines(state: SessionState, subject: Subject, summary: BranchSummary, history: History,
                  query: str) -> list[Item]:
    """The summary lines of ``subject``'s branch before its raw window (see the module docstring).

    Grades as ``gate.weights`` and ``gate.coverage`` over the parts' texts would, from the words
    each part holds (``_PartWords``): a part holding none of the input's words has no lexical
    support, so it is shown only when its grade needs none (the part before the window, a part
    the user chose, a threshold of 0) or at its raw turns."""
    record, levels = summary.record, summary.levels
    start = _window_start(state, subject, history)
    words = part_words(state, record, levels)
    before = [k for k, last in enumerate(words.lasts) if last < start]
    if not before:
        return []
    asked = RANKING.content(query)
    df = {word: sum(1 for k in words.holding.get(word, ()) if words.lasts[k] < start) for word in asked}
    word_weights = rarity(df, sum(1 for k in before if k in words.texts))
    total = sum(word_weights.values())
    held: dict[int, float] = {}  # part → the weight of the input's words its text holds
    for word, weight in word_weights.items():
        for k in words.holding.get(word, ()):
            if words.lasts[k] < start:
                held[k] = held.get(k, 0.0) + weight
    policy = GatePolicy(threshold=history.threshold)
    # Several conversations: the branch's older turns may be another's (the gate's strict_tree), so
    # a line summarizing them must hold the input's words as another conversation's turn must.
    strict = state.graph.several_conversations()
    last = before[-1]
    chosen = {k for k in before if span_of(record.parts[k]) in summary.chosen} if summary.chosen else set()
    # A part's lexical grade is its share of the input's weighted words over the full level, so
    # only parts holding at least that share times the threshold can pass (a hair less is let
    # through, and graded exactly below).
    floor = policy.threshold * (policy.other_lex_full if strict else policy.lex_full) * total * (1 - 1e-9)
    shown = (before if policy.threshold <= 0 else  # a part without the input's words passes too
             sorted({*(k for k, weight in held.items() if weight >= floor), *chosen, last,
                     *(k for k in before if levels[k] == RAW)}))
    items: list[Item] = []
    for k in shown:
        part = record.parts[k]
        if levels[k] == RAW:
            items += raw_items(state, record, part, history.excluded)
            continue
        if k not in words.texts:  # hidden by the user
            continue
        lex = held.get(k, 0.0) / total if total > 0 else 0.0
        grade = (1.0 if k in chosen else min(1.0, lex / policy.other_lex_full) if strict
                 else 1.0 if k == last else support(None, lex, policy))
        if grade < policy.threshold or not words.texts[k]:
            continue
        span = span_of(part)
        items.append(Item(f"summary:{record.summary_id}:{span}", BlockType.SUMMARY,
                          f"(turns {span}) {words.texts[k]}", Priority.MUST if k in chosen else Priority.LOW,
                          score=grade, order=part["first"],
                          evidence_ids=(record.summary_id,), selector=f"turns:{span}"))
    return items


def covered_ids(record: SummaryRecord, part: Mapping[str, Any]) -> list[str]:
    """The message ids a summary part covers, in order ([] when the record does not hold them)."""
    ids = record.covers.ids
    try:
        return ids[ids.index(part["first_id"]):ids.index(part["last_id"]) + 1]
    except ValueError:
        return []


def raw_items(state: SessionState, record: SummaryRecord, part: Mapping[str, Any],
              excluded: Sequence[str] = ()) -> list[Item]:
    """The turns a summary part covers, as conversation lines (an expanded part, packed first)."""
    covered = covered_ids(record, part)
    views = [state.messages[m] for m in covered if m in state.messages and m not in excluded]
    return [Item(v.message_id, BlockType.CONVERSATION, state.render_message(v), Priority.MUST, score=0.5,
                 order=v.seq, evidence_ids=(v.message_id,)) for v in views]
