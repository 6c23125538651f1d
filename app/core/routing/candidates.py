"""Anchor routing's candidates for one input: branch frontiers and recent turns with their features.

``anchor_candidates`` computes, for every candidate node, the features ``AnchorRouter`` fuses
(``app.core.routing.anchor.Feature``): meaning, the names the input shares with it, time recency,
focus, the user's earlier overrides, addressing, the conflict feature (the input addresses someone
absent from the candidate, or names a task the candidate's branch does not belong to), and what the
input's place in the conversation says (``app.core.intent.dependence``, through
``routing.reference``): a follow-up continues what it refers to (``follow``), a statement after
an answer that asked the user something replies to the question it answers (``reply``; an
opening — a greeting, an announced change of subject — replies to none), an input opening a new topic
or asking about a name a conversation never said leaves it (``shift``), and so does a statement
that leaves the yes/no question the latest answer asked unanswered without leaning on it. The ENV
nodes of the latest env events are candidates too (``routing.env_anchor``; ``_env_candidates``).
Pure; it reads the input as plain values (the build passes its own, ``app.core.pipeline.builder``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.core.intent.dependence import UNANSWERED, own_words
from app.core.routing.anchor import (
    AnchorCandidate,
    Feature,
    Mention,
    conflict,
    cosine,
    keyword_overlap,
    mention,
    mentioned_names,
    recency_by_time,
)
from app.core.routing.env_anchor import env_branch, env_nodes
from app.core.routing.reference import Referent, refer, unsaid_share
from app.core.session.state import NoteView, SessionState
from app.core.types import NodeKind, Task


def _iso_seconds(at: str) -> float:
    """Seconds since the epoch of an ISO 8601 timestamp ('Z' or naive = UTC)."""
    from datetime import datetime, timezone

    text = at.rstrip("Z")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _branch_features(state: SessionState, node_id: str, text: str, overrides: Sequence[tuple[str, str]],
                     task_of_turn: Mapping[str, str]) -> tuple[float, list[str]]:
    """The override feature of ``node_id`` (an earlier correction counts for inputs like the one
    corrected, on that branch) and the tasks on its chain (when the input targets a task)."""
    if not overrides and not task_of_turn:
        return 0.0, []
    chain = list(state.graph.chain_back(node_id, limit=50))
    override = max((keyword_overlap(text, said) for said, target in overrides if target in set(chain)),
                   default=0.0)
    refs = (state.graph.node(n).ref_id for n in chain)
    return override, [task_of_turn[ref] for ref in refs if ref is not None and ref in task_of_turn]


def _candidate_nodes(state: SessionState, candidate_turns: int) -> list[str]:
    """The latest branch frontiers, then the nodes of the latest turns (each once, in that order)."""
    nodes: dict[str, None] = {}
    for node_id in state.graph.frontiers()[-candidate_turns:]:
        nodes.setdefault(node_id, None)
    for turn_id in state.turn_order[-candidate_turns:]:
        node = state.turns[turn_id].node_id
        if node is not None:
            nodes.setdefault(node, None)
    return list(nodes)


def _meaning(query: Sequence[float] | None, vectors: Mapping[str, Sequence[float] | np.ndarray],
             mids: Sequence[str]) -> float:
    """The ``sem`` feature: the best cosine of the input and the turn's messages, clipped to [0, 1]."""
    sims = [cosine(query, vectors[m]) for m in mids if m in vectors] if query is not None else []
    return max(0.0, min(1.0, max(sims))) if sims else 0.0


#: Dependence from which an input leans on what came before: a statement that does is no sign of
#: having left a yes/no question unanswered (one reference cue in a short input is about this much).
LEANS = 0.25


@dataclass(frozen=True)
class Place:
    """What the input says of its place in the conversation (the intent's reading): how much it
    leans on what came before (``follow_up``) and how plainly it opens a new topic (``topic_shift``)."""

    follow_up: float = 0.0
    topic_shift: float = 0.0
    # It opens with a statement, not a question: the reply to a question an answer asked;
    # it adds to a conversation rather than asks about a subject (``unsaid`` weighs a question only).
    statement: bool = False
    # It asks for work ("Add a paragraph on parking"): after a yes/no offer it says what to do instead.
    request: bool = False


