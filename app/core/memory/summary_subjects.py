"""What gets summarized and how one update of a summary is made (pure; the engine's
``SummaryService`` runs it in the background).

- ``subjects_of(state, topics)``: the session, each branch (the turns of one root's lane: a tree of
  the session graph), each task (the turns that continue its node) and each main topic of the
  session (the turns that mention it), with their turns in order (this app's messages only).
- ``new_parts(turns, last)``: the turns after the ones already covered, cut into parts at a
  pause of an hour or more, at most ``PART_MESSAGES`` each (an update covers one part).
- ``cache_key``: (subject, level, based_on, the new part's ids) → the key a summary is found again by.
- ``summary_messages``: the prompt that asks the chat model to update a summary.
- ``next_record``: the new version of a subject's summary at a level, from the previous one and
  the new part (anchored: the earlier parts are kept; the brief is re-chosen from the previous
  brief and the part's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from app.core.memory.summaries import Level, SummaryTurn, anchored_brief, composed_lines
from app.core.session.state import SessionState
from app.core.types import NodeKind, SummaryCovers, SummaryRecord, new_id, utc_now

SubjectKind = Literal["session", "branch", "task", "topic"]
PART_MESSAGES = 32  # the most messages one update (one part) covers
PAUSE_S = 3600  # a pause this long between two messages starts a new part
#: The levels the chat model may write. The detailed level is always extractive: it is the
#: verbatim record of the part (its identifiers restorable word for word), which a small model's
#: paraphrase does not keep, and writing it would take the model longest.
MODEL_LEVELS = ("brief", "standard")
#: Completion tokens a model's summary may take, by level.
LEVEL_TOKENS = {"brief": 64, "standard": 140}
PREVIOUS_WORDS = 60  # of the previous summary the model reads (its end: what the new part continues)
LEVEL_ASK = {
    "brief": "one or two sentences",
    "standard": "one paragraph of at most six sentences",
}


@dataclass(frozen=True, slots=True)
class Subject:
    """One thing summarized: its kind, id and turns in order."""

    kind: SubjectKind
    subject_id: str
    turns: tuple[SummaryTurn, ...]


def _turns(state: SessionState, ids: Sequence[str]) -> tuple[SummaryTurn, ...]:
    """The messages of ``ids`` a summary covers: not those from outside (an import, an MCP client),
    which a context only ever quotes whole, fenced, never paraphrased into a summary line."""
    views = sorted((state.messages[m] for m in ids if m in state.messages), key=lambda v: v.seq)
    return tuple(SummaryTurn(v.message_id, v.seq, v.speaker, v.text, v.at) for v in views
                 if v.text.strip() and not v.origin)


def subjects_of(state: SessionState, topics: Mapping[str, Sequence[str]] | None = None) -> list[Subject]:
    """The session, its branches (one per root with turns), its tasks and its main ``topics``
    (topic id → the ids of the messages that mention it), each with its turns."""
    out = [Subject("session", state.session_id, _turns(state, state.order))]
    lanes: dict[str, list[str]] = {}
    for node in state.graph.nodes(NodeKind.TURN):
        lanes.setdefault(state.graph.root_of(node.node_id), []).extend(state.turn_messages(node.node_id))
    out += [Subject("branch", root, _turns(state, ids)) for root, ids in lanes.items()]
    for task in state.graph.nodes(NodeKind.TASK):
        ids = [m for n in state.graph.descendants(task.node_id) for m in state.turn_messages(n)]
        if ids:
            out.append(Subject("task", task.ref_id or task.node_id, _turns(state, ids)))
    out += [Subject("topic", topic_id, _turns(state, ids)) for topic_id, ids in (topics or {}).items()]
    return [s for s in out if s.turns]


def _seconds(at: str) -> float | None:
    try:
        return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def new_parts(turns: Sequence[SummaryTurn], last: int | None) -> list[list[SummaryTurn]]:
    """The turns after index ``last`` (all when None), cut into parts (see the module docstring)."""
    fresh = [t for t in turns if last is None or t.index > last]
    parts: list[list[SummaryTurn]] = []
    for turn in fresh:
        if parts:
            before = _seconds(parts[-1][-1].at)
            now = _seconds(turn.at)
            pause = before is not None and now is not None and now - before >= PAUSE_S
            if len(parts[-1]) < PART_MESSAGES and not pause:
                parts[-1].append(turn)
                continue
        parts.append([turn])
    return parts


def cache_key(kind: str, subject_id: str, level: str, ids: Sequence[str], based_on: str | None) -> str:
    """The key of a summary of ``kind``/``subject_id`` at ``level`` that adds the messages ``ids``
    to the version ``based_on`` (which covers the ones before: a version's id stands for them, so
    the key is made of one part's ids, not of every id a long subject covers)."""
    text = "\x1f".join([kind, subject_id, level, based_on or "", *ids])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def summary_messages(level: str, previous: str, said: str) -> list[dict[str, str]]:
    """The chat messages that ask for the level's update of ``previous`` with a part whose key
    sentences are ``said`` (``extractive(part, "standard")``).

    The model reads the part's key sentences (its extractive standard summary: every identifier
    the model's text is checked for, in a fraction of the words) and the end of the previous
    summary, not the whole part: reading the prompt is most of a small local model's time (about
    4 ms a token on two cores), so a part of 32 messages would cost 5–8 s before the first word.
    The part comes first, so the levels' prompts share their beginning (a prompt cache reads it once)."""
    before = " ".join(previous.split()[-PREVIOUS_WORDS:]) if previous else "(none)"
    system = ("You summarize conversations. Copy every name, number, date and file path exactly as written. "
              "Write plain sentences; add nothing that was not said.")
    user = (f"Key sentences of the new messages:\n{said}\n\nSummary so far (its end):\n{before}\n\n"
            f"Summarize the new messages as {LEVEL_ASK[level]}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True, slots=True)
class Made:
    """One level's text of a new part and who made it."""

    text: str
    provider: str  # the model's provider, or "extractive"
    model: str = ""


def next_record(previous: SummaryRecord | None, subject: Subject, level: str, part: Sequence[SummaryTurn],
                texts: dict[str, str], made: Made, *, key: str, tokens: Any) -> SummaryRecord:
    """The new version of ``subject``'s summary at ``level``: the previous parts and the new one
    (``texts``: the part at each level), composed with older parts coarser; ``tokens`` counts text
    (a composed level's count is its lines' counts plus one per newline)."""
    parts = [*(previous.parts if previous else []),
             {"first": part[0].index, "last": part[-1].index, "first_id": part[0].message_id,
              "last_id": part[-1].message_id, **texts}]
    if level == "brief":
        content = anchored_brief(previous.content if previous else "", texts["brief"])
        count = int(tokens(content))
    else:
        # Counted line by line, a newline apiece: the lines are the parts' texts, each counted once
        # over the subject's life (the counter caches them), where the whole grows with every update.
        lines = composed_lines(parts, level)
        content = "\n".join(lines)
        count = sum(int(tokens(line)) for line in lines) + max(0, len(lines) - 1)
    ids = [*(previous.covers.ids if previous else []), *(t.message_id for t in part)]
    first = previous.covers.first if previous else part[0].index
    # Constructed, not validated: every field is of its type by construction, and validating would
    # copy the covered ids and the parts (a long subject's version holds 100,000s: its chain's cost
    # would grow with the square of its length).
    return SummaryRecord.model_construct(
        summary_id=new_id(), subject=subject.kind, subject_id=subject.subject_id, level=cast(Level, level),
        content=content,
        covers=SummaryCovers.model_construct(first=first, last=part[-1].index, ids=ids), parts=parts,
        provider=made.provider, model=made.model, tokens=count,
        based_on=previous.summary_id if previous else None, created_at=utc_now(), valid_to=None, cache_key=key,
    )
