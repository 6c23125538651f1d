"""Sessions: open (load once, keep in memory), the user's facts and profile, and history ingest.

A session is loaded from the store on first use into a ``SessionState`` (messages, the graph with
its superseded edges as history, the routing overrides of earlier re-anchors, and the env events
and memory notes recall can find) and kept in ``EngineContext.sessions``.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.core.context.compiler import Fact, extract_facts
from app.core.engine.context import EngineContext
from app.core.intent.profile import ProfileStatement, UserProfile, parse_profile_statements
from app.core.memory.extract import memory_id
from app.core.memory.notes import is_statement_record, notes_for
from app.core.ports import SessionGeneration
from app.core.routing.environment import note_text
from app.core.runtime.background import spawn
from app.core.session.documents import is_part, part_note
from app.core.session.membership import ROUTED
from app.core.session.state import NoteView, SessionState, override_spans, quoted_message, speaker_of
from app.core.text.quoting import history_text, quote_label
from app.core.types import (
    EdgeKind,
    EnvEvent,
    Evidence,
    EvidenceType,
    GraphEdge,
    GraphNode,
    MemoryFragment,
    Message,
    NodeKind,
)

#: What a session's profile was computed from: the live profile notes, the revoked statements.
_ProfileKey = tuple[tuple[str, ...], frozenset[str]]


IMPORTED_LABEL = "an imported session"
#: Background work waits this long after the last ingest call ended: an import made of chunks
#: ingested back to back is one import, not a series with gaps to work in.
INGEST_SETTLE_S = 0.25
#: Ingested messages whose tokens are counted in one call behind an import: a build's query
#: embedding (on the same thread) waits for one such call at most.
WARM_BATCH = 500


def session_labels(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Session id → how a context names the session (the session a memory or a message came
    from): its title folded onto one line (``quote_label``); "an imported session" while its
    title is one an import brought (outside text, ``origin``) and the user has not renamed it."""
    return {r["session_id"]: IMPORTED_LABEL if r.get("origin") else quote_label(r.get("title") or "", 80)
            for r in rows}


def settle_heap() -> None:
    """Move the long-lived session objects out of the collector's sight.

    A loaded session is tens of thousands of objects that live as long as the engine; without
    this, every full collection walks them all and shows up as 50–100 ms spikes in whatever
    stage of a build it interrupts.
    """
    gc.collect()
    gc.freeze()


def _with_note(profile: UserProfile, note: NoteView) -> UserProfile:
    """``profile`` with the statement of a ``profile`` note, bound to the memory (and the messages
    it came from) and labelled with the session it was said in."""
    statement = ProfileStatement(kind=note.memory_type, text=note.text, span=note.text)
    return profile.with_statements([statement], (note.note_id, *note.source_ids), note.origin)


