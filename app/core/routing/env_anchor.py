"""ENV nodes as anchor candidates: an input may continue the branch an environment event belongs to.

An env event's ENV node (``engine/environment.py``) has a ``references`` edge to the task or turn
it was routed to, or none (the environment lane). Anchor routing offers the latest of them
(``env_nodes``) beside the turns, so "what changed in the report?" can route to the change. An
ENV node's meaning is the cosine of the input and the event's indexed text (its label and the
start of its content: the index's vector under the event's id), its names those of its label and
note, its recency the event's own time; it has focus while nothing was said after it, and a
follow-up refers to it when it is the latest thing on the tree it continues (the features:
``routing.candidates._env_candidates``); it has no author or override.

``env_branch`` says where a turn routed to an ENV node continues: the turn its edge points to;
for a task, the latest turn that worked on it (its own runs or its steps'), else the turn that
made it; in the lane, the ENV node itself (a new branch grows from it). The route decision names
the ENV node (so a replay routes the same way); the build pins the event's note as evidence.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from app.core.session.state import NoteView, SessionState
from app.core.types import EdgeKind, NodeKind, Task


def env_nodes(state: SessionState, limit: int, excluded: Collection[str] = ()) -> list[tuple[str, NoteView]]:
    """(ENV node, its event's note) of the latest ``limit`` env events the state holds (none the
    input excludes), oldest first."""
    found = []
    for note in state.notes.values():
        if note.kind != "env" or note.note_id in excluded:
            continue
        node = state.node_of(note.note_id)
        if node is not None and node in state.graph and state.graph.node(node).kind == NodeKind.ENV:
            found.append((node, note))
    found.sort(key=lambda item: (item[1].added_at, item[1].at, item[0]))
    return found[-limit:] if limit > 0 else []


def _task_branch(state: SessionState, task_id: str, tasks: Sequence[Task]) -> str | None:
    """The node of the latest turn that worked on ``task_id`` (its runs, its steps' runs), else the
    node of the turn that made it."""
    mine = [t for t in tasks if t.task_id == task_id or t.parent_task_id == task_id]
    runs = [turn for t in mine for turn in t.runs if turn in state.turns and state.node_of(turn) is not None]
    if runs:
        return state.node_of(max(runs, key=lambda turn: state.turns[turn].seq))
    made = next((t.turn_id for t in mine if t.task_id == task_id and t.turn_id), None)
    return state.node_of(made) if made and made in state.turns else None


def env_branch(state: SessionState, node_id: str, tasks: Sequence[Task]) -> str:
    """The node a turn routed to the ENV node ``node_id`` continues (module doc)."""
    for edge in state.graph.out_edges(node_id, EdgeKind.REFERENCES):
        if edge.dst not in state.graph:
            continue
        target = state.graph.node(edge.dst)
        if target.kind == NodeKind.TURN:
            return edge.dst
        if target.kind == NodeKind.TASK and target.ref_id:
            found = _task_branch(state, target.ref_id, tasks)
            if found is not None and found in state.graph:
                return found
    return node_id
