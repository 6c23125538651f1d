"""The branch summary in a context: the main chain beyond its window, represented instead of dropped.

The plan's history policy says how much of the anchor's branch is carried raw
(``main_chain_turns``) and at which level the rest is summarized (``summary_level``: "none",
"brief", "standard" or "detailed"). The anchor's branch summary at that level (offered by the
engine, recorded with the build and fed back on replay: the summaries a turn saw are
observations) holds one part per update; the parts that end before the raw window become summary
lines, older parts coarser (temporal compression, ``part_level``). Each line is bound to the
summary by a ref whose selector is ``turns:a-b`` (the message indexes of the session it covers).

Summaries pass the relevance gate like any candidate: the part just before the window stands for
the branch's continuity (grade 1.0, as the branch's own turns do); an older part must be about
the input by its words (the gate's lexical support against the plan's threshold). In a session
of several conversations every part, the last one too, must hold the input's words as another
conversation's turn must (``other_lex_full``): its branch was grown by routing, and the older
turns a part summarizes may be another conversation's (the gate's ``strict_tree``). They are
packed at low priority, from what the budget leaves once everything else is placed.

The user's progressive detail (``pipeline/detail``) sets a part's level, shows it as its raw
turns, hides it, or moves the raw window's start (what is collapsed before it is carried by the
summary). What the user chose to see is neither graded away nor left to what the budget leaves:
it is packed first (priority must), within the total budget, and the rest makes room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core.context.compiler import Item
from app.core.context.gate import GatePolicy, coverage, support, weights
from app.core.memory.summaries import LEVELS, part_level
from app.core.pipeline.detail import RAW, Detail, span_of
from app.core.plan.model import ContextPlan
from app.core.session.state import SessionState
from app.core.types import BlockType, ContextBlock, Priority, Ref, SummaryRecord

#: What a build was offered: branch root node → level → the branch's summary at that level.
Offered = Mapping[str, Mapping[str, SummaryRecord]]
DETAIL_LEVEL = "standard"  # the level detail starts from when the plan carries no summary


def offered_for(state: SessionState, anchor: str | None, offered: Offered) -> dict[str, SummaryRecord]:
    """The summaries of the anchor's branch among ``offered`` (level → record), or none."""
    if anchor is None or anchor not in state.graph:
        return {}
    return dict(offered.get(state.graph.root_of(anchor), {}))


def recorded_offer(state: SessionState, subjects: Sequence[str | None], offered: Offered) -> dict[str, Any]:
    """What the build record keeps of the offer: the branch of each subject node (the anchor,
    then a focused node), their summaries as JSON (``{"root", "levels", "more": [...]}``)."""
    kept: list[dict[str, Any]] = []
    for node in subjects:
        mine = offered_for(state, node, offered)
        if mine and node is not None and all(k["root"] != state.graph.root_of(node) for k in kept):
            kept.append({"root": state.graph.root_of(node),
                         "levels": {k: v.model_dump(mode="json") for k, v in mine.items()}})
    if not kept:
        return {}
    return {**kept[0], "more": kept[1:]} if len(kept) > 1 else kept[0]


def offer_from_record(recorded: Mapping[str, Any]) -> dict[str, dict[str, SummaryRecord]]:
    """The offer a recorded build saw (``recorded_offer``'s output read back)."""
    if not recorded:
        return {}
    return {r["root"]: {k: SummaryRecord.model_validate(v) for k, v in r["levels"].items()}
            for r in [recorded, *recorded.get("more", [])]}


