"""The evidence section of the prompt: the recalled items, numbered [n] in rank order.

Each kept recall candidate not already in the conversation becomes a line bound to its evidence;
a long one enters compressed to what the input asks (``app.core.context.compress``), and the
lines are ranked by the plan's evidence priority (given as a list of evidence types). A fact's
closed earlier values join it, each with its time. The best evidence of each sub-question
(``Candidate.part``, ``app.core.context.parts``) is packed before the rest. Pure functions of the session state and the
recall result.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.context.compiler import Item
from app.core.context.compress import Compressed, Compression, compress
from app.core.context.recall_model import RecallResult
from app.core.ports import TokenCounter
from app.core.session.selectors import body_lines, within
from app.core.session.state import NoteView, SessionState
from app.core.types import BlockType, Priority, Role

#: A turn is "long" (and enters compressed) only from this many tokens on, whatever the cap: a
#: conversation turn of a few sentences is one statement and is kept whole; files, feed items and
#: tool results are compressed as soon as they exceed the cap.
LONG_TURN = 160


def evidence_type(state: SessionState, item_id: str) -> str:
    """The evidence type of a recalled id, in the plan's ``evidence_priority`` vocabulary."""
    view = state.messages.get(item_id)
    if view is not None:
        return "llm_output" if view.role == Role.ASSISTANT else "user_input"
    note = state.notes.get(item_id)
    if note is not None and note.kind == "outside":  # another session's message
        return "user_input"
    return "memory" if note is not None and note.kind == "memory" else "env_event"


def type_rank(priority: Sequence[str], kind: str) -> int:
    """Position of ``kind`` in the plan's evidence priority (unknown kinds last)."""
    return priority.index(kind) if kind in priority else len(priority)


def _fit(text: str, query: str, cap: int, counter: TokenCounter, tokens: int) -> tuple[str, Compressed | None]:
    """``text`` as it enters: whole when it fits ``cap`` (``tokens`` is its known count, or that
    of a longer rendering), else compressed to what ``query`` needs."""
    cut = compress(text, query, cap, counter.count) if 0 < cap < tokens else None
    return (text, None) if cut is None else (cut.text, cut)


def recalled_items(state: SessionState, recalled: RecallResult, in_conversation: set[str], *,
                   counter: TokenCounter, query: str, cap: int, priority: Sequence[str],
                   compressions: list[Compression]) -> list[Item]:
    """The kept recall candidates not already in the conversation, numbered [n] in rank order;
    a note over ``cap`` tokens, or a turn over ``LONG_TURN`` and ``cap``, enters compressed (its
    selector on the item, the rest listed in ``compressions``)."""
    items: list[Item] = []
    number = 0
    for cand in recalled.candidates:
        if not cand.kept or cand.id in in_conversation:
            continue
        number += 1
        tag = f"[{number}]"
        rank = type_rank(priority, evidence_type(state, cand.id))
        level = Priority.MEDIUM if cand.part is None else Priority.HIGH  # a part's best evidence goes first
        if cand.id in state.messages:
            view = state.messages[cand.id]
            whole = state.render_message(view)  # an answer's copied outside text stays quoted
            text, cut = _fit(state.quoted_text(view), query, max(cap, LONG_TURN), counter,
                             counter.count(whole))  # a cached count
            line = whole if cut is None else state.speaker_line(view, text)
            items.append(Item(cand.id, BlockType.EVIDENCE, f"{tag} {line}", level, score=cand.fused,
                              group=f"{view.at[:10]}:", order=view.seq, evidence_ids=(cand.id,), rank=rank,
                              # both parts are cached counts; the joined context is re-counted exactly
                              tokens=None if cut else counter.count(tag) + counter.count(whole),
                              selector=cut.selector if cut else ""))
        else:
            note = state.notes[cand.id]
            outside = note.kind == "outside"  # another session's message: compressed as a turn is
            whole = note.text if outside else note.render()
            text, cut = _fit(whole, query, max(cap, LONG_TURN) if outside else cap, counter, counter.count(whole))
            group = outside_group(note) if outside else ""
            segment = BlockType.MEMORY if note.kind == "memory" else BlockType.EVIDENCE
            items.append(Item(cand.id, segment, f"{tag} {text}", level, score=cand.fused, group=group,
                              order=len(state.order) + number, evidence_ids=(cand.id,), rank=rank,
                              selector=note_selector(note, whole, cut), sources=note.source_ids))
        if cut is not None:
            compressions.append(Compression.of(cand.id, cut))
    return items + earlier_values(state, items, number)


def note_selector(note: NoteView, whole: str, cut: Compressed | None) -> str:
    """The selector of a note's line: what compression kept, and for a document's part its own
    selector (``page:12``) narrowed by the kept lines of its text (``page:12/lines:3-9``)."""
    if not note.selector:
        return cut.selector if cut else ""
    if cut is None:
        return note.selector
    return within(note.selector, body_lines(cut.selector, whole.count("\n") + 1)) or note.selector


def outside_group(note: NoteView) -> str:
    """The header of another session's messages: its day and title, said once per group (the day
    only once when the title already holds it)."""
    day = note.at[:10]
    title = f"session \u201c{note.origin}\u201d:"
    return title if day and day in note.origin else f"{day}, {title}"


def earlier_values(state: SessionState, items: Sequence[Item], number: int) -> list[Item]:
    """The closed earlier values of the facts among ``items`` (a fact and what it replaced are
    stated together, each with its time), numbered on from ``number``."""
    have = {it.item_id for it in items}
    keys = {state.notes[i].key: state.notes[i].origin for i in have if i in state.notes and state.notes[i].key}
    out: list[Item] = []
    for note in state.notes.values():
        if note.key in keys and note.valid_to and not note.removed_at and note.note_id not in have:
            number += 1
            out.append(Item(note.note_id, BlockType.MEMORY, f"[{number}] {note.render()}", Priority.MEDIUM,
                            order=len(state.order) + number, evidence_ids=(note.note_id,), sources=note.source_ids))
    return out
