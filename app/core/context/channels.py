"""The local recall channels: structured filter, graph chain, the branch's recent window, topics.

Pure functions of the session state and the request; the index channels (vector, full text,
memory) run in ``app.core.context.retrieval``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

from app.core.context import ranking
from app.core.context.recall_model import RecallRequest
from app.core.session.membership import ROUTED, SOFT, soft_members
from app.core.session.state import SessionState
from app.core.types import EdgeKind

_NOTE_KINDS = {"file": "env", "feed": "env", "api": "env", "memory": "memory"}


def structured(state: SessionState, req: RecallRequest, size: int) -> list[tuple[str, float]]:
    """The metadata filter: messages of the speakers the input names, notes of the kinds it
    names (files, feeds, API values, memory), and in "prefer" mode nothing else; all within the
    date range when it filters; most recent first."""
    if size <= 0:
        return []
    # (at, id) lists, each latest first: the speakers' (kept by the state) and the notes'
    lists = [state.speaker_timeline(name) for name in dict.fromkeys(s.lower() for s in req.speakers)]
    wanted = {_NOTE_KINDS[k] for k in req.kinds if k in _NOTE_KINDS}
    lists.append(sorted(((n.at, n.note_id) for n in state.notes.values() if n.kind in wanted), reverse=True))
    out: list[tuple[str, float]] = []
    seen: set[tuple[str, str]] = set()
    for hit in heapq.merge(*lists, reverse=True):
        if hit in seen or (req.date_mode == "filter" and not req.in_range(hit[0])):
            continue
        seen.add(hit)
        out.append((hit[1], 1.0))
        if len(out) >= size:
            break
    return out


def graph(state: SessionState, req: RecallRequest, size: int) -> list[tuple[str, float]]:
    """Messages along the main chain back from the anchor (closer = higher), then those of turns
    merged into a chain node (scored like that node: injected results are chain members), then
    the anchor's neighbours, then the soft members of the other trees routing gave a share of
    the input (``soft``; half their share)."""
    out: dict[str, float] = {}
    if req.anchor_node is not None and req.anchor_node in state.graph:
        _chain(state, req.anchor_node, req.chain_turns, out)
    for node, kept in soft(state, req).items():
        for mid in state.turn_messages(node):
            out.setdefault(mid, kept / 2)
    return ranking_items(out)[:size]


def _chain(state: SessionState, anchor: str, turns: int, out: dict[str, float]) -> None:
    """The main chain's, merged turns' and the anchor's neighbours' messages into ``out``."""
    chain = state.main_chain(anchor, turns)
    for distance, node in enumerate(chain):
        for mid in state.turn_messages(node):
            out.setdefault(mid, 1.0 / (1 + distance))
    for distance, node in enumerate(chain):
        for edge in state.graph.out_edges(node, EdgeKind.MERGES):
            for mid in state.turn_messages(edge.dst):
                out.setdefault(mid, 1.0 / (1 + distance))
    for node in state.graph.neighbours(anchor):
        for mid in state.turn_messages(node):
            out.setdefault(mid, 0.25)


def soft(state: SessionState, req: RecallRequest) -> dict[str, float]:
    """Turn node → share kept, for the turns of the session's latest ``SOFT.window`` that the
    request's alternatives (other trees than the anchor's) reach (``session.membership``)."""
    if not req.alternatives:
        return {}
    graph = state.graph
    latest = {n for n in (state.node_of(t) for t in state.turn_order[-SOFT.window:]) if n is not None}
    own = graph.root_of(req.anchor_node) if req.anchor_node is not None and req.anchor_node in graph else None
    starts = [(n, s) for n, s in req.alternatives if n in graph and graph.root_of(n) != own]
    confidence = {n: float(e.attrs.get(ROUTED, 1.0)) for n in latest for e in graph.out_edges(n, EdgeKind.CONTINUES)}
    return soft_members(starts, parent=graph.parent, children=graph.children, confidence=confidence,
                        allowed=latest.__contains__)


def root_of_message(state: SessionState, message_id: str) -> str | None:
    """The root of the branch tree the message's turn is on (None when it has no node)."""
    view = state.messages.get(message_id)
    turn = state.turns.get(view.turn_id) if view is not None and view.turn_id else None
    if turn is None or turn.node_id is None or turn.node_id not in state.graph:
        return None
    return state.graph.root_of(turn.node_id)


def recent(state: SessionState, req: RecallRequest, size: int) -> list[tuple[str, float]]:
    """The latest messages of the anchor's branch tree (of the session without an anchor),
    within the date range when it filters; newest first, scored by position."""
    root = state.graph.root_of(req.anchor_node) if req.anchor_node and req.anchor_node in state.graph else None
    ids: list[str] = []
    scan = state.order[-max(size * 50, 500):] if root is not None else state.order
    for mid in reversed(scan):
        if len(ids) >= size:
            break
        if root is not None and root_of_message(state, mid) != root:
            continue
        if req.date_mode == "filter" and not req.in_range(state.messages[mid].at):
            continue
        ids.append(mid)
    n = len(ids)
    return [(m, (n - i) / n) for i, m in enumerate(ids)]


def item_text(state: SessionState, item: str) -> str:
    """A message's or note's text as recall reads it (its rendering; "" for an unknown id)."""
    view = state.messages.get(item)
    if view is not None:
        return view.render()
    note = state.notes.get(item)
    return note.render() if note else ""


def ranking_items(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    return [(i, scores[i]) for i in ranking.ranked(scores)]


def memory_kinds(state: SessionState, req: RecallRequest) -> list[str]:
    """Note kinds the memory channel searches: memory notes always; environment events too when
    the input asks about files, feeds or API values (elsewhere the vector channel's env hits are
    enough, and an unasked-for event would otherwise top this channel's list just for being the
    nearest one)."""
    wanted = {"memory"} | ({"env"} if {"file", "feed", "api"} & set(req.kinds) else set())
    return sorted(wanted & {n.kind for n in state.notes.values()})


#: The topic channel's search: (query, k, the session to search or None for the workspace) → hits.
TopicSearch = Callable[[str, int, str | None], list[tuple[str, float]]]


def topic(state: SessionState, req: RecallRequest, topics: TopicSearch | None, size: int,
          scoped: str | None) -> list[tuple[str, float]]:
    """The topic channel, within the plan's date range when it filters, as the other channels
    are (this session's messages are dated here; another session's hits are not dated here and
    are kept). While the input continues a branch of a session holding several conversations,
    this session's hits keep to the anchor's branch tree: a topic every conversation of the
    session shares ("install", "ubuntu") would otherwise rank the others' turns up; they enter
    through the other channels, on their own merit."""
    if topics is None or not size:
        return []
    anchor = req.anchor_node if req.anchor_node and req.anchor_node in state.graph else None
    root = state.graph.root_of(anchor) if anchor and state.graph.several_conversations() else None
    if req.date_mode != "filter" and root is None:
        return topics(req.query, size, scoped)
    hits = topics(req.query, 2 * size, scoped)
    return [(i, s) for i, s in hits if i not in state.messages or (
        (req.date_mode != "filter" or req.in_range(state.messages[i].at))
        and (root is None or root_of_message(state, i) == root))][:size]
