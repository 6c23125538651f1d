"""Answer versions: regenerating a turn makes another version of it, not a second turn beside it.

A version is a turn of its own (its own input record, build, trace and answer, replayed like any
turn) whose node carries ``attrs["version_of"]``: the node id of the group's first version. A
new version continues the node the turn it answers again continues (after a re-anchor, the new
place; the earlier versions stay where they were). Exactly one of them is shown; the others carry
``attrs["version_hidden"] = True`` and, with everything continuing them, are left out of the
canvas, of routing (an input never continues a version the user put away) and of the recall of
a new version (it answers afresh instead of repeating the one it replaces).

A turn that started a task makes, answered again, a version of that task: the new task node
carries ``version_of`` the first task node (``task_version_of``), stands in its place and numbers
its result after the results of the earlier versions ("Result v2"); it shows with the turn version
that spawned it, as the earlier ones hide with theirs.

Pure functions over the session graph and state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.errors import CoreError
from app.core.session.graph import SessionGraph
from app.core.types import EdgeKind, NodeKind

if TYPE_CHECKING:
    from app.core.session.state import SessionState

VERSION_OF = "version_of"
HIDDEN = "version_hidden"


class NotATurnError(CoreError):
    """Only a turn with an input can be answered again."""


@dataclass(frozen=True)
class Version:
    """A turn submitted as another version of an earlier one: the group it joins and the messages
    its build leaves out of recall (``answer_again``)."""

    group: str
    excluded: tuple[str, ...] = ()


def attrs(version: Version | None) -> dict[str, Any]:
    """The node attributes that make a new turn a version (none for an ordinary turn)."""
    return {VERSION_OF: version.group} if version is not None else {}


def group_of(graph: SessionGraph, node_id: str) -> str:
    """The id that names ``node_id``'s version group (its first version's node)."""
    return str(graph.node(node_id).attrs.get(VERSION_OF) or node_id)


def versions(graph: SessionGraph, node_id: str) -> list[str]:
    """The versions of ``node_id``'s turn (or task), oldest first (just ``[node_id]`` when it has none)."""
    group = group_of(graph, node_id)
    kind = graph.node(node_id).kind
    found = [n for n in graph.nodes(kind) if n.node_id == group or n.attrs.get(VERSION_OF) == group]
    return [n.node_id for n in sorted(found, key=lambda n: n.created_at)] or [node_id]


def task_version_of(graph: SessionGraph, turn_node: str) -> str | None:
    """The task node (its first version) that an earlier version of ``turn_node``'s turn started:
    the task a new version of a task turn makes a version of (None: not a version, or no task)."""
    if not graph.node(turn_node).attrs.get(VERSION_OF):
        return None
    for earlier in versions(graph, turn_node):
        for edge in graph.out_edges(earlier, EdgeKind.SPAWNED) if earlier != turn_node else ():
            if edge.dst in graph and graph.node(edge.dst).kind == NodeKind.TASK and not edge.attrs.get("subtask"):
                return group_of(graph, edge.dst)
    return None


def results_before(graph: SessionGraph, task_node: str) -> int:
    """How many results (artifacts ``derived_from`` a task node) the versions of ``task_node``'s
    task have: the next result is numbered after them."""
    return sum(1 for n in versions(graph, task_node) for e in graph.in_edges(n, EdgeKind.DERIVED_FROM)
               if e.src in graph and graph.node(e.src).kind == NodeKind.ARTIFACT)


def put_away_messages(state: SessionState) -> list[str]:
    """The messages of hidden versions and of what continues them: a turn's build excludes them
    from recall and routing (recorded with the build, so replay sees what the turn saw)."""
    graph = state.graph
    hidden = [n.node_id for n in graph.nodes(NodeKind.TURN) if n.attrs.get(HIDDEN)]
    away = dict.fromkeys(n for v in hidden for n in (v, *graph.descendants(v)))
    return [m for n in away for m in state.turn_messages(n)]


def answer_again(state: SessionState, node_id: str) -> tuple[str, str | None, Version]:
    """What answering ``node_id``'s input again needs: the input text, the node the turn
    continues (None: a root), and the ``Version`` — its group, and the messages the new version
    must not recall (those of every existing version and of what continues them)."""
    graph = state.graph
    if node_id not in graph or graph.node(node_id).kind != NodeKind.TURN:
        raise NotATurnError("only a turn can be answered again")
    turn = state.turns.get(graph.node(node_id).ref_id or "")
    if turn is None or not turn.message_ids:
        raise NotATurnError("this turn has no input to answer again")
    text = state.messages[turn.message_ids[0]].text
    group = versions(graph, node_id)
    away = [n for v in group for n in (v, *graph.descendants(v))]
    excluded = [m for n in dict.fromkeys(away) for m in state.turn_messages(n)]
    return text, graph.parent(node_id), Version(group_of(graph, node_id), tuple(excluded))


def show_only(state: SessionState, node_id: str, store: Any) -> Callable[[], None]:
    """Put away the other versions of ``node_id``'s turn in the live graph; returns the write
    (``store.save_node`` of each) that joins the caller's transaction."""
    others = [n for n in versions(state.graph, node_id) if n != node_id]
    for other in others:
        state.graph.update_node(other, attrs={HIDDEN: True})
    nodes = [state.graph.node(n) for n in others]

    def persist() -> None:
        for node in nodes:
            store.save_node(state.session_id, node)

    return persist
