"""The canvas's topic filter, pure (no Qt): which topics a session mentions, and which of its nodes
a chosen topic keeps undimmed.

Topics come from the workspace's topic index (``Engine.topics()``, ``app.core.memory.topics``):
names in the user's inputs (and in imported history), with their aliases ("k8s" is "Kubernetes").
A topic keeps, of the session's graph:

- the turn nodes whose messages mention it (its mentions, whatever alias they used);
- the task nodes that hold such a turn (met going up its branch: the node it continues, and the
  node that spawned a task), and the tasks such a turn spawned, resolves or refers to, so the
  tree around the kept turns stays readable; the other turns on the way stay dimmed;
- the memory and artifact nodes derived from the kept nodes (what a turn left in memory, a
  kept task's results).

Environment nodes are left out: the topic index does not read environment events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.core.types import EdgeKind, NodeKind

if TYPE_CHECKING:
    from app.core.memory.topics import TopicIndex
    from app.core.session.graph import SessionGraph
    from app.core.session.state import SessionState

#: Edges that join a turn to a task it is about (besides the branch it sits on).
TASK_LINKS = (EdgeKind.SPAWNED, EdgeKind.RESOLVES, EdgeKind.REFERENCES)


def session_topics(index: TopicIndex, session_id: str) -> list[tuple[str, str, int]]:
    """(topic id, name, how many of the session's messages mention it) of every topic the session
    mentions, the most mentioned first (then by name)."""
    counts = Counter(m.topic_id for m in index.mentions if m.session_id == session_id)
    rows = [(tid, index.topics[tid].name, n) for tid, n in counts.items() if tid in index.topics]
    return sorted(rows, key=lambda r: (-r[2], r[1].lower(), r[0]))


def topic_label(name: str, count: int) -> str:
    """A topic as the chooser lists it: its name and how many messages mention it."""
    return f"{name} ({count})"


def topic_messages(index: TopicIndex, topic_id: str, session_id: str) -> list[str]:
    """The ids of the session's messages that mention the topic."""
    return [m.message_id for m in index.messages_of(topic_id) if m.session_id == session_id]


def topic_nodes(state: SessionState, message_ids: Iterable[str]) -> set[str]:
    """The node ids a topic keeps (see the module docstring), given the messages that mention it."""
    graph = state.graph
    turns = {n for n in state.nodes_of_evidence(message_ids) if n in graph}
    keep = set(turns)
    climbed: set[str] = set()
    for node_id in turns:
        keep |= _holding_tasks(graph, node_id, climbed)
        for edge in graph.out_edges(node_id) + graph.in_edges(node_id):
            other = edge.dst if edge.src == node_id else edge.src
            if edge.kind in TASK_LINKS and graph.node(other).kind == NodeKind.TASK:
                keep.add(other)
    for node_id in list(keep):
        for edge in graph.in_edges(node_id, EdgeKind.DERIVED_FROM):
            if graph.node(edge.src).kind in (NodeKind.MEMORY, NodeKind.ARTIFACT):
                keep.add(edge.src)
    return keep


def _holding_tasks(graph: SessionGraph, node_id: str, climbed: set[str]) -> set[str]:
    """The task nodes above ``node_id`` on its branch: up the ``continues`` edges, and from a task
    to what spawned it. ``climbed`` (shared between calls) stops a walk where an earlier one went."""
    tasks: set[str] = set()
    current: str | None = node_id
    while current is not None and current not in climbed:
        climbed.add(current)
        node = graph.node(current)
        if node.kind == NodeKind.TASK:
            tasks.add(current)
        up = graph.parent(current)
        if up is None and node.kind == NodeKind.TASK:
            spawned = graph.in_edges(current, EdgeKind.SPAWNED)
            up = spawned[0].src if spawned else None
        current = up
    return tasks
