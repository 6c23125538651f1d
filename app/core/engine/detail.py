"""Progressive detail: expand, collapse and focus a turn's context, and a subtree's summary.

``detail(turn_id, action)`` (seed 004 §5.3; the actions and their effect: ``pipeline/detail``)
recompiles the turn's context within the same budget as replay rebuilds it — its text, time,
budget, model limits and recorded observations of the outside — with the detail changed. The
branch summaries are the recorded ones, plus the current ones of a branch the build had none of
(a focused branch, or summaries written since). The new build replaces the turn's record (the
earlier one stays in ``record.revisions`` as a ``detail`` revision) and is what ``replay``
reproduces; ``answer_again`` answers with it. The answer is not regenerated.

``subtree_summary(session_id, node_id)`` is what a collapsed node of the canvas shows: the
stored summary of the subject the node heads (a task, a branch's root), else an extractive
summary of the turns continuing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.engine.branches import settled
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.turns import TurnService, write_cited
from app.core.errors import NoRecordError
from app.core.memory.summaries import SummaryTurn, extractive
from app.core.pipeline.detail import Detail, DetailAction, DetailError, apply
from app.core.pipeline.record import TurnRecord, TurnRevision
from app.core.pipeline.summary_items import Offered, offered_for, shown_levels
from app.core.session.state import SessionState
from app.core.types import NodeKind, utc_now


@dataclass(frozen=True)
class Detailed:
    """A detail change: the action, the detail now set, and the turn's new record (the earlier
    build in ``record.revisions``)."""

    session_id: str
    turn_id: str
    action: DetailAction
    detail: Detail
    record: TurnRecord


@dataclass(frozen=True)
class SubtreeSummary:
    """What a collapsed node shows: the summary text, how many turns it covers, who wrote it."""

    text: str
    turns: int
    source: str  # "task" | "branch" summary, or "extractive" (made for the subtree on the spot)


class DetailService:
    """See the module docstring."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, turns: TurnService,
                 offer: Callable[[str], Offered]) -> None:
        """``offer``: the branch summaries on offer now (``SummaryService.offer``)."""
        self.ctx, self.sessions, self.turns, self.offer = ctx, sessions, turns, offer

    async def detail(self, turn_id: str, action: DetailAction) -> Detailed:
        """Apply ``action`` to the turn's context and recompile it; raises ``DetailError``."""
        row = await self.ctx.on_store(self.ctx.store.get_turn, turn_id)
        if row is None:
            raise DetailError(f"There is no turn {turn_id!r}.")
        state = await self.sessions.open(row["session_id"])
        async with settled(self.turns, turn_id, state.session_id):
            return await self._detail_locked(state, turn_id, action)

    async def _detail_locked(self, state: SessionState, turn_id: str, action: DetailAction) -> Detailed:
        try:
            record = await self.turns.record(turn_id)  # read under the lock: the latest revision
        except NoRecordError:
            raise DetailError("This turn has no recorded context (it was imported as history).") from None
        b, past = record.build, state.as_of(turn_id)
        recorded = self.turns.recorded(b)
        offer: Offered = {**self.offer(state.session_id), **recorded.summaries(past)}
        if action.kind == "focus" and action.node_id is not None and action.node_id not in past.graph:
            raise DetailError("That node did not exist yet when this turn was answered.")
        levels = offered_for(past, b.anchor_node, offer)
        parts = next(iter(levels.values())).parts if levels else []
        view = past.messages.get(action.message_id)
        shown = shown_levels(recorded.detail(), [r for block in b.context.blocks for r in block.refs], offer)
        detail = apply(recorded.detail(), action, shown=shown, parts=parts,
                       message_index=view.seq if view is not None else None)
        mids = state.turns[turn_id].message_ids
        build, timing = await self.turns.rebuild(
            record, past, anchor_override=b.routing.get("override"), input_id=mids[0] if mids else "input",
            sources=self.turns.recorded(b, summaries=offer, detail=detail))
        revision = TurnRevision(kind="detail", at=utc_now(), at_seq=len(state.turn_order),
                                previous_anchor=b.anchor_node, anchor=build.anchor_node, build=b, timing=record.timing)
        new = record.model_copy(update={"build": build, "timing": timing, "revisions": [*record.revisions, revision]})
        data = new.model_dump(mode="json")
        event: dict[str, Any] = {"turn_id": turn_id, "action": action.model_dump(mode="json"), "detail": build.detail,
                                 "tokens": build.context.tokens}
        store = self.ctx.store

        def persist() -> None:
            with store.transaction():
                write_cited(store, past, build)
                store.update_turn(turn_id, record=data)
                store.append_event(state.session_id, "turn.detail", event)

        await self.ctx.on_store(persist)
        return Detailed(state.session_id, turn_id, action, detail, new)

    # ------------------------------------------------------------------ the canvas

    async def subtree_summary(self, session_id: str, node_id: str) -> SubtreeSummary | None:
        """The brief summary of what continues ``node_id`` (None: nothing continues it)."""
        state = await self.sessions.open(session_id)
        if node_id not in state.graph:
            return None
        node = state.graph.node(node_id)
        nodes = [node_id, *state.graph.descendants(node_id)]
        views = sorted((state.messages[m] for n in nodes for m in state.turn_messages(n) if m in state.messages),
                       key=lambda v: v.seq)
        if not views:
            return None
        stored = await self.ctx.on_store(self.ctx.store.list_summaries, session_id)
        subject = ("task", node.ref_id) if node.kind == NodeKind.TASK else ("branch", node_id)
        for record in stored:
            if (record.subject, record.subject_id, record.level) == (*subject, "brief") \
                    and set(record.covers.ids) >= {v.message_id for v in views}:
                return SubtreeSummary(record.content, len(views), record.subject)
        turns = [SummaryTurn(v.message_id, v.seq, v.speaker, v.text, v.at) for v in views if v.text.strip()]
        return SubtreeSummary(extractive(turns, "brief"), len(views), "extractive")
