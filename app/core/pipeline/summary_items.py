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
the input by its words (the gate's lexical support against the plan's threshold). They are
packed at low priority, from what the budget leaves once everything else is placed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.context.compiler import Item
from app.core.context.gate import GatePolicy, coverage, support, weights
from app.core.memory.summaries import LEVELS, part_level
from app.core.plan.model import ContextPlan
from app.core.session.state import SessionState
from app.core.text import history_text
from app.core.types import BlockType, Priority, SummaryRecord

#: What a build was offered: branch root node → level → the branch's summary at that level.
Offered = Mapping[str, Mapping[str, SummaryRecord]]


def offered_for(state: SessionState, anchor: str | None, offered: Offered) -> dict[str, SummaryRecord]:
    """The summaries of the anchor's branch among ``offered`` (level → record), or none."""
    if anchor is None or anchor not in state.graph:
        return {}
    return dict(offered.get(state.graph.root_of(anchor), {}))


def recorded_offer(state: SessionState, anchor: str | None, offered: Offered) -> dict[str, Any]:
    """What the build record keeps of the offer: the anchor's branch, its summaries as JSON."""
    mine = offered_for(state, anchor, offered)
    if not mine or anchor is None:
        return {}
    return {"root": state.graph.root_of(anchor), "levels": {k: v.model_dump(mode="json") for k, v in mine.items()}}


def offer_from_record(recorded: Mapping[str, Any]) -> dict[str, dict[str, SummaryRecord]]:
    """The offer a recorded build saw (``recorded_offer``'s output read back)."""
    if not recorded:
        return {}
    return {recorded["root"]: {k: SummaryRecord.model_validate(v) for k, v in recorded["levels"].items()}}


def summary_items(state: SessionState, anchor: str | None, plan: ContextPlan, offered: Offered,
                  query: str, excluded: Sequence[str] = ()) -> list[Item]:
    """The summary lines of the anchor's branch before its raw window (see the module docstring)."""
    level = plan.history.summary_level
    mine = offered_for(state, anchor, offered)
    record = mine.get(level) if level in LEVELS else None
    if record is None or anchor is None:
        return []
    window = [state.messages[m].seq for n in state.main_chain(anchor, plan.history.main_chain_turns)
              for m in state.turn_messages(n) if m not in excluded]
    start = min(window) if window else state.messages[state.order[-1]].seq + 1 if state.order else 0
    parts = [(k, p) for k, p in enumerate(record.parts) if p["last"] < start]
    if not parts:
        return []
    n = len(record.parts)
    outside = state.outside_lines()  # what an answer copied from outside text stays quoted
    texts = {k: history_text(p[part_level(n - 1 - k, level)], outside) for k, p in parts}
    word_weights = weights(query, texts.values())
    policy = GatePolicy(threshold=plan.rerank.relevance_threshold)
    items: list[Item] = []
    last = parts[-1][0]
    for k, part in parts:
        grade = 1.0 if k == last else support(None, coverage(word_weights, texts[k]), policy)
        if grade < policy.threshold or not texts[k]:
            continue
        span = f"{part['first']}-{part['last']}"
        items.append(Item(f"summary:{record.summary_id}:{span}", BlockType.SUMMARY,
                          f"(turns {span}) {texts[k]}", Priority.LOW, score=grade, order=part["first"],
                          evidence_ids=(record.summary_id,), selector=f"turns:{span}"))
    return items