def summary_items(state: SessionState, anchor: str | None, plan: ContextPlan, offered: Offered,
                  query: str, excluded: Sequence[str] = (), detail: Detail | None = None) -> list[Item]:
    """The summary lines of the anchor's branch before its raw window, at the levels ``detail``
    sets (a part shown raw gives its turns; see the module docstring)."""
    detail = detail or Detail()
    level = plan.history.summary_level
    if level not in LEVELS and not detail.empty():
        level = DETAIL_LEVEL  # the plan carries no summary, but the user asked for detail
    mine = offered_for(state, anchor, offered)
    record = mine.get(level) if level in LEVELS else None
    if record is None or anchor is None:
        return []
    window = [state.messages[m].seq for n in state.main_chain(anchor, plan.history.main_chain_turns)
              for m in state.turn_messages(n) if m not in excluded]
    start = min(window) if window else state.messages[state.order[-1]].seq + 1 if state.order else 0
    if detail.through is not None:
        start = max(start, detail.through + 1)
    parts = [(k, p) for k, p in enumerate(record.parts) if p["last"] < start]
    if not parts:
        return []
    n = len(record.parts)
    shown = {k: detail.level(span_of(p), part_level(n - 1 - k, level)) for k, p in parts}
    texts = {k: state.quoted(p[shown[k]]) for k, p in parts if shown[k] in LEVELS}
    word_weights = weights(query, texts.values())
    policy = GatePolicy(threshold=plan.rerank.relevance_threshold)
    # Several conversations: the branch's older turns may be another's (the gate's strict_tree), so
    # a line summarizing them must hold the input's words as another conversation's turn must.
    strict = state.graph.several_conversations()
    items: list[Item] = []
    last = parts[-1][0]
    for k, part in parts:
        span = span_of(part)
        if shown[k] == RAW:
            items += raw_items(state, record, part, excluded)
            continue
        if k not in texts:  # hidden by the user
            continue
        chosen = span in detail.spans  # what the user asked to see is not graded away
        lex = coverage(word_weights, texts[k])
        grade = (1.0 if chosen else min(1.0, lex / policy.other_lex_full) if strict
                 else 1.0 if k == last else support(None, lex, policy))
        if grade < policy.threshold or not texts[k]:
            continue
        items.append(Item(f"summary:{record.summary_id}:{span}", BlockType.SUMMARY,
                          f"(turns {span}) {texts[k]}", Priority.MUST if chosen else Priority.LOW, score=grade,
                          order=part["first"],
                          evidence_ids=(record.summary_id,), selector=f"turns:{span}"))
    return items


def covered_ids(record: SummaryRecord, part: Mapping[str, Any]) -> list[str]:
    """The message ids a summary part covers, in order ([] when the record does not hold them)."""
    ids = record.covers.ids
    try:
        return ids[ids.index(part["first_id"]):ids.index(part["last_id"]) + 1]
    except ValueError:
        return []


def carried_ids(recorded: Mapping[str, Any], block: ContextBlock) -> list[str]:
    """The evidence ids whose text ``block`` carries, given the summary offer its build recorded
    (``BuildRecord.summaries``): its refs' ids, except that a summary line (a ref ``turns:a-b`` to a
    summary record) stands for the turns it covers (whose words it carries in part)."""
    if block.block_type != BlockType.SUMMARY:  # only summary lines stand for other turns
        return [ref.evidence_id for ref in block.refs]
    summaries = {r.summary_id: r for levels in offer_from_record(recorded).values() for r in levels.values()}
    out: list[str] = []
    for ref in block.refs:
        summary = summaries.get(ref.evidence_id)
        span = ref.selector.removeprefix("turns:")
        part = next((p for p in summary.parts if span_of(p) == span), None) if summary is not None else None
        out += covered_ids(summary, part) if summary is not None and part is not None else [ref.evidence_id]
    return out


def raw_items(state: SessionState, record: SummaryRecord, part: Mapping[str, Any],
              excluded: Sequence[str] = ()) -> list[Item]:
    """The turns a summary part covers, as conversation lines (an expanded part, packed first)."""
    covered = covered_ids(record, part)
    views = [state.messages[m] for m in covered if m in state.messages and m not in excluded]
    return [Item(v.message_id, BlockType.CONVERSATION, state.render_message(v), Priority.MUST, score=0.5,
                 order=v.seq, evidence_ids=(v.message_id,)) for v in views]


def shown_levels(detail: Detail, refs: Iterable[Ref], offered: Offered) -> dict[str, str]:
    """Span → the level each summary part of a built context is shown at: the user's choice,
    else the level its line in the context has (``refs``: the context's block refs)."""
    by_id = {r.summary_id: r for levels in offered.values() for r in levels.values()}
    shown = dict(detail.spans)
    for ref in refs:
        record = by_id.get(ref.evidence_id)
        span = ref.selector.removeprefix("turns:")
        if record is None or span == ref.selector or span in shown:
            continue
        ages = [len(record.parts) - 1 - k for k, p in enumerate(record.parts) if span_of(p) == span]
        if ages:
            shown[span] = part_level(ages[0], record.level)
    return shown
