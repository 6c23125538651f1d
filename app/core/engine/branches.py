"""Branch actions of the canvas: re-anchor a turn (and undo that), focus, checkpoints, collapsing,
pinned positions, and injecting results of one branch into another.

``BranchService``'s coroutines run on the engine's loop and do their blocking work on the
``store`` executor. Each returns a small frozen "what changed" object
(DESIGN.md §5); the live graph's signals (``edge_added``, ``edge_removed``, ``node_updated``,
``node_moved``) tell the canvas what to redraw.

Why replay stays exact after the graph changes under recorded turns: nothing is deleted, and
every change made after the fact is bounded by the session's turn count ``K`` when it happened.
A superseded edge gets ``attrs["valid_to_seq"] = K`` (and ``valid_to``, wall clock), the edge
that replaces it ``valid_from_seq = K``; a routing override the user adds or takes back is
visible from / until the same bound. ``SessionState.as_of(turn)`` keeps exactly what was live
for that turn's seq. The turn-changing actions hold the session lock that ``submit`` holds from
recording the input to attaching its node, so no build sees half of a change.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.engine.turns import TurnService, write_cited
from app.core.errors import CoreError, NoRecordError
from app.core.pipeline.builder import NEW_ROOT
from app.core.pipeline.record import BuildRecord, StageTiming, TurnRecord, TurnRevision
from app.core.session import versions
from app.core.session.graph import GraphChange, SessionGraph
from app.core.session.state import SessionState, override_spans
from app.core.types import EdgeKind, GraphEdge, utc_now

if TYPE_CHECKING:
    from app.core.engine.context import EngineContext
    from app.core.engine.sessions import SessionService


@contextlib.asynccontextmanager
async def settled(turns: TurnService, turn_id: str, session_id: str) -> AsyncIterator[None]:
    """Hold the session's lock once ``turn_id``'s answer is recorded: its bookkeeping writes the
    turn's record too, so a change of the record after the fact waits for it."""
    while True:
        running = turns.running.get(turn_id)
        if running is not None:
            await asyncio.wait([running.done])
        async with turns.ctx.lock(session_id):
            if turn_id not in turns.running:  # (its submit may have held the lock meanwhile)
                yield
                return


class BranchError(CoreError, ValueError):
    """A branch action that cannot be taken; the message says why."""


class UnknownNodeError(BranchError, NoRecordError):
    """A node (or turn) the session does not have."""


class AnchorCycleError(BranchError):
    """Anchoring a turn onto itself or onto a node that continues it."""


class NothingToUndoError(BranchError):
    """``undo_reanchor`` on a turn whose re-anchors are all undone already (or never made)."""


@dataclass(frozen=True)
class Reanchored:
    """What ``reanchor``/``undo_reanchor`` changed: the turn's node now continues ``anchor``
    (None: it is a root), its new ``record`` (earlier builds in ``record.revisions``), and the
    edges that stopped / started being live (``change.removed_edges`` / ``change.added_edges``).
    A re-anchor onto the current anchor changes nothing: ``change`` is empty."""

    session_id: str
    turn_id: str
    node_id: str
    previous_anchor: str | None
    anchor: str | None
    record: TurnRecord
    change: GraphChange
    undo: bool = False


@dataclass(frozen=True)
class Injected:
    """What ``inject`` changed: ``merges`` edges from ``target_node`` to each newly merged source
    (``change.added_edges``); sources merged into the target before are in ``skipped``."""

    session_id: str
    target_node: str
    sources: tuple[str, ...]
    skipped: tuple[str, ...]
    change: GraphChange


@dataclass(frozen=True)
class FocusChanged:
    """What ``set_focus`` changed: the user's focus node (None: follow the latest turn) and the
    nodes whose ``attrs["focused"]`` flag flipped (``change.updated_nodes``)."""

    session_id: str
    previous: str | None
    focus: str | None
    change: GraphChange


def undo_target(revisions: Sequence[TurnRevision]) -> int | None:
    """Index of the latest re-anchor not undone yet (undos pop re-anchors like a stack)."""
    stack: list[int] = []
    for n, revision in enumerate(revisions):
        if revision.kind == "undo":
            if stack:
                stack.pop()
        else:
            stack.append(n)
    return stack[-1] if stack else None


def _undo_index(record: TurnRecord, turn_id: str) -> int:
    """The revision an undo takes back; ``NothingToUndoError`` when none is left."""
    undoes = undo_target(record.revisions)
    if undoes is None:
        raise NothingToUndoError(f"turn {turn_id!r} has no re-anchor to undo")
    return undoes