def _place_features(node_id: str, tree: str, place: Place, referent: Referent, unsaid: float) -> dict[str, float]:
    """The ``follow``, ``reply`` and ``shift`` features of a candidate (only those not 0). ``shift``:
    the input opens a new topic and names nothing of this tree, or (``unsaid``, the share of its
    subject this conversation never mentioned) it asks about a subject of its own, as far as it
    does not lean on what came before, or (``UNANSWERED``) it is a statement that leaves the yes/no
    question this tree's latest answer asked unanswered (``Referent.ignored``), as far as it does not
    lean on what came before (``LEANS``)."""
    out: dict[str, float] = {}
    if place.follow_up > 0 and node_id == referent.node:
        out[Feature.FOLLOW] = round(place.follow_up, 6)
    if place.statement and not place.topic_shift and node_id == referent.asked:  # an opening replies to nothing
        out[Feature.REPLY] = 1.0
    asked_about = 0.0 if place.statement else unsaid * (1.0 - place.follow_up)
    left = UNANSWERED * max(0.0, 1.0 - place.follow_up / LEANS) if place.statement and tree == referent.ignored else 0.0
    shift = max(place.topic_shift if tree not in referent.pointed else 0.0, asked_about, left)
    if shift > 0:
        out[Feature.SHIFT] = round(shift, 6)
    return out


_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n\"(]\s*)$")
# A label the input opens with ("Small talk: …", "Kyoto trip: …"): it names the subject of what
# follows, so its capitalised first word is a name the input gives, not a sentence's capital.
_LABEL = re.compile(r"^\W*[A-Z][\w'-]*(?:\s+[\w'-]+){0,3}\s*:\s")


def named_entities(text: str, entities: Sequence[str], speakers: set[str]) -> list[str]:
    """The intent's entities that ``text`` itself names, minus people's names and minus a plain
    capitalised word that only opens a sentence ("Wow!", "Last week…"; one that opens a label,
    "Small talk: …", names the subject): what the ``task`` feature looks for in a candidate."""
    out = []
    for entity in entities:
        low = entity.lower()
        at = [m.start() for m in re.finditer(r"\b" + re.escape(entity) + r"\b", text)]
        if low in speakers or (not at and low not in text.lower()):
            continue
        plain = entity[:1].isupper() and entity[1:].islower() and " " not in entity
        label = _LABEL.match(text)
        if plain and at and all(_SENTENCE_START.search(text[:i]) and not (label and i < label.end()) for i in at):
            continue
        out.append(entity)
    return out