class SessionService:
    """Opens sessions, derives the user's facts and profile, and ingests history."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._profiles: weakref.WeakKeyDictionary[SessionState, tuple[int, UserProfile, _ProfileKey]] = (
            weakref.WeakKeyDictionary())
        self._facts: weakref.WeakKeyDictionary[SessionState, tuple[int, tuple[Fact, ...]]] = weakref.WeakKeyDictionary()
        self.titles: dict[str, str] = {}  # every session of the workspace (archived too) → its label (session_labels)
        # Set while no history is being ingested: the memory writer catches up behind an import.
        self.ingest_quiet = asyncio.Event()
        self.ingest_quiet.set()
        self._ingesting = 0
        self._ingest_ended = float("-inf")  # time.monotonic() when the last ingest call returned
        self._uncounted: list[tuple[SessionState, list[str]]] = []  # ingested, tokens not counted yet
        self._warming: asyncio.Task[None] | None = None

    async def open(self, session_id: str | None = None, *, title: str = "") -> SessionState:
        """The session's state, loaded on first use; a missing (or None) id creates the session."""
        ctx = self.ctx
        if session_id is not None and session_id in ctx.sessions:
            return ctx.sessions[session_id]
        if session_id is None or await ctx.on_store(ctx.store.get_session, session_id) is None:
            session_id = await ctx.on_store(ctx.store.create_session, title, session_id)
        sid = session_id
        # Read and built off the loop: at 100,000 turns building the state takes over a second
        # of Python, which on the loop would freeze the window. Nothing else sees it until it returns.
        state = await ctx.on_store(lambda: SessionState.load(  # superseded edges: history only
            sid, ctx.store.list_messages(sid), ctx.store.load_graph(sid, include_superseded=True)))
        state.generation = SessionGeneration.model_validate(await ctx.on_store(ctx.store.session_generation, sid))
        await self._load_notes(state)
        for turn in await ctx.on_store(ctx.store.list_turns, sid):
            if (turn.get("record") or {}).get("build") and turn["turn_id"] in state.turns:
                seq = state.turns[turn["turn_id"]].seq  # the state's own turn order, as as_of uses
                state.override_spans.extend(override_spans(turn["turn_id"], seq, turn["record"]))
        ctx.sessions[sid] = state
        settle_heap()
        return state

    async def _load_notes(self, state: SessionState) -> None:
        """Put the session's env events and the memories it sees (``app.core.memory.notes``)
        into ``state.notes``, for recall and the profile."""
        store = self.ctx.store
        sid = state.session_id

        def read() -> tuple[list[EnvEvent], list[Evidence], list[tuple[str, MemoryFragment]], dict[str, str]]:
            evidences = store.list_evidences(sid, include_superseded=True)  # a document's superseded parts too
            titles = session_labels(store.list_sessions(archived=True))
            return store.list_env_events(sid), evidences, store.list_memories(), titles

        events, evidences, memories, titles = await self.ctx.on_store(read)
        self.titles.update(titles)
        added = {e.evidence_id: e.valid_from for e in evidences if e.type == EvidenceType.ENV_EVENT}
        for event in events:
            state.add_note(NoteView(event.event_id, "env", note_text(event), event.at, added.get(event.event_id, "")))
        for evidence in evidences:
            if is_part(evidence):  # a document's part: recalled with its selector (page:12)
                state.add_note(part_note(evidence))
        for note in notes_for(sid, memories, titles):
            state.add_note(note)

    def other_sessions(self, state: SessionState) -> int:
        """How many other sessions the workspace holds (as of the last session opened or memory written)."""
        return len(set(self.titles) - {state.session_id})

    async def outside_notes(self, state: SessionState, ids: Sequence[str]) -> list[NoteView]:
        """Other sessions' messages among ``ids`` as notes for ``state`` (workspace recall), with the
        messages just before and after each (its neighbours in conversation, which recall's
        propagation reaches as it does a turn's): the speaker's words, quoted as history,
        labelled with their session's title. Reads only: the build that asked returns them, and
        ``TurnService.build`` adds them to the state once the build is done."""
        wanted = [i for i in ids if i not in state.messages and i not in state.notes]
        if not wanted:
            return []
        found = [r for r in await self.ctx.on_store(self.ctx.store.messages_by_ids, wanted, 1)
                 if r[0] != state.session_id]
        notes = []
        for n, (sid, seq, m) in enumerate(found):  # by session and seq: a message's neighbours sit next to it
            near = tuple(found[k][2].message_id for k in (n - 1, n + 1)
                         if 0 <= k < len(found) and found[k][0] == sid and abs(found[k][1] - seq) == 1)
            if m.message_id not in state.notes:
                text = (quoted_message(m.origin, m.role, speaker_of(m), m.content) if m.origin
                        else f"{speaker_of(m)}: {history_text(m.content)}")
                notes.append(NoteView(m.message_id, "outside", text, m.at,
                                      origin=self.titles.get(sid) or "untitled session", neighbours=near,
                                      speaker=speaker_of(m)))
        return notes

    def facts(self, state: SessionState) -> tuple[Fact, ...]:
        """Keyed statements of the app user so far (cached per state, extended incrementally;
        only the user's own messages are read, ``SessionState.user_said``)."""
        seen, facts = self._facts.get(state, (0, ()))
        new: list[Fact] = []
        for mid in state.user_said[seen:]:
            view = state.messages[mid]
            new.extend(extract_facts(view.text, evidence_id=mid, at=view.at, reliability=1.0))
        facts = facts + tuple(new)
        self._facts[state] = (len(state.user_said), facts)
        return facts

    def profile(self, state: SessionState) -> UserProfile:
        """The user's profile (prohibitions, permissions, preferences): what other sessions'
        memories hold (the workspace's), then what was stated so far in this one, which wins,
        together with what the user added in the Memory panel, in time order (the later wins).

        Only what the app user typed here counts (``MessageView.said_by_user``): named
        participants of imported history, imported messages and what an agent recorded are not
        the person at the keyboard. A statement of this session whose memory the user revoked is
        left out (its memory is a ``profile`` note here: ``notes.is_statement_record``). Cached
        per state and extended incrementally; a change of the profile notes starts it over.
        """
        notes = [n for n in state.notes.values() if n.kind == "profile"]
        revoked = frozenset(n.note_id for n in notes if n.removed_at)  # statements the user took back
        live = sorted((n for n in notes if not n.removed_at and not n.valid_to and not is_statement_record(n, state.messages)),
                      key=lambda n: (n.added_at, n.note_id))
        key = (tuple(n.note_id for n in live), revoked)
        seen, profile, was = self._profiles.get(state, (0, UserProfile(), ((), frozenset())))
        by_hand: list[NoteView] = []  # added in the Memory panel: placed among this session's inputs by time
        if was != key:
            seen, profile = 0, UserProfile()
            for note in live:
                if note.source_ids:
                    profile = _with_note(profile, note)
                else:
                    by_hand.append(note)
        for mid in state.user_said[seen:]:  # the others' messages never change it
            view = state.messages[mid]
            while by_hand and by_hand[0].added_at <= view.at:
                profile = _with_note(profile, by_hand.pop(0))
            said = [st for st in parse_profile_statements(view.text)
                    if memory_id(mid, st.kind, st.text) not in revoked]
            profile = profile.with_statements(said, (mid,)) if said else profile
        for note in by_hand:
            profile = _with_note(profile, note)
        self._profiles[state] = (len(state.user_said), profile, key)
        return profile

    # ------------------------------------------------------------------ ingest (history, no generation)

    async def ingest(self, session_id: str, messages: Sequence[Message], *, chain: bool = True,
                     parents: Mapping[str, str | None] | None = None, routed: Mapping[str, float] | None = None) -> int:
        """Store messages as history turns, link them along ``continues``, index them.

        Each message is a turn of its own, except that a message whose ``turn_id`` is that of the
        message given just before (an input and its answer, in one call) joins that turn as its
        answer. ``chain``: each turn continues the previous one. ``parents`` (message id → the id of the
        earlier message it continues, None for a new root) links the given ones instead — a
        conversation with branches, such as a routed chat stream. ``routed`` (message id → the
        share routing gave the tree it continues, ``session.membership``) marks the unsure edges.
        """
        self._ingesting += 1
        self.ingest_quiet.clear()
        try:
            state = await self.open(session_id)
            async with self.ctx.lock(session_id):
                return await self._ingest(state, messages, chain, parents or {}, routed or {})
        finally:
            self._ingesting -= 1
            self._ingest_ended = time.monotonic()
            if not self._ingesting:
                self.ingest_quiet.set()

    def importing(self) -> bool:
        """Whether history is being ingested, or was within the last ``INGEST_SETTLE_S``."""
        return self._ingesting > 0 or time.monotonic() < self._ingest_ended + INGEST_SETTLE_S

    async def behind_ingest(self) -> None:
        """Return once no history is being ingested and none was for ``INGEST_SETTLE_S``: the memory
        writer and the summaries catch up behind an import (chunks ingested back to back), instead of
        starting in the moment between two chunks and taking the cores from the next one's embedding.
        Returns at once when no ingest ran lately."""
        while True:
            await self.ingest_quiet.wait()
            left = self._ingest_ended + INGEST_SETTLE_S - time.monotonic()
            if left <= 0 and self.ingest_quiet.is_set():
                return
            await asyncio.sleep(max(left, 0.0))

    async def _ingest(self, state: SessionState, messages: Sequence[Message], chain: bool,
                      parents: Mapping[str, str | None], routed: Mapping[str, float]) -> int:
        ctx, session_id = self.ctx, state.session_id
        # Embedding (most of an ingest's time) starts now, beside the graph work and the SQLite
        # write; the rows reach the index only once that write committed.
        embedding = (asyncio.ensure_future(ctx.ex.run("embed", ctx.index.embed_messages, session_id, list(messages)))
                     if ctx.index is not None else None)
        try:
            nodes, edges, answers = self._link_ingested(state, messages, chain, parents, routed)
            await ctx.on_store(self._write_ingested, session_id, messages, answers, nodes, edges)
        except BaseException:
            if embedding is not None:  # nothing of a failed write is indexed; the embedding is dropped
                embedding.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise
        if ctx.index is not None and embedding is not None:
            await ctx.ex.run("embed", ctx.index.index_messages, session_id, list(messages), await embedding)
        self._warm_behind_ingest(state, [m.message_id for m in messages])  # and settles the heap
        self.ctx.ingested.emit(session_id, list(messages))
        return len(messages)

    @staticmethod
    def _link_ingested(state: SessionState, messages: Sequence[Message], chain: bool,
                       parents: Mapping[str, str | None], routed: Mapping[str, float],
                       ) -> tuple[list[GraphNode], list[GraphEdge], dict[str, str]]:
        """Add ingested messages to ``state`` as turns (``ingest``'s rules); return the new turn
        nodes, the ``continues`` edges and, by turn id, the message that answers it."""
        previous = state.turns[state.turn_order[-1]].node_id if (chain and state.turn_order) else None
        nodes: list[GraphNode] = []
        edges: list[GraphEdge] = []
        answers: dict[str, str] = {}  # turn id → its answer's message id
        for m in messages:
            if m.turn_id is None:
                m.turn_id = m.message_id
            joins = bool(nodes) and m.turn_id == nodes[-1].ref_id and m.turn_id not in answers
            state.add_message(m)
            if joins:
                answers[m.turn_id] = m.message_id
                continue
            node = GraphNode(kind=NodeKind.TURN, label=m.content[:40], ref_id=m.turn_id, created_at=m.at)
            state.add_node(node)
            nodes.append(node)
            if m.message_id in parents:
                parent = parents[m.message_id]
                view = state.messages.get(parent) if parent is not None else None
                previous = state.node_of(view.turn_id) if view is not None and view.turn_id else None
            if previous is not None:
                share = routed.get(m.message_id, 1.0)
                edge = GraphEdge(src=node.node_id, dst=previous, kind=EdgeKind.CONTINUES, created_at=m.at,
                                 attrs={ROUTED: share} if share < 1.0 else {})
                state.add_edge(edge)
                edges.append(edge)
            previous = node.node_id
        return nodes, edges, answers

    def _write_ingested(self, session_id: str, messages: Sequence[Message], answers: Mapping[str, str],
                        nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]) -> None:
        """Store thread: write ingested messages, their turns (``answers``: turn id → the message
        that answers it in the same turn), nodes and edges in one transaction."""
        store = self.ctx.store
        with store.transaction():
            for m in messages:
                store.add_message(session_id, m)
            for m in messages:
                if m.message_id not in answers.values():
                    turn_id = m.turn_id or m.message_id
                    store.add_turn(session_id, turn_id, m.message_id, status="history", created_at=m.at,
                                   answer_message_id=answers.get(turn_id))
            for n in nodes:
                store.save_node(session_id, n)
            for e in edges:
                store.save_edge(session_id, e)

    def _warm_behind_ingest(self, state: SessionState, ids: list[str]) -> None:
        """Count ingested messages' tokens once the import has settled (``behind_ingest``), in
        batches of ``WARM_BATCH``, then settle the heap (``settle_heap``, a full collection): off
        the import's path, before the builds that follow it."""
        self._uncounted.append((state, ids))
        if self._warming is None or self._warming.done():
            self._warming = spawn(self._warm_uncounted(), name="token counts behind ingest")

    async def _warm_uncounted(self) -> None:
        while self._uncounted:
            await self.behind_ingest()  # a chunk ingested meanwhile goes first
            state, ids = self._uncounted[0]
            if len(ids) > WARM_BATCH:
                self._uncounted[0] = (state, ids[WARM_BATCH:])
            else:
                self._uncounted.pop(0)
            await self.warm_counts(state, ids[:WARM_BATCH])
        settle_heap()

    async def counted(self) -> None:
        """Wait until the tokens of every message ingested so far are counted."""
        while self._warming is not None and not self._warming.done():
            await asyncio.gather(self._warming, return_exceptions=True)

    async def close(self) -> None:
        """Stop counting ingested messages' tokens (a cache: nothing is lost)."""
        self._uncounted.clear()
        if self._warming is not None:
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)

    async def warm_counts(self, state: SessionState, ids: Sequence[str]) -> None:
        """Count new messages' tokens once, off the build path (the counter caches them)."""
        texts = [state.messages[i].render() for i in ids if i in state.messages]
        counter = self.ctx.counter
        await self.ctx.ex.run("embed", lambda: [counter.count(t) for t in texts])
