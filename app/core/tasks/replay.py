"""Replay of the task state: fold the ``task.changed`` events of a session into tasks, task nodes
and their edges, and compare that with the store and the live state (pure functions).

Each event carries one revision (``app.core.engine.tasks``): its number, the full records of
the tasks, nodes and edges it wrote. Folding them in log order (last record wins) must give
exactly what the store holds and what the engine has in memory; ``compare`` says where not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.session.graph import SessionGraph
from app.core.tasks.stack import TaskStack
from app.core.types import EdgeKind, NodeKind, Task, json_diff

TASK_EVENT = "task.changed"
TASK_EDGES = frozenset({EdgeKind.SPAWNED, EdgeKind.RESOLVES, EdgeKind.REFERENCES})
#: Node attributes the task state owns (others, e.g. "collapsed", belong to the canvas).
TASK_ATTRS = ("status", "progress", "tokens", "steps", "stream_id", "error", "paused", "steer")
STREAMED_ATTRS = frozenset({"progress", "tokens", "steps"})  # shown live while a task streams


@dataclass
class Folded:
    """The task state the events describe: records by id in first-seen order, and log problems."""

    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)  # task results' artifact nodes and edges
    last_rev: int = 0
    problems: list[str] = field(default_factory=list)


def fold(events: Iterable[Mapping[str, Any]]) -> Folded:
    """Fold event log entries (``task.changed`` ones; others are skipped) in order; a revision
    out of sequence (not 1, 2, 3, …) is reported."""
    out = Folded()
    for event in events:
        if event["type"] != TASK_EVENT:
            continue
        payload = event["payload"]
        if payload["rev"] != out.last_rev + 1:
            out.problems.append(f"event {event['seq']}: revision {payload['rev']}, expected {out.last_rev + 1}")
        out.last_rev = payload["rev"]
        for t in payload["tasks"]:
            out.tasks[t["task_id"]] = t
        for n in payload["nodes"]:
            (out.artifacts if n["kind"] == NodeKind.ARTIFACT.value else out.nodes)[n["node_id"]] = n
        for e in payload["edges"]:
            (out.artifacts if e["kind"] == EdgeKind.DERIVED_FROM.value else out.edges)[e["edge_id"]] = e
    return out


def _dump(records: Sequence[Task]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in records]


def compare(folded: Folded, *, stored: Sequence[Task], live: Sequence[Task], rev: int, graph: SessionGraph,
            running: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Differences between the folded events and the stored tasks, the live tasks (at revision
    ``rev``) and the live graph's task nodes and edges; plus broken rules: the stack's
    (``TaskStack.check``), a task node without its ``spawned`` edge (only a root made directly
    has none), a node standing for no task. Streamed attributes of ``running`` tasks are not
    compared (they are written with the task's next revision)."""
    out = list(folded.problems)
    if folded.last_rev != rev:
        out.append(f"revisions: the log ends at {folded.last_rev}, the live state is at {rev}")
    replayed = [Task.model_validate(t) for t in folded.tasks.values()]
    out += [f"store tasks{d}" for d in json_diff(_dump(replayed), _dump(stored))]
    out += [f"live tasks{d}" for d in json_diff(_dump(replayed), _dump(live))]
    out += [f"stack: {p}" for p in TaskStack(replayed).check()]
    nodes, edges = folded.nodes, folded.edges
    live_nodes = {n.node_id: n for n in graph.nodes(NodeKind.TASK)}
    if set(live_nodes) != set(nodes):
        out.append(f"task nodes: replayed {sorted(nodes)} != live {sorted(live_nodes)}")
    for node_id, data in nodes.items():
        if node_id not in live_nodes:
            continue
        node = live_nodes[node_id]
        keys = [k for k in TASK_ATTRS if not (data["ref_id"] in running and k in STREAMED_ATTRS)]
        mine = {"label": data["label"], "ref_id": data["ref_id"], "attrs": {k: data["attrs"].get(k) for k in keys}}
        theirs = {"label": node.label, "ref_id": node.ref_id, "attrs": {k: node.attrs.get(k) for k in keys}}
        out += [f"node {node_id}{d}" for d in json_diff(mine, theirs)]
    # An env event's ``references`` edge into a task node is the environment's (logged as
    # ``env.routed``), not a revision of the task state.
    env_nodes = {n.node_id for n in graph.nodes(NodeKind.ENV)}
    live_edges = {e.edge_id for e in graph.edges() if e.kind in TASK_EDGES and e.src not in env_nodes
                  and (e.src in live_nodes or e.dst in live_nodes)}
    if live_edges != set(edges):
        out.append(f"task edges: replayed {sorted(edges)} != live {sorted(live_edges)}")
    results = [n for n in graph.nodes(NodeKind.ARTIFACT) if "task_id" in n.attrs]
    live_results = {n.node_id for n in results} | {e.edge_id for n in results for e in graph.out_edges(n.node_id)}
    if live_results != set(folded.artifacts):
        out.append(f"task results: replayed {sorted(folded.artifacts)} != live {sorted(live_results)}")
    by_task = {t.task_id: t for t in replayed}
    spawned_into = {e["dst"] for e in edges.values() if e["kind"] == EdgeKind.SPAWNED.value}
    for node_id, data in nodes.items():
        task = by_task.get(data["ref_id"])
        if task is None:
            out.append(f"task node {node_id}: stands for no task ({data['ref_id']})")
            continue
        if (task.turn_id is not None or task.parent_task_id is not None) and node_id not in spawned_into:
            out.append(f"task node {node_id}: no spawned edge into it")
        if task.node_id != node_id:
            out.append(f"task {task.task_id}: node {task.node_id} != {node_id}")
    return out