def _names_in(entities: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The ``entities`` some of ``texts`` hold (case aside)."""
    joined = "\n".join(texts).lower()
    return [e for e in entities if e.lower() in joined]


def anchor_candidates(
    state: SessionState, vectors: Mapping[str, Sequence[float] | np.ndarray], *, text: str, at: str,
    query_vector: Sequence[float] | None, focus_node: str | None = None, focus_chosen: bool = False,
    overrides: Sequence[tuple[str, str]] = (), exclude_ids: Sequence[str] = (),
    task_of_turn: Mapping[str, str] | None = None, intent_entities: Sequence[str] = (),
    intent_target: str | None = None, candidate_turns: int = 12, place: Place | None = None,
    tasks: Sequence[Task] = (),
) -> list[AnchorCandidate]:
    """Branch frontiers, the most recent turns (none whose messages the input excludes: a version put
    away, or what continues it) and ENV nodes, with their features (conflict: ``routing.anchor.conflict``).

    ``text``/``at``/``query_vector``: the input; ``focus_node`` the node the user works on and
    ``focus_chosen`` whether they chose it; ``overrides`` (earlier input text, node chosen by the
    user); ``task_of_turn`` (turn id → the task it made) is read when the input targets a task,
    ``tasks`` when an env event went to one; ``place``: the intent's reading of the input's place."""
    excluded = set(exclude_ids)  # e.g. versions the user put away, with what continues them
    nodes = [n for n in _candidate_nodes(state, candidate_turns)
             if (mids := state.turn_messages(n)) and not excluded.intersection(mids)]
    now = _iso_seconds(at)
    frontier = set(state.graph.frontiers())
    out: list[AnchorCandidate] = []
    q = query_vector
    speakers = {name.lower() for name in state.speakers()}
    addressed = [n for n, how in mentioned_names(text, state.speakers()).items() if how == Mention.ADDRESS]
    target = intent_target
    task_of_turn = task_of_turn if target and task_of_turn else {}
    # Entities the input itself names (not inherited from earlier turns), minus people's names.
    topical = named_entities(text, intent_entities, speakers)
    sems = {n: _meaning(q, vectors, state.turn_messages(n)) for n in nodes}
    env = _env_of(state, candidate_turns, excluded, tasks)
    referent = _env_referent(state, refer(state, nodes, text, sems, request=place.request), env) if place else Referent()
    own = len(own_words(text)) if place is not None else 0
    place = place or Place()
    for node_id in nodes:
        mids = state.turn_messages(node_id)
        sem = sems[node_id]
        last = state.messages[mids[-1]]
        age = max(0.0, now - _iso_seconds(last.at))
        override, chain_tasks = _branch_features(state, node_id, text, overrides, task_of_turn)
        task = len(_names_in(topical, [state.messages[m].text for m in mids])) / len(topical) if topical else 0.0
        tree = state.graph.root_of(node_id)
        address = max((1.0 if mention(text, state.messages[m].speaker) else 0.0) for m in mids)
        clash = conflict(addressed, [state.messages[m].speaker for m in mids], target, chain_tasks)
        out.append(
            AnchorCandidate(
                node_id=node_id,
                group=tree,
                features={
                    Feature.SEM: round(sem, 6),
                    Feature.TASK: round(task, 6),
                    Feature.RECENCY: round(recency_by_time(age, 1800.0), 6),
                    Feature.FOCUS: 1.0 if focus_chosen and node_id == focus_node else (0.5 if node_id in frontier else 0.0),
                    Feature.OVERRIDE: round(override, 6),
                    Feature.ADDRESS: address if state.graph.node(node_id).kind != NodeKind.TURN or len(state.speakers()) > 2 else 0.0,
                    Feature.CONFLICT: clash,
                    **_place_features(node_id, tree, place, referent, unsaid_share(state, node_id, topical, own)),
                },
            )
        )
    return out + _env_candidates(state, env, vectors, q, now, topical, place, referent)


#: ENV candidates: (ENV node, its event's note, the tree of the branch it belongs to).
EnvCandidates = Sequence[tuple[str, NoteView, str]]


def _env_of(state: SessionState, limit: int, excluded: set[str], tasks: Sequence[Task]) -> EnvCandidates:
    """The ENV candidates (``env_nodes``) with the tree of the branch each belongs to."""
    return [(node, note, state.graph.root_of(env_branch(state, node, tasks)))
            for node, note in env_nodes(state, limit, excluded)]


def _since_latest_turn(state: SessionState, note: NoteView) -> bool:
    """Whether the session got the event after the latest message: nothing was said since."""
    return not state.order or _iso_seconds(note.added_at) > _iso_seconds(state.messages[state.order[-1]].at)


def _env_referent(state: SessionState, referent: Referent, env: EnvCandidates) -> Referent:
    """A follow-up refers to the latest thing on the tree it continues: an env event routed to that
    tree after its latest turn (the latest such), else the turn ``refer`` found."""
    if referent.node is None or not env:
        return referent
    tree = state.graph.root_of(referent.node)
    mids = state.turn_messages(referent.node)
    said = _iso_seconds(state.messages[mids[-1]].at) if mids else 0.0
    newer = [node for node, note, root in env if root == tree and _iso_seconds(note.added_at) > said]
    return replace(referent, node=newer[-1]) if newer else referent


def _env_candidates(state: SessionState, env: EnvCandidates, vectors: Mapping[str, Sequence[float] | np.ndarray],
                    query: Sequence[float] | None, now: float, topical: Sequence[str], place: Place,
                    referent: Referent) -> list[AnchorCandidate]:
    """The ENV nodes of the latest env events as candidates, grouped by the tree of the branch they
    belong to: meaning (the event's indexed vector), the names the input shares with its label and
    note, the recency of the event's time, focus while nothing was said since the session got it
    (it is the newest thing, as a branch tip is), and what the input's place in the conversation
    says of it (a follow-up refers to it: ``_env_referent``)."""
    out = []
    for node_id, note, tree in env:
        label = state.graph.node(node_id).label
        task = len(_names_in(topical, [label, note.text])) / len(topical) if topical else 0.0
        age = max(0.0, now - _iso_seconds(note.at))
        out.append(AnchorCandidate(node_id=node_id, group=tree, features={
            Feature.SEM: round(_meaning(query, vectors, [note.note_id]), 6),
            Feature.TASK: round(task, 6),
            Feature.RECENCY: round(recency_by_time(age, 1800.0), 6),
            Feature.FOCUS: 0.5 if _since_latest_turn(state, note) else 0.0,
            **_place_features(node_id, tree, place, referent, 0.0),
        }))
    return out

