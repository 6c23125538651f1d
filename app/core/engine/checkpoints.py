"""Checkpoints that keep their branch's state, and "Restore", which starts a sibling branch there.

``mark`` (``Engine.checkpoint``) sets ``attrs["checkpoint"]`` on a turn or task node (its label,
or the time) and ``attrs["checkpoint_state"]``, the branch's state at that moment:

- ``tasks``: the task stack of the branch (``tasks/restore.branch_tasks``: the roots a turn of
  the node's chain spawned, or the task the node is, with their steps), as records;
- ``summaries``: the branch summaries on offer then, by branch root and level (their ids);
- ``detail``: the detail settings (expand, collapse, focus) of the node's turn (``Detail``).

Removing the mark clears both. ``restore`` (``Engine.restore_checkpoint``) copies the tasks that
were open then (``tasks/restore.restored``: paused, their steps as they were, the work kept at
their checkpoints), their root's node spawned by the checkpoint's turn, as one revision of the
task state (op ``restore``, replayed like every other) and logs ``checkpoint.restored``. It
returns where the sibling branch starts — the checkpoint's turn node — and the turn whose detail
it starts with: an input sent from there with ``detail_from`` carries that detail, and resuming a
restored task runs its steps from there, beside the branch that went on after the checkpoint.
Both are offered the branch summaries the checkpoint kept (``kept_offer``), not the ones that
went on with the other branch since; the build records them, so a replay sees the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.engine.branches import BranchError, BranchService, UnknownNodeError
from app.core.engine.context import EngineContext
from app.core.engine.sessions import SessionService
from app.core.engine.tasks import TaskService
from app.core.engine.turns import TurnService
from app.core.pipeline.detail import Detail
from app.core.pipeline.summary_items import Offered
from app.core.session.graph import GraphChange
from app.core.session.state import SessionState
from app.core.tasks.restore import branch_tasks, restored
from app.core.types import NodeKind, SummaryRecord, Task, utc_now


def _root_of(tasks: list[Task], task_id: str) -> str:
    """The root of ``task_id`` among ``tasks`` (a step's card carries the mark: its task's)."""
    parents = {t.task_id: t.parent_task_id for t in tasks}
    while parents.get(task_id):
        task_id = parents[task_id] or task_id
    return task_id


def _restored_from(state: SessionState, turn_id: str | None, task_id: str | None) -> str | None:
    """The checkpoint node a restored branch started from: the one the task (a restored copy) names,
    else a checkpoint that keeps ``turn_id`` as its turn (its own node first)."""
    graph = state.graph
    node = state.node_of(task_id) if task_id else None
    mark = graph.node(node).attrs.get("restored") if node is not None and node in graph else None
    if mark is not None and mark in graph and graph.node(mark).attrs.get("checkpoint_state"):
        return str(mark)
    if not turn_id:
        return None
    own = state.node_of(turn_id)
    nodes = ([graph.node(own)] if own is not None and own in graph else []) + graph.nodes()
    return next((n.node_id for n in nodes if (n.attrs.get("checkpoint_state") or {}).get("turn_id") == turn_id), None)


@dataclass(frozen=True)
class Restored:
    """A checkpoint restored: where the new branch starts (the checkpoint's turn node), the turn
    whose detail settings it starts with, the restored tasks (paused roots first, then their
    steps), the summaries and the detail kept, and one line saying it."""

    session_id: str
    node_id: str
    anchor: str
    turn_id: str | None
    tasks: tuple[Task, ...]
    summaries: dict[str, dict[str, str]]
    detail: Detail
    line: str


class CheckpointService:
    """See the module doc."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, turns: TurnService, tasks: TaskService,
                 branches: BranchService, offer: Callable[[str], Offered]) -> None:
        self.ctx, self.sessions, self.turns, self.tasks = ctx, sessions, turns, tasks
        self.branches, self.offer = branches, offer

    async def mark(self, session_id: str, node_id: str, label: str = "", *, remove: bool = False) -> GraphChange:
        """Mark ``node_id`` as a checkpoint keeping its branch's state (or clear the mark)."""
        state = await self.sessions.open(session_id)
        if node_id not in state.graph:
            raise UnknownNodeError(f"There is no node {node_id!r} in this session.")
        kept = None if remove else await self._branch_state(state, node_id)
        return await self.branches.checkpoint(session_id, node_id, label, remove=remove, kept=kept)

    async def _branch_state(self, state: SessionState, node_id: str) -> dict[str, Any]:
        graph = state.graph
        chain = [graph.node(n).ref_id for n in graph.chain_back(node_id) if graph.node(n).kind == NodeKind.TURN]
        node = graph.node(node_id)
        every = await self.tasks.tasks(state.session_id)
        named = [_root_of(every, node.ref_id)] if node.kind == NodeKind.TASK and node.ref_id else []
        tasks = branch_tasks(every, {t for t in chain if t}, named)
        turn_id = self._turn_of(state, node_id, tasks)
        detail = await self.turns.detail_of(turn_id) if turn_id else None
        summaries = {root: {level: record.summary_id for level, record in levels.items()}
                     for root, levels in self.offer(state.session_id).items()}
        return {"tasks": [t.model_dump(mode="json") for t in tasks], "summaries": summaries, "turn_id": turn_id,
                "detail": (detail or Detail()).model_dump(mode="json")}

    async def kept_offer(self, session_id: str, *, turn_id: str | None = None,
                         task_id: str | None = None) -> dict[str, dict[str, SummaryRecord]] | None:
        """The branch summaries a restored checkpoint kept (root → level → the version then), for a
        build on the branch restored from it: an input sent with ``detail_from`` its turn, or a
        run of a task restored from it. None: no restored checkpoint, or it kept no summary."""
        state = await self.sessions.open(session_id)
        mark = _restored_from(state, turn_id, task_id)
        ids: dict[str, dict[str, str]] = state.graph.node(mark).attrs["checkpoint_state"].get("summaries") or {} \
            if mark is not None else {}
        if not ids:
            return None
        wanted = {summary_id for levels in ids.values() for summary_id in levels.values()}

        def read() -> dict[str, SummaryRecord]:  # by id: every version of a long session is too much to list
            found = {sid: self.ctx.store.get_summary(sid) for sid in wanted}
            return {sid: record for sid, record in found.items() if record is not None}

        by_id = await self.ctx.on_store(read)
        return {root: {level: by_id[sid] for level, sid in levels.items() if sid in by_id} for root, levels in ids.items()}

    @staticmethod
    def _turn_of(state: SessionState, node_id: str, tasks: list[Task]) -> str | None:
        """The checkpoint's turn: the node's own, or the turn of the task the node is."""
        node = state.graph.node(node_id)
        if node.kind == NodeKind.TURN:
            return node.ref_id
        root = _root_of(tasks, node.ref_id or "")
        return next((t.turn_id for t in tasks if t.task_id == root), None)

    async def restore(self, session_id: str, node_id: str) -> Restored:
        """Copy the open tasks a checkpoint kept onto a sibling branch started there (module doc)."""
        state = await self.sessions.open(session_id)
        if node_id not in state.graph:
            raise UnknownNodeError(f"There is no node {node_id!r} in this session.")
        kept = state.graph.node(node_id).attrs.get("checkpoint_state")
        if not kept:
            raise BranchError("This card is no checkpoint that keeps its branch (mark it as a checkpoint first).")
        turn_id = kept.get("turn_id")
        anchor = state.node_of(turn_id) if turn_id else None
        if anchor is None:
            raise BranchError("The checkpoint's turn is gone: there is nothing to start a branch from.")
        book = await self.tasks.book(session_id)
        copies = restored([Task.model_validate(t) for t in kept["tasks"]], at=utc_now())
        if copies:
            nodes, edges, evidences = [], [], []
            for task in copies:
                book.stack.put(task)
                node, spawned, evidence = self.tasks.frame_records(session_id, task, anchor if task.parent_task_id
                                                                   is None else None, None, {"restored": node_id})
                nodes.append(node)
                edges += spawned
                evidences.append(evidence)
            change, persist = self.tasks.commit(session_id, "restore", copies, nodes=nodes, edges=edges,
                                                evidences=evidences)
            await self.tasks.write_now(persist)
            self.tasks.announce(session_id, change.tasks)
        await self.ctx.on_store(self.ctx.store.append_event, session_id, "checkpoint.restored", {
            "node_id": node_id, "anchor": anchor, "tasks": [t.task_id for t in copies]})
        roots = [t for t in copies if t.parent_task_id is None]
        line = ("Restored the checkpoint: a new branch starts here"
                + (f", with {len(roots)} task{'s' if len(roots) != 1 else ''} paused as they were (resume to go on)."
                   if roots else "."))
        return Restored(session_id, node_id, anchor, turn_id, tuple(copies), dict(kept.get("summaries") or {}),
                        Detail.model_validate(kept.get("detail") or {}), line)