def _check_anchor(graph: SessionGraph, node: str, anchor: str | None) -> None:
    """Refuse an unknown anchor, the node itself, or one that continues the node (a cycle)."""
    if anchor is None:
        return
    _require(graph, anchor)
    if anchor == node:
        raise AnchorCycleError(f"turn node {node!r} cannot continue itself")
    if graph.creates_cycle(node, anchor):
        raise AnchorCycleError(f"{anchor!r} continues turn node {node!r}; anchoring there would close a cycle")


def _require(graph: SessionGraph, node_id: str, what: str = "node") -> None:
    if node_id not in graph:
        raise UnknownNodeError(f"unknown {what} {node_id!r} in session {graph.session_id!r}")


class BranchService:
    """The canvas's branch actions over the engine's context."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, turns: TurnService) -> None:
        self.ctx, self.sessions, self.turns = ctx, sessions, turns

    # ------------------------------------------------------------------ re-anchoring

    async def reanchor(self, turn_id: str, anchor_node: str | None) -> Reanchored:
        """Make the turn's node continue ``anchor_node`` (None: a new root) and rebuild its context.

        The rebuild uses the turn's text, time, budget and model limits as recorded, the session
        as of the turn (``SessionState.as_of``), its recorded focus and LLM intent observation, and
        its recorded index channel hits (vector, full text, memory: observations of the outside,
        as replay uses them); structured, graph and recent recall run again for the new anchor.
        The answer is not regenerated. The old ``continues`` edge is superseded, never deleted;
        the new anchor becomes a routing override for later similar inputs (a new root does not).
        A turn still answering is re-anchored once its answer is recorded.

        Raises ``UnknownNodeError`` (unknown turn or node), ``AnchorCycleError`` (the node itself
        or a node continuing it) and ``BranchError`` (a history turn without a recorded build).
        """
        return await self._change_anchor(turn_id, anchor_node, undo=False)

    async def undo_reanchor(self, turn_id: str) -> Reanchored:
        """Take back the turn's latest re-anchor not undone yet: the anchor, the build and the
        routing override before it are restored (as new live edge and record revision; nothing
        is deleted). Redo is ``reanchor`` again. Raises ``NothingToUndoError``."""
        return await self._change_anchor(turn_id, None, undo=True)

    async def _change_anchor(self, turn_id: str, anchor: str | None, *, undo: bool) -> Reanchored:
        row = await self.ctx.on_store(self.ctx.store.get_turn, turn_id)
        if row is None:
            raise UnknownNodeError(f"unknown turn {turn_id!r}")
        state = await self.sessions.open(row["session_id"])
        async with settled(self.turns, turn_id, state.session_id):
            return await self._change_anchor_locked(state, turn_id, anchor, undo)

    async def _change_anchor_locked(self, state: SessionState, turn_id: str, anchor: str | None,
                                    undo: bool) -> Reanchored:
        session_id = state.session_id
        try:
            record = await self.turns.record(turn_id)  # read under the lock: the latest revision
        except NoRecordError:
            raise BranchError(f"turn {turn_id!r} has no recorded build (imported history)") from None
        node = record.node_id
        if node is None or node not in state.graph:
            raise UnknownNodeError(f"turn {turn_id!r} has no node in the session graph")
        current = state.graph.parent(node)
        undoes = _undo_index(record, turn_id) if undo else None
        if undoes is not None:
            anchor = record.revisions[undoes].previous_anchor
        _check_anchor(state.graph, node, anchor)
        if anchor == current and not undo:
            return Reanchored(session_id, turn_id, node, current, anchor, record, GraphChange())
        past: SessionState | None = None
        if undoes is not None:
            build, timing = record.revisions[undoes].build, record.revisions[undoes].timing
        else:
            past = state.as_of(turn_id)
            mids = state.turns[turn_id].message_ids
            build, timing = await self.turns.rebuild(record, past, anchor_override=NEW_ROOT if anchor is None else anchor,
                                                     input_id=mids[0] if mids else "input")
        return await self._commit_anchor(state, record, current, anchor, build, timing, past, undoes)

    async def _commit_anchor(self, state: SessionState, record: TurnRecord, current: str | None, anchor: str | None,
                             build: BuildRecord, timing: StageTiming, past: SessionState | None,
                             undoes: int | None) -> Reanchored:
        """Write the anchor change (retired and new ``continues`` edges, the record's new revision,
        the cited messages as evidence) and apply it to the live state."""
        session_id, turn_id, node, graph = state.session_id, record.turn_id, record.node_id, state.graph
        assert node is not None
        undo = undoes is not None
        at_seq, now = len(state.turn_order), utc_now()
        removed = [e.model_copy(update={"attrs": {**e.attrs, "valid_to": now, "valid_to_seq": at_seq}})
                   for e in graph.out_edges(node, EdgeKind.CONTINUES)]
        added = [] if anchor is None else [GraphEdge(
            src=node, dst=anchor, kind=EdgeKind.CONTINUES, created_at=now,
            attrs={"valid_from": now, "valid_from_seq": at_seq})]
        revision = TurnRevision(
            kind="undo" if undo else "reanchor", at=now, at_seq=at_seq, previous_anchor=current, anchor=anchor,
            build=record.build, timing=record.timing, removed_edges=[e.edge_id for e in removed],
            added_edges=[e.edge_id for e in added], undoes=undoes,
        )
        new = record.model_copy(update={"build": build, "timing": timing, "revisions": [*record.revisions, revision]})
        data = new.model_dump(mode="json")
        event: dict[str, Any] = {"turn_id": turn_id, "node_id": node, "from": current, "to": anchor, "at_seq": at_seq,
                                 "removed_edges": revision.removed_edges, "added_edges": revision.added_edges}
        if undoes is not None:
            event["undoes"] = undoes
        # The canvas offers "undo re-anchor" on nodes that have one left to undo.
        marked = graph.node(node).model_copy(update={"attrs": {**graph.node(node).attrs,
                                                               "reanchored": undo_target(new.revisions) is not None}})
        store = self.ctx.store

        def persist() -> None:
            with store.transaction():
                if past is not None:
                    write_cited(store, past, build)
                for edge in [*removed, *added]:
                    store.save_edge(session_id, edge)
                store.update_turn(turn_id, anchor_node_id=anchor, record=data)
                store.save_node(session_id, marked)
                store.append_event(session_id, "turn.reanchor_undone" if undo else "turn.reanchored", event)

        await self.ctx.on_store(persist)
        for edge in removed:
            graph.retire_edge(edge.edge_id, edge.attrs)
        for edge in added:
            state.add_edge(edge)
        graph.update_node(node, attrs={"reanchored": marked.attrs["reanchored"]})
        state.replace_overrides(turn_id, override_spans(turn_id, state.turns[turn_id].seq, data))
        change = GraphChange(added_edges=tuple(e.edge_id for e in added), removed_edges=tuple(e.edge_id for e in removed))
        return Reanchored(session_id, turn_id, node, current, anchor, new, change, undo=undo)

    # ------------------------------------------------------------------ injecting results

    async def inject(self, session_id: str, source_node_ids: Sequence[str], target_node: str) -> Injected:
        """Merge the selected results into another branch: a ``merges`` edge from ``target_node``
        to each source, so builds anchored on the target or on anything continuing it recall the
        sources' messages (the input and its answer) as members of their chain.

        Raises ``UnknownNodeError`` and ``BranchError`` (a source equal to the target).
        """
        state = await self.sessions.open(session_id)
        graph = state.graph
        async with self.ctx.lock(session_id):
            _require(graph, target_node)
            for source in source_node_ids:
                _require(graph, source)
                if source == target_node:
                    raise BranchError(f"node {source!r} cannot be merged into itself")
            merged = {e.dst for e in graph.out_edges(target_node, EdgeKind.MERGES)}
            fresh = [s for s in dict.fromkeys(source_node_ids) if s not in merged]
            skipped = tuple(s for s in dict.fromkeys(source_node_ids) if s in merged)
            at_seq, now = len(state.turn_order), utc_now()
            edges = [GraphEdge(src=target_node, dst=s, kind=EdgeKind.MERGES, created_at=now,
                               attrs={"valid_from": now, "valid_from_seq": at_seq}) for s in fresh]

            store = self.ctx.store

            def persist() -> None:
                with store.transaction():
                    for edge in edges:
                        store.save_edge(session_id, edge)
                    store.append_event(session_id, "graph.injected", {
                        "target": target_node, "sources": fresh, "skipped": list(skipped),
                        "edges": [e.edge_id for e in edges], "at_seq": at_seq})

            if edges:
                await self.ctx.on_store(persist)
            for edge in edges:
                state.add_edge(edge)
        return Injected(session_id, target_node, tuple(fresh), skipped, GraphChange(added_edges=tuple(e.edge_id for e in edges)))

    async def undo_inject(self, injected: Injected) -> GraphChange:
        """Take back an ``inject``: its ``merges`` edges still live are retired (bounded by the
        session's turn count, so turns built meanwhile still replay with them). Redo is
        ``inject`` again. Returns the edges retired (none when they were already gone)."""
        state = await self.sessions.open(injected.session_id)
        graph = state.graph
        async with self.ctx.lock(injected.session_id):
            live = [graph.edge(e) for e in injected.change.added_edges if graph.has_edge(e)]
            at_seq, now = len(state.turn_order), utc_now()
            retired = [e.model_copy(update={"attrs": {**e.attrs, "valid_to": now, "valid_to_seq": at_seq}}) for e in live]

            store = self.ctx.store

            def persist() -> None:
                with store.transaction():
                    for edge in retired:
                        store.save_edge(injected.session_id, edge)
                    store.append_event(injected.session_id, "graph.inject_undone", {
                        "target": injected.target_node, "edges": [e.edge_id for e in retired], "at_seq": at_seq})

            if retired:
                await self.ctx.on_store(persist)
            for edge in retired:
                graph.retire_edge(edge.edge_id, edge.attrs)
        return GraphChange(removed_edges=tuple(e.edge_id for e in retired))

    # ------------------------------------------------------------------ node marks and positions
    # Node records are changed in memory first (the signals redraw at once) and then written; the
    # store executor runs writes in order, so the last change of a node is the one stored.

    async def _update_nodes(self, session_id: str, attrs: Mapping[str, Mapping[str, Any]], event: str,
                            payload: dict[str, Any]) -> GraphChange:
        state = await self.sessions.open(session_id)
        for node_id in attrs:
            _require(state.graph, node_id)
        for node_id, values in attrs.items():
            state.graph.update_node(node_id, attrs=dict(values))
        nodes = [state.graph.node(n) for n in attrs]
        store = self.ctx.store

        def persist() -> None:
            with store.transaction():
                for node in nodes:
                    store.save_node(session_id, node)
                store.append_event(session_id, event, payload)

        await self.ctx.on_store(persist)
        return GraphChange(updated_nodes=tuple(attrs))

    async def set_focus(self, session_id: str, node_id: str | None) -> FocusChanged:
        """Switch the user's focus to ``node_id`` (None: follow the latest turn again).

        Later builds get it as ``BuildInputs.focus_node`` (recorded as ``routing["focus"]``). Kept
        as ``attrs["focused"]`` on the node, so reopening the session keeps it.
        """
        state = await self.sessions.open(session_id)
        if node_id is not None:
            _require(state.graph, node_id)
        previous = state.focus
        if previous == node_id:
            return FocusChanged(session_id, previous, node_id, GraphChange())
        flags: dict[str, dict[str, Any]] = {}
        if previous is not None and previous in state.graph:
            flags[previous] = {"focused": False}
        if node_id is not None:
            flags[node_id] = {"focused": True}
        state.focus = node_id
        change = await self._update_nodes(session_id, flags, "session.focus_set", {"node_id": node_id, "previous": previous})
        return FocusChanged(session_id, previous, node_id, change)

    async def checkpoint(self, session_id: str, node_id: str, label: str = "", *, remove: bool = False,
                         kept: dict[str, Any] | None = None) -> GraphChange:
        """Mark a node as a checkpoint (``attrs["checkpoint"]``: ``label``, or the time now) with
        the branch state it ``kept`` (``attrs["checkpoint_state"]``, ``checkpoints.py``);
        ``remove=True`` clears both (``None``). Returns the change (``updated_nodes``)."""
        value = None if remove else (label or utc_now())
        kept = None if remove else kept
        return await self._update_nodes(session_id, {node_id: {"checkpoint": value, "checkpoint_state": kept}},
                                        "graph.checkpoint_set", {"node_id": node_id, "checkpoint": value,
                                                                 "checkpoint_state": kept})

    async def set_collapsed(self, session_id: str, node_id: str, collapsed: bool) -> GraphChange:
        """Fold or unfold a node's subtree on the canvas (``attrs["collapsed"]``)."""
        return await self._update_nodes(session_id, {node_id: {"collapsed": bool(collapsed)}}, "graph.collapsed_set",
                                        {"node_id": node_id, "collapsed": bool(collapsed)})

    async def show_version(self, session_id: str, node_id: str) -> GraphChange:
        """Show ``node_id`` among the versions of its turn and put the others away
        (``attrs["version_hidden"]``, see ``app.core.session.versions``)."""
        state = await self.sessions.open(session_id)
        _require(state.graph, node_id)
        group = versions.versions(state.graph, node_id)
        return await self._update_nodes(session_id, {n: {versions.HIDDEN: n != node_id} for n in group},
                                        "graph.version_shown", {"node_id": node_id, "versions": group})

    async def move_nodes(self, session_id: str, positions: Sequence[tuple[str, float, float]]) -> GraphChange:
        """Pin user-chosen positions (one committed drag); written in one transaction.
        Returns the change (``moved_nodes``); ``node_moved`` is emitted per node."""
        state = await self.sessions.open(session_id)
        for node_id, _, _ in positions:
            _require(state.graph, node_id)
        for node_id, x, y in positions:
            state.graph.move_node(node_id, x, y, pinned=True)
        store = self.ctx.store

        def persist() -> None:
            with store.transaction():
                for node_id, x, y in positions:
                    store.set_node_position(node_id, float(x), float(y), True)

        await self.ctx.on_store(persist)
        return GraphChange(moved_nodes=tuple(dict.fromkeys(n for n, _, _ in positions)))
