"""Environment events in the engine: stored, indexed, put on the canvas, routed, pushed.

``EnvironmentService`` runs on the engine's context. ``ingest_env(session_id, events)`` takes one
coalesced batch from the sensors' intake and, per event: stores the event and its evidence (one
transaction for the batch), indexes its text (so search and recall find it), adds an ENV node to
the graph and routes the event like an input (``env_routing.RouteIndex``): a ``references`` edge
to the task or turn that names the file / feed / endpoint, or to the most similar one; otherwise
no edge (the environment lane) — except a file the user attached (``attachments.py``), which goes
to the turn they are working on. Each decision is logged as ``env.routed``. An event that reaches
an ACTIVE task is pushed: ``env_pushed`` emits a ``PushNotice`` with a context compiled for that
task in mode push, the event pinned as must evidence (logged as ``env.pushed``).

Events also become recall notes (``SessionState.notes``), loaded again when a session opens, so
a later "what changed in plan.md?" gets the event as evidence.

Nothing is dropped silently: an event that fails to embed is stored all the same (routed by
name, indexed by the index's own embedding or reported as not indexed); a batch that fails to
store is split until the failing event is alone and retried; what still fails is recorded in
the event log with its reason (``env.failed``, ``env.unindexed``), announced by ``env_failed``
and listed by ``env_failures`` (the Environment dock shows both).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.context.compiler import Item
from app.core.context.sections.tools import clip
from app.core.engine.context import EngineContext
from app.core.engine.documents import DocumentParts, PreparedParts, Progress
from app.core.engine.sessions import SessionService
from app.core.engine.sources import PushSources
from app.core.engine.tools import ToolService
from app.core.errors import AttachCancelled
from app.core.intent.model import EnvEventRef
from app.core.pipeline.record import BuildRecord
from app.core.pipeline.sources import BuildRequest
from app.core.ports import CancelToken
from app.core.routing.environment import (
    LANE,
    Route,
    RouteIndex,
    env_evidence,
    env_header,
    env_label,
    env_title,
    index_text,
    note_text,
    task_text,
)
from app.core.runtime.intake import storable
from app.core.session.state import NoteView, SessionState
from app.core.signals import Signal
from app.core.text.names import safe_text
from app.core.text.quoting import quote_label
from app.core.types import (
    BlockType,
    EdgeKind,
    EnvEvent,
    Evidence,
    GraphEdge,
    GraphNode,
    NodeKind,
    Priority,
    Task,
    TaskStatus,
    utc_now,
)

log = logging.getLogger(__name__)

#: One routed event: the event, its ENV node, its route (``LANE`` when unrouted), its edge.
Plan = tuple[EnvEvent, GraphNode, Route, GraphEdge | None]


@dataclass(frozen=True)
class PushNotice:
    """An env event that touched an active task: the task, the event, the event's graph node and
    a context compiled for the task in mode push (``context.context`` has the blocks)."""

    session_id: str
    task: Task
    event: EnvEvent
    node_id: str
    context: BuildRecord


@dataclass(frozen=True)
class EnvRouted:
    """What ``ingest_env`` did with one event: its ENV node, where it was routed (``target_kind``
    "task" | "turn" | "lane", the node and, for a task, its id), how and why, the
    ``references`` edge (None in the lane) and the push notice when it touched an active task."""

    event: EnvEvent
    node_id: str
    target_kind: str
    target_node: str | None
    task_id: str | None
    how: str
    score: float
    reason: str
    edge: GraphEdge | None = None
    notice: PushNotice | None = None


@dataclass(frozen=True)
class EnvFailure:
    """An env event the session could not take whole: ``stored`` False — it could not be stored
    (it is not in the session; the event log keeps what it was and why), True — it was stored
    but not indexed (search and recall miss it until the index is rebuilt). ``reason`` is one
    line; ``attempts`` how often it was tried alone."""

    event: EnvEvent
    reason: str
    stored: bool
    attempts: int = 1

    def entry(self) -> dict[str, Any]:
        """The failure as recorded in the event log (and listed by ``env_failures``): ``type``
        (``env.failed`` | ``env.unindexed``), what the event was (display-safe) and why."""
        e = self.event
        return {"type": "env.unindexed" if self.stored else "env.failed", "event_id": e.event_id, "kind": e.kind,
                "title": safe_text(e.title)[:300], "uri": safe_text(e.uri)[:1000], "source": safe_text(e.source)[:1000],
                "change": str(e.payload.get("change", "")), "at": e.at, "reason": self.reason,
                "attempts": self.attempts, "raw_uri": e.payload.get("raw_uri")}


@dataclass
class EnvConfig:
    route_threshold: float = 0.55  # cosine an event needs to a task / turn text to be routed by topic
    route_turns: int = 50  # latest turns considered
    push_budget: int = 512  # tokens of a push context
    retries: int = 2  # further attempts for an event that failed alone
    retry_delay_s: float = 0.02  # before each of them (times the attempt)


#: An event's embedding, None where it could not be embedded (it is then routed by name only).
Vectors = list[np.ndarray | None] | None


def _reason(exc: BaseException) -> str:
    text = safe_text(str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300].rstrip(": ")


class EnvironmentService:
    """Env ingest, routing and push. ``env_ingested(session_id, routed)`` and ``env_pushed(notice)``
    are emitted on the loop once a batch is stored; ``env_failed(session_id, failures)`` when
    some of its events could not be stored or indexed."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, tools: ToolService,
                 config: EnvConfig | None = None) -> None:
        self.ctx, self.sessions, self.tools = ctx, sessions, tools
        self.config = config or EnvConfig()
        self.env_ingested: Signal[[str, list[EnvRouted]]] = Signal("env_ingested")
        self.env_pushed: Signal[[PushNotice]] = Signal("env_pushed")
        self.env_failed: Signal[[str, list[EnvFailure]]] = Signal("env_failed")
        self._text_vectors: dict[str, np.ndarray] = {}  # task texts' embeddings, by text
        self.documents = DocumentParts(ctx)

    # ------------------------------------------------------------------ ingest

    async def ingest_env(self, session_id: str, events: Sequence[EnvEvent], *, on_progress: Progress | None = None,
                         cancel: CancelToken | None = None) -> list[EnvRouted]:
        """Store, index, draw and route a batch of env events; push those touching an active task.

        A document's parts are stored with its event, in one transaction; only the parts that
        changed are embedded (``engine/documents.py``: ``on_progress``, ``cancel``).

        Returns one ``EnvRouted`` per new event that was stored, in order (an event id the session
        has already is skipped). Every string is made storable first (``storable``: a name that
        is not UTF-8 is escaped, its exact form kept in the payload). An event that fails to
        embed, store or index never takes its batch down: a failing batch is split in halves
        until the failing event is alone, which is tried ``retries`` more times; one that still
        cannot be stored, or was stored but not indexed, is recorded with its reason
        (``env.failed`` / ``env.unindexed`` in the event log, see ``env_failures``) and announced
        by ``env_failed``. ``env_ingested`` and ``env_pushed`` are emitted once everything is stored.
        """
        state = await self.sessions.open(session_id)
        unique: dict[str, EnvEvent] = {}
        for event in events:  # an event delivered twice (a retried batch) is ingested once
            if event.event_id not in state.notes:
                unique.setdefault(event.event_id, storable(event))
        if not unique:
            return []
        routed, failures = await self._isolated(state, list(unique.values()), on_progress, cancel)
        if failures:
            await self._record_failures(session_id, failures)
        self.env_ingested.emit(session_id, routed)
        for item in routed:
            if item.notice is not None:
                self.env_pushed.emit(item.notice)
        return routed

    async def _isolated(self, state: SessionState, events: list[EnvEvent], on_progress: Progress | None = None,
                        cancel: CancelToken | None = None) -> tuple[list[EnvRouted], list[EnvFailure]]:
        """Ingest ``events``; when that fails, each half on its own, down to single events."""
        try:
            return await self._ingest_batch(state, events, on_progress, cancel)
        except (asyncio.CancelledError, AttachCancelled):
            raise
        except Exception as exc:  # noqa: BLE001 - isolate the failing event, keep the rest
            if len(events) == 1:
                return await self._retry_alone(state, events[0], exc)
            mid = len(events) // 2
            left = await self._isolated(state, events[:mid], on_progress, cancel)
            right = await self._isolated(state, events[mid:], on_progress, cancel)
            return left[0] + right[0], left[1] + right[1]

    async def _retry_alone(self, state: SessionState, event: EnvEvent,
                           error: Exception) -> tuple[list[EnvRouted], list[EnvFailure]]:
        for attempt in range(1, self.config.retries + 1):
            await asyncio.sleep(self.config.retry_delay_s * attempt)
            try:
                return await self._ingest_batch(state, [event])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded below with its reason
                error = exc
        log.warning("env event %s (%s) could not be stored: %s", event.event_id, event.uri, _reason(error))
        return [], [EnvFailure(event, _reason(error), stored=False, attempts=1 + self.config.retries)]

    async def _vectors(self, events: Sequence[EnvEvent]) -> Vectors:
        """The events' embeddings; when the batch fails, each alone (None for one that fails)."""
        texts = [index_text(e) for e in events]
        try:
            vectors = await self.ctx.embed(texts)
            return None if vectors is None else list(vectors)
        except Exception:  # noqa: BLE001 - embed one at a time below
            log.warning("embedding a batch of %d env events failed; embedding them one by one", len(texts))
        out: list[np.ndarray | None] = []
        for text in texts:
            try:
                one = await self.ctx.embed([text])
                out.append(None if one is None else one[0])
            except Exception:  # noqa: BLE001 - stored all the same, routed by name, not indexed
                out.append(None)
        return out

    async def _ingest_batch(self, state: SessionState, events: list[EnvEvent], on_progress: Progress | None = None,
                            cancel: CancelToken | None = None) -> tuple[list[EnvRouted], list[EnvFailure]]:
        """One attempt: embed (a document's new parts too), then under the session lock route,
        store (one transaction: all or nothing), index, add to the state and push. Raises only
        before the store committed."""
        vectors = await self._vectors(events)
        parts = await self.documents.prepare(state, events, on_progress, cancel)
        async with self.ctx.lock(state.session_id):
            keep = [n for n, e in enumerate(events) if e.event_id not in state.notes]  # raced in meanwhile
            if not keep:
                return [], []
            events = [events[n] for n in keep]
            vectors = None if vectors is None else [vectors[n] for n in keep]
            return await self._ingest_env_locked(state, events, vectors, parts)

    async def _ingest_env_locked(self, state: SessionState, events: list[EnvEvent], vectors: Vectors,
                                 parts: PreparedParts) -> tuple[list[EnvRouted], list[EnvFailure]]:
        sid = state.session_id
        ctx = self.ctx
        tasks = await self.tools.task_writer.list_tasks(sid)
        by_id = {t.task_id: t for t in tasks}
        turns = self._turn_texts(state)
        try:
            task_vecs, turn_vecs = await self._route_vectors(state, tasks, turns, vectors is not None)
        except Exception:  # noqa: BLE001 - route by name only; the events must still land
            log.exception("embedding the routing targets failed")
            task_vecs, turn_vecs = {}, {}
        added_at = utc_now()
        index = RouteIndex(tasks, turns, task_vectors=task_vecs, turn_vectors=turn_vecs,
                           threshold=self.config.route_threshold)
        nodes: list[GraphNode] = []
        plans = [self._route_one(state, event, index.route(event, None if vectors is None else vectors[n]),
                                 by_id, nodes, added_at) for n, event in enumerate(events)]
        edges = [edge for _, _, _, edge in plans if edge is not None]
        # One push per active task per batch, for its latest event: a burst of saves to one file
        # (or to several files of one task) is one notice, not one context build each.
        latest = {route.ref: n for n, (_, _, route, _) in enumerate(plans) if route.kind == "task"}
        pushes = {n for ref, n in latest.items() if ref in by_id and by_id[ref].status == TaskStatus.ACTIVE}
        ids = [e.event_id for e in events]
        added, retired = parts.added(ids, added_at), parts.retired(ids)
        await ctx.on_store(self._write_batch, sid, plans, nodes, edges, by_id, pushes, added_at, (added, retired))
        # Committed: from here on nothing may raise, or a retry would store the events twice.
        unindexed = await self._index(sid, events, vectors)
        failed = await self.documents.index(sid, added, retired, parts)  # a reason, when it failed
        unindexed += [EnvFailure(e, f"parts not indexed: {failed}", stored=True) for e in events
                      if failed and e.event_id in parts.plans]
        self.documents.apply(state, added, retired, added_at)
        for event, node, _, _ in plans:
            state.add_note(NoteView(event.event_id, "env", note_text(event), event.at, added_at))
        for node in nodes:
            state.add_node(node)
        for new_edge in edges:
            state.add_edge(new_edge)
        out = []
        for n, (event, node, route, edge) in enumerate(plans):
            task = by_id.get(route.ref or "") if route.kind == "task" else None
            notice = await self._safe_push(state, task, event, node) if task is not None and n in pushes else None
            out.append(EnvRouted(event=event, node_id=node.node_id, target_kind=route.kind,
                                 target_node=edge.dst if edge else None, task_id=task.task_id if task else None,
                                 how=route.how, score=route.score, reason=route.reason, edge=edge, notice=notice))
        return out, unindexed

    async def _index(self, sid: str, events: list[EnvEvent], vectors: Vectors) -> list[EnvFailure]:
        """Index stored events (those without a vector are embedded by the index); a failing
        batch is indexed one event at a time, and an event that still fails is reported."""
        index = self.ctx.index
        if index is None:
            return []
        failures: list[EnvFailure] = []

        async def add(batch: list[EnvEvent], vecs: list[np.ndarray] | None) -> None:
            try:
                await self.ctx.ex.run("embed", index.index_env_events, sid, batch, vecs)
            except Exception as exc:  # noqa: BLE001 - stored already: report, never raise
                if len(batch) == 1:
                    failures.append(EnvFailure(batch[0], f"not indexed: {_reason(exc)}", stored=True))
                    return
                for n, event in enumerate(batch):
                    await add([event], None if vecs is None else [vecs[n]])

        known = [(e, v) for e, v in zip(events, vectors or [None] * len(events)) if v is not None]
        if known:
            await add([e for e, _ in known], [v for _, v in known])
        unknown = [e for e, v in zip(events, vectors or [None] * len(events)) if v is None]
        if unknown:
            await add(unknown, None)
        return failures

    async def _record_failures(self, sid: str, failures: list[EnvFailure]) -> None:
        """One ``env.failed`` / ``env.unindexed`` log entry per failure (what the event was and
        why), then ``env_failed``. A store that refuses even that is logged, never raised."""
        store = self.ctx.store

        def write() -> None:
            for f in failures:
                entry = f.entry()
                try:
                    store.append_event(sid, entry.pop("type"), entry)
                except Exception:  # noqa: BLE001 - nothing more can be done than to log it
                    log.exception("could not record the failed env event %s", f.event.event_id)

        try:
            await self.ctx.on_store(write)
        except Exception:  # noqa: BLE001 - as above
            log.exception("could not record %d failed env events", len(failures))
        self.env_failed.emit(sid, failures)

    async def env_failures(self, session_id: str) -> list[dict[str, Any]]:
        """The session's recorded env failures, oldest first: ``env.failed`` / ``env.unindexed``
        event log entries (``type``, ``at`` and the payload's event fields and ``reason``)."""
        entries = await self.ctx.on_store(self.ctx.store.list_events, session_id)
        return [{**e["payload"], "type": e["type"]} for e in entries if e.get("type") in ("env.failed", "env.unindexed")]

    def _route_one(self, state: SessionState, event: EnvEvent, route: Route, by_id: dict[str, Task],
                   nodes: list[GraphNode], added_at: str) -> Plan:
        """The event's ENV node (appended to ``nodes``) and its ``references`` edge to the routed
        target (None in the lane; a later turn is the first to see it). A file the user attached
        that nothing names goes to the turn they are on instead of the lane: it was put there."""
        if route.kind == "lane" and event.payload.get("attached"):
            focus = state.focus_node()
            if focus is not None and focus in state.graph and state.graph.node(focus).kind == NodeKind.TURN:
                route = Route("turn", focus, "attached", 1.0, "attached by the user on this branch")
        node = GraphNode(kind=NodeKind.ENV, label=quote_label(env_label(event), 60), ref_id=event.event_id, created_at=added_at,
                         attrs={"kind": event.kind, "uri": event.uri, "change": event.payload.get("change", ""),
                                "source": event.source, "at": event.at})
        nodes.append(node)
        target = self._target_node(state, route, by_id, nodes, added_at)
        if target is None:
            return event, node, LANE, None
        edge = GraphEdge(src=node.node_id, dst=target, kind=EdgeKind.REFERENCES, created_at=added_at,
                         attrs={"valid_from_seq": len(state.turn_order), "route": route.how, "score": route.score})
        return event, node, route, edge

    def _write_batch(self, sid: str, plans: list[Plan], nodes: list[GraphNode], edges: list[GraphEdge],
                     by_id: dict[str, Task], pushes: set[int], added_at: str,
                     parts: tuple[list[Evidence], list[str]] = ([], [])) -> None:
        """Store a routed batch in one transaction (on the store thread): events, their evidence,
        their documents' parts (new ones added, vanished ones superseded), nodes, edges and one
        ``env.routed`` log entry per event."""
        store = self.ctx.store
        with store.transaction():
            for event, _, _, _ in plans:
                store.add_env_event(sid, event)
                store.add_evidence(sid, env_evidence(event, added_at))
            for part in parts[0]:
                store.add_evidence(sid, part)
            for part_id in parts[1]:
                store.supersede_evidence(part_id, added_at)
            for node in nodes:
                store.save_node(sid, node)
            for new_edge in edges:
                store.save_edge(sid, new_edge)
            for n, (event, node, route, edge) in enumerate(plans):
                task = by_id.get(route.ref or "") if route.kind == "task" else None
                store.append_event(sid, "env.routed", {
                    "event_id": event.event_id, "node_id": node.node_id, "target_kind": route.kind,
                    "target_node": edge.dst if edge else None, "task_id": task.task_id if task else None,
                    "how": route.how, "score": route.score, "reason": route.reason, "push": n in pushes})

    def _turn_texts(self, state: SessionState) -> list[tuple[str, str]]:
        """(turn node, the turn's text) of the latest turns, latest first."""
        out = []
        for turn_id in reversed(state.turn_order[-self.config.route_turns:]):
            turn = state.turns[turn_id]
            if turn.node_id is not None:
                out.append((turn.node_id, "\n".join(state.messages[m].text for m in turn.message_ids)))
        return out

    async def _route_vectors(self, state: SessionState, tasks: Sequence[Task], turns: Sequence[tuple[str, str]],
                             wanted: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Embeddings of the task texts (cached by text) and, per turn node, of its best-known
        message (the index's vectors; the user's input when both are there)."""
        if not wanted:
            return {}, {}
        texts = [task_text(t) for t in tasks]
        missing = sorted({t for t in texts if t and t not in self._text_vectors})
        if missing:
            fresh = await self.ctx.embed(missing)
            if fresh is not None:
                self._text_vectors.update(zip(missing, fresh))
        task_vecs = {t.task_id: self._text_vectors[x] for t, x in zip(tasks, texts) if x in self._text_vectors}
        mids = {node: state.turn_messages(node) for node, _ in turns}
        known = await self.ctx.vectors_for([m for ids in mids.values() for m in ids])
        turn_vecs = {}
        for node, ids in mids.items():
            vecs = [known[m] for m in ids if m in known]
            if vecs:  # the turn as a whole: the normalised mean of its messages
                mean = np.mean(np.stack(vecs), axis=0)
                norm = float(np.linalg.norm(mean))
                if norm > 0:
                    turn_vecs[node] = mean / norm
        return task_vecs, turn_vecs

    def _target_node(self, state: SessionState, route: Route, tasks: dict[str, Task], new_nodes: list[GraphNode],
                     at: str) -> str | None:
        """The graph node an event routed to ``route`` points at (None: the lane). A task that has
        no node yet gets one, so the canvas can show the link."""
        if route.kind == "turn":
            return route.ref if route.ref in state.graph else None
        if route.kind != "task" or route.ref not in tasks:
            return None
        task = tasks[route.ref]
        for candidate in (getattr(task, "node_id", None), state.node_of(task.task_id)):
            if candidate and (candidate in state.graph or any(n.node_id == candidate for n in new_nodes)):
                return candidate
        created = next((n for n in new_nodes if n.ref_id == task.task_id and n.kind == NodeKind.TASK), None)
        if created is None:
            created = GraphNode(kind=NodeKind.TASK, label=task.name[:60], ref_id=task.task_id, created_at=at,
                                attrs={"status": task.status.value})
            new_nodes.append(created)
        return created.node_id

    # ------------------------------------------------------------------ push

    async def _safe_push(self, state: SessionState, task: Task, event: EnvEvent, node: GraphNode) -> PushNotice | None:
        """``_push``, or None when it fails (the event is stored; the notice is logged as lost)."""
        try:
            return await self._push(state, task, event, node)
        except Exception:  # noqa: BLE001 - a push is a courtesy; the stored event is what counts
            log.exception("push for env event %s failed", event.event_id)
            return None

    async def _push(self, state: SessionState, task: Task, event: EnvEvent, node: GraphNode) -> PushNotice:
        """Compile the push context for ``task`` with ``event`` as must evidence; log ``env.pushed``.

        The build's input is the app's own words and the task's name only: the event's label is
        outside text, so it reaches the context fenced (the pinned evidence) and the query vector
        (embedded with the label), never the input line of the prompt."""
        ctx, budget = self.ctx, self.config.push_budget
        text = f"{env_header(event)} for the active task: {task.name}"
        vecs = await ctx.embed([f"{text}\n{env_title(event)}"])
        pinned_text = clip(note_text(event), max(48, budget // 3), ctx.counter)
        pinned = (
            Item(f"task:{task.task_id}", BlockType.STATE,
                 f"Active task: {task.name}" + (f" (done when: {task.acceptance})" if task.acceptance else ""),
                 Priority.MUST, order=0),
            Item(event.event_id, BlockType.EVIDENCE, pinned_text, Priority.MUST, score=1.0, order=-1,
                 evidence_ids=(event.event_id,)),
        )
        ref = EnvEventRef(kind=event.kind, title=quote_label(event.title or env_label(event)), uri=quote_label(event.uri))
        started = time.perf_counter()
        record, _, _ = await ctx.builder.build(
            state,
            BuildRequest(text=text, at=utc_now(), budget=budget,
                         query_vector=None if vecs is None else [float(x) for x in vecs[0]],
                         exclude_ids=(event.event_id,), trigger="env", env_events=(ref,), pinned=pinned),
            PushSources(ctx, self.sessions, self.tools),
        )
        await ctx.on_store(ctx.store.append_event, state.session_id, "env.pushed", {
            "event_id": event.event_id, "task_id": task.task_id, "node_id": node.node_id,
            "mode": record.intent.get("mode"), "tokens": record.context.tokens,
            "evidence_ids": record.context.source_ids(), "build_ms": round((time.perf_counter() - started) * 1000, 3)})
        return PushNotice(session_id=state.session_id, task=task, event=event, node_id=node.node_id, context=record)
