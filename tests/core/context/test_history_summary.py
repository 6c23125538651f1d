"""The history section's summary lines (app/core/context/sections/history.py): graded from the
words each part holds, made once per record, and the same lines as grading every part's text."""

from __future__ import annotations

import random

import pytest

from app.core.context.gate import GatePolicy, coverage, support, weights
from app.core.context.sections import history as section
from app.core.context.sections.history import HIDDEN, RAW, BranchSummary, History, Subject, span_of, summary_lines
from app.core.session.state import NoteView, SessionState
from app.core.types import Author, AuthorKind, GraphNode, Message, NodeKind, Role, SummaryCovers, SummaryRecord

VOCAB = "postgres schema deploy budget lantern river invoice parser kernel garden".split()


def _state(messages: int) -> SessionState:
    state = SessionState("s")
    for i in range(messages):
        state.add_message(Message(message_id=f"m{i}", role=Role.USER, content=f"turn {i}", at="2026-01-01T00:00:00",
                                  author=Author(kind=AuthorKind.USER, id="u"), turn_id=f"t{i}"))
    return state


def _record(parts: int, rng: random.Random) -> SummaryRecord:
    rows = []
    for k in range(parts):
        said = " ".join(rng.sample(VOCAB, rng.randint(0, 3)))
        rows.append({"first": 2 * k, "last": 2 * k + 1, "first_id": f"m{2 * k}", "last_id": f"m{2 * k + 1}",
                     "brief": f"we talked {said}".strip(), "standard": f"part {k}: {said}"})
    return SummaryRecord(subject="branch", subject_id="b", level="standard", content="",
                         covers=SummaryCovers(first=0, last=2 * parts - 1, ids=[f"m{i}" for i in range(2 * parts)]),
                         parts=rows)


def _every_part(state: SessionState, summary: BranchSummary, start: int, threshold: float, query: str) -> list[str]:
    """The lines as grading every part's text gives them (the gate's own weights and coverage)."""
    record, levels = summary.record, summary.levels
    policy, strict = GatePolicy(threshold=threshold), state.graph.several_conversations()
    parts = [(k, p) for k, p in enumerate(record.parts) if p["last"] < start]
    texts = {k: state.quoted(p[levels[k]]) for k, p in parts if levels[k] not in (RAW, HIDDEN)}
    w = weights(query, texts.values())
    out = []
    for k, part in parts:
        if levels[k] == RAW:
            out += [f"raw {m}" for m in record.covers.ids[part["first"]:part["last"] + 1]]
            continue
        if k not in texts:
            continue
        lex = coverage(w, texts[k])
        grade = (1.0 if span_of(part) in summary.chosen else min(1.0, lex / policy.other_lex_full) if strict
                 else 1.0 if k == parts[-1][0] else support(None, lex, policy))
        if grade >= threshold and texts[k]:
            out.append(f"(turns {span_of(part)}) {texts[k]} {grade:.9f}")
    return out


@pytest.mark.parametrize("conversations", [1, 2])
@pytest.mark.parametrize("threshold", [0.0, 0.2, 0.45])
@pytest.mark.parametrize("query", ["what did we decide on the postgres schema?", "the lantern by the river",
                                   "nothing in common here", ""])
def test_summary_lines_are_those_every_part_s_text_would_give(threshold: float, query: str, conversations: int) -> None:
    rng = random.Random(7)
    record = _record(40, rng)
    levels = tuple(rng.choice(["standard", "standard", "brief", RAW, HIDDEN]) for _ in record.parts)
    summary = BranchSummary(record, levels, frozenset({"4-5", "30-31"}))
    state = _state(61)  # parts ending at message 61 and later are not before the window
    for root in range(conversations):  # two roots: every line must hold the input's words (strict)
        state.add_node(GraphNode(node_id=f"root{root}", kind=NodeKind.TURN))
    assert state.graph.several_conversations() == (conversations > 1)
    history = History(subjects=(Subject("n", summary),), threshold=threshold)
    got = [f"raw {it.item_id}" if it.segment.value == "conversation" else f"{it.text} {it.score:.9f}"
           for it in summary_lines(state, history.subjects[0], summary, history, query)]
    assert got == _every_part(state, summary, 61, threshold, query)
    assert any(line.startswith("(turns 4-5)") for line in got)  # chosen: shown whatever its words


def test_a_record_s_words_are_read_once_until_its_quoting_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    real = section._PartWords.of.__func__

    def counting(cls: type, state: SessionState, record: SummaryRecord, levels: tuple[str, ...]) -> object:
        made.append(record.summary_id)
        return real(cls, state, record, levels)

    monkeypatch.setattr(section._PartWords, "of", classmethod(counting))
    record = _record(10, random.Random(1))
    summary = BranchSummary(record, ("standard",) * 10)
    state = _state(30)
    history = History(subjects=(Subject("n", summary),), threshold=0.2)
    for query in ("postgres schema", "river lantern"):
        summary_lines(state, history.subjects[0], summary, history, query)
    state.add_message(Message(message_id="m30", role=Role.USER, content="a new turn", at="2026-01-01T00:00:00",
                              author=Author(kind=AuthorKind.USER, id="u"), turn_id="t30"))
    summary_lines(state, history.subjects[0], summary, history, "postgres schema")
    assert len(made) == 1  # new turns do not change what the parts say
    state.add_note(NoteView(note_id="e1", kind="env", text="<<< notes.txt\npostgres schema\n>>>", at="2026-01-01T00:00:00"))
    summary_lines(state, history.subjects[0], summary, history, "postgres schema")
    coarser = BranchSummary(record, ("brief",) * 10)
    summary_lines(state, history.subjects[0], coarser, history, "postgres schema")
    assert len(made) == 3  # the outside text grew (quoting may differ), then the levels changed
