"""Memory: the background writer, the topic index, and what the user does with a memory.

The writer runs after each answered turn (``EngineContext.answered``) and each batch of
environment events: it extracts memory objects by rules (``app.core.memory.extract``), decides
the write against everything kept (``app.core.memory.writer``: duplicates skipped, contradicted
facts closed, links and evolution, consolidation; a link by meaning needs the new memory's
embedding within ``LINK_SIMILARITY`` of a kept one's, compared in memory), stores it in one
transaction, indexes the new memories (with the embeddings already made), updates the topic
index (new names embedded too, for aliases by similarity), and puts the memories into every open session that sees them
(``app.core.memory.notes``). It is a background task at low priority: one write at a time, after
a yield, never on the path of a prompt input, a streaming answer or a history import (it waits
while one runs and for a moment after, ``SessionService.behind_ingest``); ``idle()`` waits for it.
A memory the answer's context used gets its ``access_count`` and ``last_accessed_at``.

The user's actions: ``revoke`` (the memory is closed, marked revoked and taken out of the index;
it never reaches a context again, while replay of an earlier turn still sees it), ``pin``,
``edit`` (a new revision, the earlier content kept in ``revisions``) and ``add_profile`` (profile
statements typed in the Memory panel, written through the writer's path and shown to every
session's profile).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from app.core.engine.context import EngineContext
from app.core.engine.memory_kept import KeptMemories
from app.core.engine.memory_model import ModelSignal
from app.core.engine.sessions import SessionService, session_labels
from app.core.errors import MemoryChanged, NoRecordError
from app.core.memory.evolve import LINK_SIMILARITY, MAX_LINKS, duplicate_of, edited, revoked, still_valid
from app.core.memory.extract import extract_memories, profile_by_hand
from app.core.memory.notes import note_of
from app.core.memory.topics import Mention, Topic, TopicChange, TopicIndex, name_terms
from app.core.memory.vectors import VectorRows
from app.core.memory.writer import Write, accept_write, plan_write
from app.core.runtime.background import spawn
from app.core.session.documents import BOOK_FORMATS, document
from app.core.session.state import SessionState
from app.core.text.quoting import quote_label
from app.core.types import EdgeKind, EnvEvent, GraphEdge, GraphNode, MemoryFragment, Message, NodeKind, Origin, utc_now

#: One piece of evidence for the writer: (evidence id, text, source as ``extract_memories`` names it, at).
Piece = tuple[str, str, str, str]
TOPIC_SUMMARY_LEAST, TOPIC_SUMMARY_MOST = 4, 8  # a session's topics that get a summary: mentions, how many
YIELD_EVERY = 100  # pieces extracted (or indexed for topics) between two yields to the loop


@dataclass(slots=True)
class WriterStats:
    """What the writer did so far (``pcm bench memory`` and the closing figures read it)."""

    runs: int = 0
    pieces: int = 0
    written: int = 0
    closed: int = 0
    seconds: float = 0.0
    per_run_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProfileAdded:
    """What ``MemoryService.add_profile`` changed."""

    added: list[MemoryFragment]  # the new profile memories
    held: list[MemoryFragment]  # kept memories that already said a statement (nothing new written for it)
    closed: list[MemoryFragment]  # earlier statements a new one closed (a permission a prohibition replaces)


def _label(memory: MemoryFragment) -> str:
    """A memory node's label: its type and content on one line (outside text quoted as a label)."""
    return quote_label(("(revoked) " if memory.revoked_at else "") + f"{memory.type}: {memory.content}", 60)


