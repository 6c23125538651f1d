"""The in-memory view of one session that the pipeline reads while it builds a context.

SQLite stays the system of record; ``SessionState`` mirrors what the build needs (message texts,
speakers, turn order, the graph) so that structured, recent, graph and neighbour recall run in
memory without a database round trip. ``as_of(turn_id)`` gives the state a past turn saw (its
earlier turns, the edges live then, the routing overrides made before it), which is what replay
rebuilds its plan and context from.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, NamedTuple, TypeVar, cast

from app.core.errors import NoRecordError
from app.core.ports import SessionGeneration
from app.core.session.graph import SessionGraph, edge_live_at
from app.core.session.note_view import NoteView
from app.core.text.quoting import QUOTED_HEADER, fence, fenced_lines, history_text, outside_keys
from app.core.text.times import parse_now
from app.core.types import GraphEdge, GraphNode, Message, NodeKind, Origin, Role, SessionGraphData

T = TypeVar("T")

#: The pause after which a conversation's next turn starts a new sitting (``TurnView.sitting``).
SITTING_GAP = timedelta(hours=1)

#: How a message from outside is introduced in a context (the fence's header: the app's words).
ORIGIN_HEADERS: dict[str, str] = {"imported": "imported {role} message", "agent": "{role} recorded by an MCP client"}


def quoted_message(origin: Origin, role: Role, speaker: str, text: str) -> str:
    """A message from outside (``origin`` "imported" or "agent") as a context quotes it: a fence
    whose header says where it came from (the app's words) and whose opener names its speaker."""
    return fence(ORIGIN_HEADERS[origin].format(role=role.value), text, speaker)


@dataclass(frozen=True, slots=True)
class MessageView:
    """What the pipeline needs of a stored message."""

    message_id: str
    turn_id: str | None
    role: Role
    speaker: str
    text: str
    at: str
    seq: int  # position in the session, 0-based
    origin: Origin = ""  # "" typed or answered in this app; "imported", "agent": outside text

    def render(self) -> str:
        """``Speaker: text`` — the form messages take in a context; a message from outside (an
        import, an MCP client) as a quotation whose opener names its speaker: its words are
        never the app's history speaking, whatever speaker, role or marker they claim."""
        if self.origin:
            return quoted_message(self.origin, self.role, self.speaker, self.text)
        return f"{self.speaker}: {self.text}"

    @property
    def said_by_user(self) -> bool:
        """Whether the app user typed this message here: an input with no other speaker named,
        neither imported nor recorded by an agent (only these make the user's profile and facts)."""
        return self.role == Role.USER and self.speaker == Role.USER.value and not self.origin


@dataclass(slots=True)
class TurnView:
    turn_id: str
    seq: int
    at: str
    node_id: str | None = None
    message_ids: list[str] = field(default_factory=list)
    # The sitting the turn belongs to, counted from 0: a turn that starts ``SITTING_GAP`` or more
    # after the turn before it starts the next one (a conversation resumed days later, a working
    # session after lunch). Recall lifts the sitting that clearly holds the best evidence.
    sitting: int = 0


class Override(NamedTuple):
    """A routing correction by the user: later inputs like ``text`` lean towards ``node``."""

    seq: int  # turns with a seq above this one see it (the turn's own, or the last before a re-anchor)
    text: str
    node: str


@dataclass(slots=True)
class OverrideSpan:
    """An override and, once the user takes it back (re-anchor, undo), the turn seq it ends at."""

    override: Override
    turn_id: str
    until: int | None = None  # turns with seq >= until no longer see it

    def visible_at(self, seq: int) -> bool:
        return self.override.seq < seq and (self.until is None or seq < self.until)


def speaker_of(message: Message) -> str:
    if message.author is not None and message.author.id:
        return message.author.id
    return message.role.value


class SessionState:
    """Messages, turns and graph of one session, in arrival order."""

    def __init__(self, session_id: str, graph: SessionGraph | None = None) -> None:
        self.session_id = session_id
        self.graph = graph or SessionGraph(session_id)
        self.messages: dict[str, MessageView] = {}
        self.order: list[str] = []  # message ids in arrival order
        self.user_said: list[str] = []  # of those, what the app user typed here (``said_by_user``)
        self.turns: dict[str, TurnView] = {}
        self.turn_order: list[str] = []
        self._node_by_ref: dict[str, str] = {}
        self._by_speaker: dict[str, list[str]] = {}
        # Each speaker's messages as (at, id), latest first: the structured channel's list for an
        # input that names them (kept until that speaker says something new).
        self._timelines: dict[str, list[tuple[str, str]]] = {}
        self.notes: dict[str, NoteView] = {}  # memory fragments and env events, by id
        self._outside: set[str] | None = None  # match keys of the env notes' outside text (lazy)
        self._quoted: dict[str, str] = {}  # history_text of answers and summary parts, by text
        self.quoting = 0  # how often the outside text grew, so that quoting changed (``add_note``)
        self.notes_revision = 0  # notes added or replaced so far (``add_note``)
        self._derived: dict[str, tuple[Any, Any]] = {}  # ``derived``: name → (mark, value)
        self._memo: dict[str, tuple[Hashable, Any]] = {}  # ``memo``: name → (mark, value), shared by views
        # The user's routing corrections, withdrawn ones included (``overrides`` are the live ones).
        self.override_spans: list[OverrideSpan] = []
        self.focus: str | None = None  # the node the user chose to work on (None: follow the latest turn)
        self.generation = SessionGeneration()  # the session's own temperature, answer length, instruction
        # Each message's neighbours in conversation (``neighbours``: recall's propagation asks for
        # a thousand per build), dropped for the messages a new message or a graph change touches.
        self._near: dict[str, tuple[str, ...]] = {}
        self._near_mark = 0  # the graph changes ``_near`` has followed (``SessionGraph.touched_since``)
        for node in self.graph.nodes():
            if node.ref_id:
                self._node_by_ref[node.ref_id] = node.node_id

    # ------------------------------------------------------------------ building

    def add_message(self, message: Message) -> MessageView:
        view = MessageView(
            message_id=message.message_id,
            turn_id=message.turn_id,
            role=message.role,
            speaker=speaker_of(message),
            text=message.content,
            at=message.at,
            seq=len(self.order),
            origin=message.origin,
        )
        self._append_view(view)
        return view

    @property
    def overrides(self) -> list[Override]:
        """The routing overrides in force now, oldest first."""
        return [s.override for s in self.override_spans if s.until is None]

    def add_override(self, turn_id: str, seq: int, text: str, node: str) -> None:
        self.override_spans.append(OverrideSpan(Override(seq, text, node), turn_id))

    def replace_overrides(self, turn_id: str, spans: Iterable[OverrideSpan]) -> None:
        """Replace every override span of ``turn_id`` (re-anchor and undo rewrite a turn's)."""
        self.override_spans = [s for s in self.override_spans if s.turn_id != turn_id] + list(spans)

    def focus_chosen(self) -> bool:
        """Whether the user chose the focus (on the canvas) rather than it following the turns."""
        return self.focus is not None and self.focus in self.graph

    def focus_node(self) -> str | None:
        """The node builds treat as the user's focus: their choice, else the latest turn's node."""
        if self.focus_chosen():
            return self.focus
        for turn_id in reversed(self.turn_order):
            if self.turns[turn_id].node_id is not None:
                return self.turns[turn_id].node_id
        return None

    def add_note(self, note: NoteView) -> None:
        self.notes[note.note_id] = note
        self.notes_revision += 1
        if self._outside is not None and note.kind == "env":
            self._outside.update(fenced_lines(note.text))
            self._quoted.clear()
            self.quoting += 1

    def with_notes(self, notes: Iterable[NoteView]) -> "SessionState":
        """A view of this state with ``notes`` added to its notes, this state unchanged (everything
        else is shared): what a build reads once its workspace recall found other sessions'
        messages; the engine adds them to the live state after the build."""
        view = copy.copy(self)
        view.notes = {**self.notes, **{n.note_id: n for n in notes}}
        view._derived = {}
        return view

    def derived(self, name: str, make: Callable[[], T]) -> T:
        """``make()``, made again only once a note or a message has been added since (what a build
        reads off every note — a long session holds thousands of memories — is made once, not per build)."""
        return _kept(self._derived, name, (self.notes_revision, len(self.messages)), make)

    def memo(self, name: str, mark: Hashable, make: Callable[[], T]) -> T:
        """``make()``, made again only once ``mark`` (what the value depends on) differs from the
        last one's: for what depends on neither the notes nor the messages, so is kept across turns
        (a branch summary's words: thousands of parts at 100,000 turns). ``with_notes`` views share it."""
        return _kept(self._memo, name, mark, make)

    def add_node(self, node: GraphNode) -> None:
        self.graph.add_node(node)
        self.note_node(node)

    def note_node(self, node: GraphNode) -> None:
        """Index a node already in the graph by the record it stands for."""
        if node.ref_id:
            self._node_by_ref[node.ref_id] = node.node_id
            if node.kind == NodeKind.TURN and node.ref_id in self.turns:
                self.turns[node.ref_id].node_id = node.node_id
                self._forget_near(node.node_id)

    def add_edge(self, edge: GraphEdge) -> None:
        self.graph.add_edge(edge)

    @classmethod
    def load(cls, session_id: str, messages: Iterable[Message], graph: SessionGraphData) -> "SessionState":
        """Rebuild from stored records (messages in session order, graph in insertion order)."""
        state = cls(session_id, SessionGraph.from_data(session_id, graph))
        for message in messages:
            state.add_message(message)
        for node in state.graph.nodes():
            state.note_node(node)
            if node.attrs.get("focused"):
                state.focus = node.node_id
        return state

    def as_of(self, turn_id: str) -> "SessionState":
        """The state as it was when ``turn_id`` arrived: earlier turns and nodes, the edges live
        then (re-anchoring changes edges later), the overrides in force then. ``NoRecordError``
        when the session has no such turn."""
        turn = self.turns.get(turn_id)
        if turn is None:
            raise NoRecordError(f"no turn {turn_id!r} in session {self.session_id}")
        past = SessionState(self.session_id)
        node_ids: set[str] = set()
        # Only messages that had arrived, in the order they arrived (the order the live state had):
        # an earlier turn's answer streamed while this turn was built arrives after its input
        # (answers are added under the session lock, between builds), and with concurrent streams
        # answers arrive in the order they finish, not in turn order.
        arrived = self.messages[turn.message_ids[0]].seq if turn.message_ids else len(self.order)
        earlier = set(self.turn_order[: turn.seq])
        for mid in self.order[:arrived]:
            m = self.messages[mid]
            if m.turn_id in earlier:
                past._append_view(m)
        cutoff = turn.node_id
        for node in self.graph.nodes():
            if node.node_id == cutoff:
                break
            past.graph.add_node_silently(node)
            node_ids.add(node.node_id)
        for edge in self.graph.edge_history():
            if edge.src in node_ids and edge.dst in node_ids and edge_live_at(edge, turn.seq):
                past.graph.add_edge_silently(edge)
        for node in past.graph.nodes():
            past.note_node(node)
        past.override_spans = [OverrideSpan(s.override, s.turn_id) for s in self.override_spans if s.visible_at(turn.seq)]
        # Notes (env events, memory) the session had when the turn was recorded; later ones are
        # stamped later (ingest and submit are ordered by the session lock).
        past.notes = {k: seen for k, n in self.notes.items() if (seen := n.as_of(turn.at)) is not None}
        return past

    def outside_lines(self) -> set[str]:
        """The match keys of every line of outside text the session's env notes quote."""
        if self._outside is None:
            self._outside = outside_keys(n.text for n in self.notes.values() if n.kind == "env")
        return self._outside

    def render_message(self, view: MessageView) -> str:
        """A message as it enters a context: ``Speaker: text``; an assistant's answer through
        ``history_text``, so outside text it copied (fenced lines, lines of the session's env
        notes, lines that instruct the model) stays quoted and no copied marker forges a fence;
        a message from outside as a quotation (``MessageView.render``)."""
        if view.role != Role.ASSISTANT or view.origin:
            return view.render()
        return self.speaker_line(view, self.quoted_text(view))

    def quoted_text(self, view: MessageView) -> str:
        """The message's text as a context may carry it: an assistant's answer through
        ``history_text`` (see ``render_message``), a message from outside as its quotation,
        anything else as it is."""
        if view.origin:
            return view.render()
        return self.quoted(view.text) if view.role == Role.ASSISTANT else view.text

    def quoted(self, text: str) -> str:
        """``history_text(text, outside_lines())``, remembered until the session's outside text
        grows (every build renders the same answers and summary parts again)."""
        done = self._quoted.get(text)
        if done is None:
            if len(self._quoted) >= 20_000:
                self._quoted.clear()
            done = self._quoted[text] = history_text(text, self.outside_lines())
        return done

    @staticmethod
    def speaker_line(view: MessageView, text: str) -> str:
        """``Speaker: text``; a quotation starts on a line of its own, so its header is never the
        speaker's line; a message from outside is its quotation alone (its opener names the speaker)."""
        if view.origin:
            return text
        return f"{view.speaker}:{chr(10) if text.startswith('[' + QUOTED_HEADER) else ' '}{text}"

    def _append_view(self, view: MessageView) -> None:
        copy = replace(view, seq=len(self.order))
        self.messages[copy.message_id] = copy
        self.order.append(copy.message_id)
        if copy.said_by_user:
            self.user_said.append(copy.message_id)
        self._by_speaker.setdefault(copy.speaker.lower(), []).append(copy.message_id)
        self._timelines.pop(copy.speaker.lower(), None)
        if copy.turn_id is not None:
            turn = self.turns.get(copy.turn_id)
            if turn is None:
                last = self.turns[self.turn_order[-1]] if self.turn_order else None
                turn = TurnView(copy.turn_id, len(self.turn_order), copy.at, sitting=_sitting_after(last, copy.at))
                self.turns[copy.turn_id] = turn
                self.turn_order.append(copy.turn_id)
            if self._near:  # its turn's messages, and the turns before and after it, have a new neighbour
                for message_id in turn.message_ids:
                    self._near.pop(message_id, None)
                self._forget_near(turn.node_id, around=True)
            turn.message_ids.append(copy.message_id)

    # ------------------------------------------------------------------ reading

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.messages

    def speakers(self) -> list[str]:
        """Distinct speaker names, in first-seen order."""
        return [self.messages[ids[0]].speaker for ids in self._by_speaker.values()]

    def by_speaker(self, name: str) -> list[str]:
        """Message ids spoken by ``name`` (case-insensitive), oldest first."""
        return self._by_speaker.get(name.lower(), [])

    def speaker_timeline(self, name: str) -> list[tuple[str, str]]:
        """(at, message id) of every message ``name`` spoke (case-insensitive), latest first (by
        time, then id); remembered until ``name`` speaks again. Do not change the list."""
        key = name.lower()
        timeline = self._timelines.get(key)
        if timeline is None:
            timeline = self._timelines[key] = sorted({(self.messages[m].at, m) for m in self.by_speaker(key)},
                                                     reverse=True)
        return timeline

    def recent(self, n: int) -> list[str]:
        """The last ``n`` message ids, oldest first."""
        return self.order[-n:] if n > 0 else []

    def node_of(self, ref_id: str) -> str | None:
        """The graph node that stands for a turn (or other record), if any."""
        return self._node_by_ref.get(ref_id)

    def nodes_of_evidence(self, evidence_ids: Iterable[str]) -> set[str]:
        """The graph nodes these evidence ids stand on: a message's turn node, or the node of the
        record itself (an env event, a task result)."""
        nodes: set[str] = set()
        for eid in evidence_ids:
            view = self.messages.get(eid)
            node = self.node_of(view.turn_id) if view is not None and view.turn_id else self.node_of(eid)
            if node:
                nodes.add(node)
        return nodes

    def turn_messages(self, node_id: str) -> list[str]:
        """Message ids of the turn a node stands for."""
        ref = self.graph.node(node_id).ref_id
        turn = self.turns.get(ref) if ref else None
        return list(turn.message_ids) if turn else []

    def sitting_of(self, message_id: str) -> int | None:
        """The sitting (``TurnView.sitting``) of a message of this session; None for anything else."""
        view = self.messages.get(message_id)
        turn = self.turns.get(view.turn_id) if view is not None and view.turn_id is not None else None
        return turn.sitting if turn is not None else None

    def neighbours(self, message_id: str) -> Iterator[str]:
        """Messages next to ``message_id`` in conversation: its turn's other messages, the last
        message of the turn it continues, and the first message of each turn continuing it (for
        another session's message, a note: the notes of the messages before and after it)."""
        view = self.messages.get(message_id)
        if view is None or view.turn_id is None:
            note = self.notes.get(message_id)
            return iter([n for n in (note.neighbours if note is not None else ()) if n in self.notes])
        self._follow_graph()
        near = self._near.get(message_id)
        if near is None:
            near = self._near[message_id] = tuple(self._walk_near(view))
        return iter(near)

    def _walk_near(self, view: MessageView) -> Iterator[str]:
        turn = self.turns[view.turn_id or ""]
        for other in turn.message_ids:
            if other != view.message_id:
                yield other
        if turn.node_id is None:
            return
        parent = self.graph.parent(turn.node_id)
        if parent is not None:
            before = self.turn_messages(parent)
            if before:
                yield before[-1]
        for child in self.graph.children(turn.node_id):
            after = self.turn_messages(child)
            if after:
                yield after[0]

    def _follow_graph(self) -> None:
        """Drop the cached neighbours of the messages on nodes whose edges changed since last time."""
        if not self._near:  # nothing to drop (the first walk after a load: 300,000 changes at 100,000 turns)
            self._near_mark = self.graph.touch_mark()
            return
        touched, self._near_mark = self.graph.touched_since(self._near_mark)
        for node in touched:
            self._forget_near(node)

    def _forget_near(self, node_id: str | None, *, around: bool = False) -> None:
        """Drop the cached neighbours of the messages of ``node_id``'s turn (``around``: and of the
        turns it continues and that continue it)."""
        if not self._near or node_id is None or node_id not in self.graph:
            return
        parent = self.graph.parent(node_id) if around else None
        nodes = [node_id, *([parent] if parent is not None else []), *(self.graph.children(node_id) if around else [])]
        for node in nodes:
            ref = self.graph.node(node).ref_id
            turn = self.turns.get(ref) if ref else None
            for message_id in turn.message_ids if turn is not None else ():
                self._near.pop(message_id, None)

    def main_chain(self, anchor_node: str, limit: int) -> list[str]:
        """Turn nodes from ``anchor_node`` back along ``continues`` (anchor first), at most ``limit``."""
        return list(self.graph.chain_back(anchor_node, limit=limit))


def _sitting_after(last: TurnView | None, at: str) -> int:
    """The sitting of a turn starting at ``at`` after ``last``: the same, unless ``SITTING_GAP``
    or more passed between their starts (a time that does not parse never starts one)."""
    if last is None:
        return 0
    before, now = parse_now(last.at), parse_now(at)
    resumed = before is not None and now is not None and now - before >= SITTING_GAP
    return last.sitting + 1 if resumed else last.sitting


def _kept(store: dict[str, tuple[Any, Any]], name: str, mark: Hashable, make: Callable[[], T]) -> T:
    """``store[name]``'s value when it was made under ``mark``, else ``make()``, kept under it."""
    kept = store.get(name)
    if kept is not None and kept[0] == mark:
        return cast(T, kept[1])
    value = make()
    store[name] = (mark, value)
    return value


def override_spans(turn_id: str, seq: int, record: Mapping[str, Any]) -> list[OverrideSpan]:
    """The routing overrides a turn's record implies, withdrawn ones with their end.

    ``record`` is a stored ``TurnRecord`` (JSON). The submit-time override counts for turns after
    ``seq``; each revision at ``K`` ends the one in force and starts its own build's override for
    turns from ``K`` on. ``open_session`` and the re-anchor actions both use this, so a reopened
    session routes exactly like the one the changes were made in.
    """
    revisions = record.get("revisions") or []
    builds = [r["build"] for r in revisions] + [record["build"]]
    text = record["build"]["text"]
    spans: list[OverrideSpan] = []

    def start(build: Mapping[str, Any], after: int) -> None:
        node = (build.get("routing") or {}).get("override")
        if node:  # None: routed by the engine; NEW_ROOT (""): no node to lean towards
            spans.append(OverrideSpan(Override(after, text, node), turn_id))

    start(builds[0], seq)
    for n, revision in enumerate(revisions):
        for span in spans:
            if span.until is None:
                span.until = revision["at_seq"]
        start(builds[n + 1], revision["at_seq"] - 1)
    return spans
