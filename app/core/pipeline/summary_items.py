"""The branch summaries of a build: what it was offered, and what its history section shows of them.

The plan's history policy says how much of the anchor's branch is carried raw
(``main_chain_turns``) and at which level the rest is summarized (``summary_level``: "none",
"brief", "standard" or "detailed"). The anchor's branch summary at that level (offered by the
engine, recorded with the build and fed back on replay: the summaries a turn saw are
observations) holds one part per update; ``history`` says which record the prompt's history
section (``app.core.context.sections.history``, which makes and grades the lines) shows for the
anchor and a focused node, and at which level each part: older parts coarser (temporal
compression, ``part_level``), unless the user's progressive detail (``pipeline/detail``) sets a
part's level, shows it as its raw turns, hides it, or moves the raw window's start (what is
collapsed before it is carried by the summary).

``recorded_offer``/``offer_from_record`` keep the offer in the build record and read it back;
``carried_ids`` says which turns a summary line stands for; ``shown_levels`` which level each
part of a built context is shown at; ``default_views`` what a session's read-ahead indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from app.core.context.sections.history import BranchSummary, History, Subject, covered_ids, span_of
from app.core.memory.summaries import LEVELS, part_level
from app.core.pipeline.detail import Detail
from app.core.types import BlockType, ContextBlock, Ref, SummaryRecord

if TYPE_CHECKING:
    from app.core.plan.model import ContextPlan
    from app.core.session.state import SessionState

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
                         "levels": {k: v.as_json() for k, v in mine.items()}})
    if not kept:
        return {}
    return {**kept[0], "more": kept[1:]} if len(kept) > 1 else kept[0]


def offer_from_record(recorded: Mapping[str, Any]) -> dict[str, dict[str, SummaryRecord]]:
    """The offer a recorded build saw (``recorded_offer``'s output read back)."""
    if not recorded:
        return {}
    return {r["root"]: {k: SummaryRecord.model_validate(v) for k, v in r["levels"].items()}
            for r in [recorded, *recorded.get("more", [])]}


def branch_summary(state: SessionState, node: str | None, plan_level: str, offered: Offered,
                   detail: Detail) -> BranchSummary | None:
    """The summary of ``node``'s branch the history section shows (None: none offered at the level),
    with the level of each part: the user's choice (``detail``), else the plan's ``summary_level``
    for the newest parts and coarser for older ones (``memory.summaries.part_level``)."""
    level = plan_level
    if level not in LEVELS and not detail.empty():
        level = DETAIL_LEVEL  # the plan carries no summary, but the user asked for detail
    record = offered_for(state, node, offered).get(level) if level in LEVELS else None
    if record is None:
        return None
    return BranchSummary(record, shown_at(record, level, detail), frozenset(detail.spans))


def shown_at(record: SummaryRecord, level: str, detail: Detail) -> tuple[str, ...]:
    """The level each part of ``record`` is shown at: the user's choice (``detail``), else
    ``level`` for the newest parts and coarser for older ones."""
    n = len(record.parts)
    return tuple(detail.level(span_of(p), part_level(n - 1 - k, level)) for k, p in enumerate(record.parts))


def default_views(offered: Offered) -> list[tuple[SummaryRecord, tuple[str, ...]]]:
    """Each offered branch summary with the levels a build without the user's detail shows its
    parts at: what a session's read-ahead indexes (``history.part_words``)."""
    return [(record, shown_at(record, level, Detail())) for levels in offered.values()
            for level, record in levels.items()]


def history(state: SessionState, anchor: str | None, plan: ContextPlan, offered: Offered, detail: Detail,
            excluded: Sequence[str]) -> History:
    """What the history section shows: the anchor's branch (up to ``detail.through`` carried by
    its summary) and the branch of a node the user focused, each with its summary."""
    level = plan.history.summary_level
    subjects = []
    if anchor is not None:
        subjects.append(Subject(anchor, branch_summary(state, anchor, level, offered, detail), detail.through))
    focus = detail.focus
    if focus is not None and focus != anchor and focus in state.graph:
        focused = detail.model_copy(update={"through": None})
        subjects.append(Subject(focus, branch_summary(state, focus, level, offered, focused)))
    return History(tuple(subjects), chain_turns=plan.history.main_chain_turns,
                   threshold=plan.rerank.relevance_threshold, excluded=tuple(excluded))


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