class MemoryService:
    """See the module docstring."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, *, enabled: bool = True) -> None:
        self.ctx, self.sessions = ctx, sessions
        self.enabled = enabled
        self.topics = TopicIndex()
        self.stats = WriterStats()
        self.model = ModelSignal(ctx)
        self._topics_loaded = False
        self._kept = KeptMemories(ctx.store)  # every memory, kept current across processes (store thread only)
        self._vectors = VectorRows()  # embeddings of the memories (similarity links), read on first need
        self._vectors_loaded = False
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[Any]] = set()
        ctx.answered.connect(self._on_answered)
        ctx.ingested.connect(self._on_ingested)

    # ------------------------------------------------------------------ cues

    def _on_answered(self, session_id: str, turn_id: str, message: Message, answer: Message) -> None:
        del turn_id
        state = self.ctx.sessions.get(session_id)
        used = [r.evidence_id for r in answer.refs if state is not None and r.evidence_id in state.notes]
        if used:
            spawn(self.ctx.on_store(self.ctx.store.touch_memories, used), name="memory access")
        if not self.enabled:
            return
        self.start(session_id, [(message.message_id, message.content, "user", message.at),
                                (answer.message_id, answer.content, "answer", answer.at)])

    def _on_ingested(self, session_id: str, messages: list[Message]) -> None:
        """History ingested: its names join the topic index, its facts, decisions and events are
        remembered for the session (not as the user's own profile: the speakers may be anyone);
        what an agent recorded (origin "agent") as memories from outside, pending until accepted."""
        if self.enabled and messages:
            self.start(session_id, [(m.message_id, m.content,
                                     f"{'agent' if m.origin else 'history'}:{m.author.id if m.author else ''}", m.at)
                                    for m in messages])

    def on_env_ingested(self, session_id: str, routed: Sequence[Any]) -> None:
        """``EnvironmentService.env_ingested``: the stored events' ``key: value`` lines become facts
        — not a PDF's, Word file's or workbook's: hundreds of pages of form fields and table rows
        would flood the memory with "facts"; their parts are recalled as evidence instead."""
        self.env_events(session_id, [r.event for r in routed
                                     if str((document(r.event) or {}).get("format", "")) not in BOOK_FORMATS])

    def env_events(self, session_id: str, events: Sequence[EnvEvent]) -> None:
        """Cue the writer with stored environment events."""
        if self.enabled and events:
            name = lambda e: (e.uri or e.title or e.source).rsplit("/", 1)[-1]  # noqa: E731
            self.start(session_id, [(e.event_id, e.content, f"env:{name(e)}", e.at) for e in events])

    def start(self, session_id: str, pieces: Sequence[Piece]) -> None:
        """Write the memories of ``pieces`` in the background (kept until done; see ``idle``)."""
        task = spawn(self.remember(session_id, pieces), name=f"memory {session_id}")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def idle(self) -> None:
        """Wait until every write started so far is done."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # ------------------------------------------------------------------ the write

    async def remember(self, session_id: str, pieces: Sequence[Piece]) -> list[MemoryFragment]:
        """Extract, decide and store the memories of ``pieces``; return the new ones."""
        async with self._lock:
            await self._behind_ingest()
            started = time.perf_counter()
            found: list[MemoryFragment] = []
            for n, (eid, text, source, at) in enumerate(pieces, start=1):
                found += extract_memories(text, evidence_id=eid, at=at, source=source)
                if n % YIELD_EVERY == 0:  # a long import: let the loop breathe between chunks
                    await self._behind_ingest()
            found += await self.model.memories(session_id, pieces)  # the optional model signal
            agents = {eid for eid, _, source, _ in pieces if source.startswith("agent:")}
            found = [m.with_origin("agent") if agents & set(m.source_evidence_ids) else m for m in found]
            await self._behind_ingest()  # an import's next chunk may have begun meanwhile
            change = await self._observe_topics(session_id, pieces)
            similar, vectors = await self._similar(found)
            async with self._visible(session_id) as now:
                write = await self._write(session_id, lambda kept: plan_write(found, kept, now, similar) if found
                                          else Write(), change, now)
            if write.new and self.ctx.index is not None:
                await self.ctx.ex.run("embed", self.ctx.index.index_memory, session_id, write.new, vectors)
            live = {eid for eid, _, source, _ in pieces if source in ("user", "answer")}  # an env event is its own node
            await self._place(session_id, [m for m in write.new if set(m.source_evidence_ids) & live])
            elapsed = time.perf_counter() - started
            self.stats.runs += 1
            self.stats.pieces += len(pieces)
            self.stats.written += len(write.new)
            self.stats.closed += len(write.closed)
            self.stats.seconds += elapsed
            self.stats.per_run_ms.append(elapsed * 1000)
            return write.new

    async def _behind_ingest(self) -> None:
        """Yield to whatever the loop has queued (prompt inputs go first), then wait while history
        is being ingested: an import of thousands of turns runs at the embedder's pace and the
        writer (extraction, topics, its embeddings and writes) catches up behind it."""
        await asyncio.sleep(0)
        await self.sessions.behind_ingest()

    @contextlib.asynccontextmanager
    async def _visible(self, session_id: str | None) -> AsyncIterator[str]:
        """Hold the locks of ``session_id`` and of every open session, and give the moment: what
        is stored and shown inside is stamped with it, between two of any session's turns, so a
        turn either saw it live and in replay, or in neither."""
        async with contextlib.AsyncExitStack() as stack:
            for sid in sorted({*([session_id] if session_id else []), *self.ctx.sessions}):
                await stack.enter_async_context(self.ctx.lock(sid))
            yield utc_now()

    async def _similar(self, found: Sequence[MemoryFragment]
                       ) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
        """The embeddings of the memories ``found`` that are not kept yet (reused by the index)
        and, for each, the memories (kept, or found before it) within ``LINK_SIMILARITY``."""
        kept = await self.ctx.on_store(self._kept.current)
        fresh = list({m.fragment_id: m for m in found if m.fragment_id not in kept}.values())
        if not fresh or self.ctx.index is None or self.ctx.embedder is None:
            return {}, {}
        if not self._vectors_loaded:
            for item, vector in (await self.ctx.on_index(self.ctx.index.vectors, list(kept))).items():
                self._vectors.add(item, vector)
            self._vectors_loaded = True
        rows = await self.ctx.embed([m.index_text() for m in fresh])
        if rows is None:
            return {}, {}
        vectors = {m.fragment_id: row for m, row in zip(fresh, rows)}
        similar: dict[str, dict[str, float]] = {}
        for item, vector in vectors.items():
            similar[item] = dict(self._vectors.top(vector, MAX_LINKS, at_least=LINK_SIMILARITY))
            self._vectors.add(item, vector)
        return similar, vectors

    async def _write(self, session_id: str, decide: Callable[[list[MemoryFragment]], Write], change: TopicChange,
                     now: str) -> Write:
        """Decide and store a write, then show it and what other processes wrote in every open
        session (call it inside ``_visible``). On the store thread, in one transaction: read what
        other processes wrote since (under the write lock: nothing comes in between), ``decide``
        against every memory as stored now, store the write and the topic ``change``."""
        store = self.ctx.store

        def write() -> tuple[Write, list[tuple[str, MemoryFragment]]]:
            with store.transaction():
                others = self._kept.refresh()
                self.sessions.titles.update(session_labels(store.list_sessions(archived=True)))
                done = decide(list(self._kept.known().values()))
                if done.new:
                    store.add_memories(session_id, done.new)
                for memory in done.changed.values():
                    store.save_memory(memory)
                if change.topics or change.updated or change.mentions or change.log:
                    store.save_topics([*change.topics, *change.updated], change.mentions, change.log)
                # A rewritten memory (closed, linked, merged) stays the session's it came from: shown
                # as this session's own, another session's memory would enter this session stamped
                # with its first recording, and the replay of an earlier turn here would see it.
                written = [*((session_id, m) for m in done.new),
                           *((store.memory_session(m.fragment_id), m) for m in done.changed.values())]
            self._kept.put([*done.new, *done.changed.values()])
            return done, [*others, *written]

        done, rows = await self.ctx.on_store(write)
        self._show(rows, now)
        return done

    def _show(self, rows: Sequence[tuple[str, MemoryFragment]], now: str) -> None:
        """Put (or replace) the memories (session id, memory) in every open session that sees them;
        one a session no longer sees (merged, accepted) is removed from its recall from ``now``."""
        for sid, state in self.ctx.sessions.items():
            for session_id, memory in rows:
                origin = self.sessions.titles.get(session_id) or "untitled session"
                note = note_of(memory, own=sid == session_id, origin=origin)
                if note is not None:
                    state.add_note(note)
                elif (had := state.notes.get(memory.fragment_id)) is not None and not had.removed_at:
                    state.add_note(replace(had, removed_at=now))

    async def sync(self) -> None:
        """Take in what other processes wrote to the memory since this one last read it (``pcm
        memory revoke`` beside the app, ``pcm ask`` beside ``pcm mcp``): the open sessions' notes
        follow, and the index drops what is no longer valid and adds what it lacks. One cheap read
        when nothing moved; builds call it first (``Engine.build``, ``submit``, ``session_state``)."""
        if not await self.ctx.on_store(self._kept.moved):
            return
        async with self._visible(None) as now:
            others = await self.ctx.on_store(self._kept.refresh)
            self._show(others, now)
        index = self.ctx.index
        if index is None or not others:
            return
        gone = [m.fragment_id for _, m in others if m.valid_to is not None]
        if gone:
            await self.ctx.on_index(index.remove, gone)
        valid = {m.fragment_id: (sid, m) for sid, m in others if m.valid_to is None}
        have = await self.ctx.on_index(index.vectors, list(valid)) if valid else {}
        for sid, memory in (valid[i] for i in valid if i not in have):
            await self.ctx.ex.run("embed", index.index_memory, sid, [memory])

    async def _place(self, session_id: str, memories: Sequence[MemoryFragment]) -> None:
        """Memory nodes on the session's canvas, each ``derived_from`` the node of the turn it came
        from: written under the session lock, like every graph change."""
        state = self.ctx.sessions.get(session_id)
        if state is None or not memories:
            return
        async with self.ctx.lock(session_id):
            nodes, edges = [], []
            for memory in memories:
                source = next((n for n in map(self._source_node(state), memory.source_evidence_ids) if n), None)
                node = GraphNode(kind=NodeKind.MEMORY, label=_label(memory), ref_id=memory.fragment_id,
                                 created_at=memory.recorded_at, attrs={"memory_type": memory.type, "scope": memory.scope})
                state.add_node(node)
                nodes.append(node)
                if source is not None:
                    edge = GraphEdge(src=node.node_id, dst=source, kind=EdgeKind.DERIVED_FROM, created_at=memory.recorded_at)
                    state.add_edge(edge)
                    edges.append(edge)

            def write() -> None:
                with self.ctx.store.transaction():
                    for node in nodes:
                        self.ctx.store.save_node(session_id, node)
                    for edge in edges:
                        self.ctx.store.save_edge(session_id, edge)

            await self.ctx.on_store(write)

    @staticmethod
    def _source_node(state: SessionState) -> Callable[[str], str | None]:
        def node(evidence_id: str) -> str | None:
            view = state.messages.get(evidence_id)
            return state.node_of(view.turn_id) if view is not None and view.turn_id else state.node_of(evidence_id)
        return node

    # ------------------------------------------------------------------ topics

    async def load_topics(self) -> TopicIndex:
        """The topic index, read from the store on first use; from then on ``topic_search`` (the
        topic channel) and ``topic_messages`` answer from it."""
        if not self._topics_loaded:
            topics, mentions, log = await self.ctx.on_store(self.ctx.store.load_topics)
            if not self._topics_loaded:
                self.topics.load([Topic(**t) for t in topics], [Mention(*m) for m in mentions], log)
                self._topics_loaded = True
        return self.topics

    def topic_search(self, query: str, k: int, session_id: str | None) -> list[tuple[str, float]]:
        """The topic channel's search (``context.channels.TopicSearch``): hits of ``session_id``'s
        messages, or of every session's (None); none until the index is loaded (``Engine.start``)."""
        if not self._topics_loaded:
            return []
        return self.topics.search(query, k, sessions=None if session_id is None else {session_id})

    def topic_messages(self, session_id: str) -> dict[str, list[str]]:
        """A session's main topics (topic id → message ids) that get a summary; none until loaded."""
        if not self._topics_loaded:
            return {}
        return self.topics.session_topics(session_id, least=TOPIC_SUMMARY_LEAST, most=TOPIC_SUMMARY_MOST)

    async def _observe_topics(self, session_id: str, pieces: Sequence[Piece]) -> TopicChange:
        index = await self.load_topics()
        total = TopicChange()
        read = [(eid, text, at) for eid, text, source, at in pieces if source == "user" or source.startswith(("history", "agent"))]
        await self._name_vectors(index, [text for _, text, _ in read])
        for n, (eid, text, at) in enumerate(read, start=1):
            if n % YIELD_EVERY == 0:
                await self._behind_ingest()
            change = index.observe(session_id, eid, text, at)
            total.topics += change.topics
            total.updated += change.updated
            total.mentions += change.mentions
            total.log += change.log
        return total

    async def _name_vectors(self, index: TopicIndex, texts: Sequence[str]) -> None:
        """Embed the new names of ``texts`` (and topic names not embedded yet) in one batch, so a
        name can join a topic by similarity (no embedder: case, inflection and numeronyms only)."""
        names = [t for text in texts for t in name_terms(text) if index.resolve(t)[0] is None]
        missing = index.name_vectors.missing([*index.unplaced_names(), *names])
        vectors = await self.ctx.embed(missing) if missing else None
        if vectors is not None:
            index.name_vectors.add(missing, vectors)
        index.place_names()

    async def split_topic(self, topic_id: str, alias: str) -> TopicChange:
        """Undo a merge: ``alias`` leaves ``topic_id`` for a topic of its own (logged)."""
        index = await self.load_topics()
        async with self._lock:
            change = index.split(topic_id, alias, utc_now())

            def write() -> None:
                with self.ctx.store.transaction():
                    self.ctx.store.save_topics([*change.topics, *change.updated], [], change.log, replace=True)
                    self.ctx.store.move_topic_mentions(topic_id, alias, change.topics[0].topic_id)

            await self.ctx.on_store(write)
        return change

    # ------------------------------------------------------------------ the user's actions

    async def _memory(self, memory_id: str) -> tuple[str, MemoryFragment]:
        memory = await self.ctx.on_store(self.ctx.store.get_memory, memory_id)
        if memory is None:
            raise NoRecordError(f"no memory {memory_id!r}")
        return await self.ctx.on_store(self.ctx.store.memory_session, memory_id), memory

    async def _rewrite(self, memory_id: str, change: Callable[[MemoryFragment, str], list[MemoryFragment]]
                       ) -> list[MemoryFragment]:
        """Apply ``change(memory, now)`` to the memory as it is stored now (``update_memory``: read
        and written in one transaction, so another process's revocation or edit is never undone;
        ``change`` raises ``MemoryChanged`` when it no longer applies), then to every open session,
        stamped under their locks; then the canvas follows."""
        session_id, _ = await self._memory(memory_id)
        async with self._visible(session_id) as now:
            def save() -> list[MemoryFragment]:
                changed = self.ctx.store.update_memory(memory_id, lambda m: change(m, now))
                self._kept.put(changed)
                return changed

            changed = await self.ctx.on_store(save)
            self._show([(session_id, m) for m in changed], now)
        for m in changed:
            await self._mark(session_id, m)
        return changed

    async def _mark(self, session_id: str, memory: MemoryFragment) -> None:
        """The memory's node (if it has one on an open canvas) follows an edit, a pin, a revocation."""
        state = self.ctx.sessions.get(session_id)
        node_id = state.node_of(memory.fragment_id) if state is not None else None
        if state is None or node_id is None or node_id not in state.graph:
            return
        async with self.ctx.lock(session_id):
            state.graph.update_node(node_id, label=_label(memory),
                                    attrs={"revoked": bool(memory.revoked_at), "pinned_memory": memory.pinned})
            node = state.graph.node(node_id)
            await self.ctx.on_store(self.ctx.store.save_node, session_id, node)

    async def revoke(self, memory_id: str) -> MemoryFragment:
        """Revoke a memory: closed and marked revoked (kept), out of the index, never recalled again."""
        async with self._lock:
            [changed] = await self._rewrite(memory_id, lambda m, now: [m if m.revoked_at else revoked(m, now)])
            if self.ctx.index is not None:
                await self.ctx.on_index(self.ctx.index.remove, [memory_id])
            return changed

    async def pin(self, memory_id: str, pinned: bool = True) -> MemoryFragment:
        """Pin a memory (consolidation leaves it as it is) or unpin it."""
        async with self._lock:
            [changed] = await self._rewrite(memory_id, lambda m, _now: [m.model_copy(update={"pinned": pinned})])
            return changed

    async def edit(self, memory_id: str, content: str) -> MemoryFragment:
        """A new version of a memory: a memory of its own that replaces the edited one (which is
        kept, marked replaced, so a replay of an earlier turn still reads the old words)."""
        async with self._lock:
            session_id, _ = await self._memory(memory_id)
            old, new = await self._rewrite(memory_id, lambda m, now: edited(still_valid(m), content, now))
            if self.ctx.index is not None:
                await self.ctx.on_index(self.ctx.index.remove, [old.fragment_id])
                await self.ctx.ex.run("embed", self.ctx.index.index_memory, session_id, [new])
            return new

    async def accept(self, memory_id: str) -> MemoryFragment:
        """The user accepts a memory from outside (an import's, an MCP client's): a preference,
        prohibition or permission becomes the user's own statement, said now, which replaces it
        (``writer.accept_write``); any other memory is marked accepted and, if of workspace scope,
        seen by every session (still quoted as outside text). Returns the memory that stands for
        it now."""
        async with self._lock:
            session_id, memory = await self._memory(memory_id)
            if not memory.origin:
                raise MemoryChanged(f"memory {memory_id} was made here: there is nothing to accept")
            async with self._visible(session_id) as now:
                def decide(kept: list[MemoryFragment]) -> Write:
                    current = next(m for m in kept if m.fragment_id == memory_id)  # as stored now
                    return Write() if current.accepted_at else accept_write(current, kept, now)

                write = await self._write(session_id, decide, TopicChange(), now)
            if self.ctx.index is not None and write:
                await self.ctx.on_index(self.ctx.index.remove, [memory_id])
                if write.new:
                    await self.ctx.ex.run("embed", self.ctx.index.index_memory, session_id, write.new)
            marked = write.changed.get(memory_id) or await self.ctx.on_store(self.ctx.store.get_memory, memory_id)
            assert marked is not None
            successor = marked.superseded_by  # a statement: the user's own now
            return (await self.ctx.on_store(self.ctx.store.get_memory, successor) if successor else None) or marked

    async def add_profile(self, session_id: str, text: str, *, origin: Origin = "") -> ProfileAdded | None:
        """Profile statements the user typed in the Memory panel ("I prefer…", "Never…", "You
        may…", parsed as an input's are): stored as workspace memories under ``session_id`` (the
        session open in the window) through the writer's decision (a statement already held is not
        written again; a new prohibition closes a permission of the same words, and so on), and
        put at once into the profile of every open session; a session opened later reads them from
        the store. No canvas node: no turn says them. None when ``text`` states none.

        ``origin`` "agent": an MCP client proposes them; they are pending (no one's profile)
        until the user accepts them (``accept``)."""
        async with self._lock:
            async with self._visible(session_id) as now:
                found = [m.with_origin(origin).model_copy(update={"context": f"{m.type} proposed by an MCP client"})
                         if origin else m for m in profile_by_hand(text, at=now)]
                if not found:
                    return None
                write = await self._write(session_id, lambda kept: plan_write(found, kept, now), TopicChange(), now)
                held = await self.ctx.on_store(self._held, found, {m.fragment_id for m in write.new})
            if write.new and self.ctx.index is not None:
                await self.ctx.ex.run("embed", self.ctx.index.index_memory, session_id, write.new)
        mine = {m.fragment_id for m in found}
        return ProfileAdded(added=[m for m in write.new if m.fragment_id in mine], held=held,
                            closed=[write.changed[old] for old, _ in write.closed if old in write.changed])

    def _held(self, found: Sequence[MemoryFragment], written: set[str]) -> list[MemoryFragment]:
        """On the store thread: for each of ``found`` not written, the kept memory that says it."""
        kept = list(self._kept.known().values())  # a proposal is held by a proposal, a statement by a statement
        same = [duplicate_of(m, [k for k in kept if k.pending == m.pending]) for m in found if m.fragment_id not in written]
        return [m for m in same if m is not None]

    async def list(self) -> list[tuple[str, MemoryFragment]]:
        """Every memory of the workspace with the session it came from (closed and revoked too)."""
        return await self.ctx.on_store(self.ctx.store.list_memories)
