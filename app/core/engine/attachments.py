"""Attached files: a local text file the user attaches becomes evidence and an artifact node.

``AttachmentService.attach(session_id, path)``:

1. reads the file through the ``FileReader`` port (``app.sensors.attach.read_attachment``, in a
   worker thread: the core does no I/O). A file that is missing, a folder, binary or larger than
   ``EngineConfig.attach_max_bytes`` is refused with an ``AttachError`` saying so;
2. compares its text with the latest version attached from the same path (a SHA-256 of the
   text, kept on the artifact node): the same text records nothing and returns that version
   (``changed`` False);
3. otherwise makes it an env event of kind ``file`` (change "attached", ``payload["attached"]``)
   and ingests it with ``EnvironmentService.ingest_env``, the path every watched-folder file
   takes: the event and its evidence stored, its text indexed (vector and full text), an ENV
   node routed like an input (to the task or turn that names the file, else the environment
   lane), a recall note, the memory writer cued (its ``key: value`` lines become facts). Two
   differences: an attached file's recall note holds its whole text, not the first 600
   characters (``app.core.routing.environment.note_text``), so a question about any line of it
   recalls the event and the compiler keeps the lines the question needs, with their
   ``lines:a-b`` selector; and one that no task or turn names is routed to the turn the user
   is working on rather than the environment lane (they attached it there);
4. under the session lock adds an ARTIFACT node "Attached: notes.txt v2" (``ref_id`` = the
   evidence id, which is the event's id; attrs ``path``, ``version``, ``attached``, ``sha256``,
   ``size``, ``lines``) with edges, all saved in one transaction with an ``artifact.attached``
   entry in the event log, so a reopened session shows it:

   * ``derived_from`` the env node of its event — always there: an event the store refused
     raises instead (a watched file's event and an attached file's look alike on the canvas;
     the artifact says which one the user attached and which version it is);
   * ``derived_from`` the previous version's artifact (v2 → v1), marked ``previous_version``;
   * ``references`` the turn its event was routed to, else the turn the user is working on
     (their chosen focus, else the latest turn) — the session's current anchor — so the
     artifact sits on the branch it was attached to; none in an empty session.

The event and the artifact are two steps (the event is ingested under the session lock first):
a turn built between them saw the event but not the node, live and in replay alike.

A document (PDF, Word, a spreadsheet, Markdown, code: the reader's ``LocalFile.document``) is
read in the background with progress — ``on_progress`` hears ``{"stage": "reading" | "indexing",
"done", "total", "unit"}`` on the event loop — and ``cancel`` stops it (``AttachCancelled``)
while it is read or its parts embedded, before anything is recorded. Its parts become evidences of
their own with their selectors (``app.core.session.documents``); a new version stores and embeds
only the parts that changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from typing import Any

from app.core.engine.context import EngineContext
from app.core.engine.environment import EnvironmentService, EnvRouted
from app.core.engine.sessions import SessionService
from app.core.errors import AttachCancelled, AttachError
from app.core.ports import CancelToken, FileReader, LocalFile, ReadProgress
from app.core.session.state import SessionState
from app.core.text.names import safe_text
from app.core.text.quoting import quote_label
from app.core.types import EdgeKind, EnvEvent, GraphEdge, GraphNode, NodeKind, utc_now


@dataclass(frozen=True)
class Attached:
    """What ``attach_file`` did: the artifact node standing for this version of the file
    (``node_id``, ``version``), the evidence it is bound to (``evidence_id``, also its env
    event's id), that event's env node, the file's name, path, size in bytes and line count, and
    ``changed``: False when the text was the latest version's (nothing was recorded; the ids are
    that version's). ``routed`` is what ingest did with the event (None when unchanged)."""

    session_id: str
    name: str
    path: str
    version: int
    node_id: str
    evidence_id: str
    env_node_id: str | None
    size: int
    lines: int
    changed: bool = True
    routed: EnvRouted | None = None
    parts: int = 0  # a document's parts (0: a plain text file)
    pages: int = 0  # a PDF's pages


def digest(text: str) -> str:
    """The SHA-256 of a file's text (how an unchanged file is told from a new version)."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def attach_event(file: LocalFile) -> EnvEvent:
    """The env event of an attached file: kind ``file``, change "attached", the file's folder as
    source, its path as uri, its name as title and label (``payload["path"]``), its text."""
    name = os.path.basename(file.path) or file.path
    payload: dict[str, Any] = {"change": "attached", "attached": True, "path": name, "size": file.size,
                               "mtime": file.modified, "encoding": file.encoding}
    if file.hidden_removed:
        payload["hidden_removed"] = file.hidden_removed
    if file.document is not None:
        payload["document"] = file.document
    return EnvEvent(kind="file", source=os.path.dirname(file.path), uri=file.path, title=name, content=file.text,
                    payload=payload)


def attached_versions(state: SessionState, path: str) -> list[GraphNode]:
    """The artifact nodes of the files attached from ``path``, oldest version first."""
    nodes = [n for n in state.graph.nodes(NodeKind.ARTIFACT) if n.attrs.get("attached") and n.attrs.get("path") == path]
    return sorted(nodes, key=lambda n: int(n.attrs.get("version", 0)))


def _env_node(state: SessionState, artifact: GraphNode) -> str | None:
    for edge in state.graph.out_edges(artifact.node_id, EdgeKind.DERIVED_FROM):
        if edge.dst in state.graph and state.graph.node(edge.dst).kind == NodeKind.ENV:
            return edge.dst
    return None


def _anchor(state: SessionState, routed: EnvRouted) -> str | None:
    """The turn the artifact sits on: the one its event was routed to, else the turn node the
    user is working on (their focus, else the latest turn), if any."""
    if routed.target_kind == "turn" and routed.target_node in state.graph:
        return routed.target_node
    node = state.focus_node()
    return node if node is not None and node in state.graph and state.graph.node(node).kind == NodeKind.TURN else None


class AttachmentService:
    """Attaches files to a session (see the module docstring). One attach at a time, so two
    attaches of one path never make the same version twice."""

    def __init__(self, ctx: EngineContext, sessions: SessionService, environment: EnvironmentService,
                 reader: FileReader | None) -> None:
        self.ctx, self.sessions, self.environment = ctx, sessions, environment
        self.reader = reader
        self._lock = asyncio.Lock()

    async def read(self, path: str, reader: FileReader | None = None, on_progress: ReadProgress | None = None,
                   cancel: CancelToken | None = None) -> LocalFile:
        """The file's text through ``reader`` (default: the reader port); ``AttachError`` for
        anything it refuses, and for an empty file; ``AttachCancelled`` once ``cancel`` is set.
        The reader's progress reaches ``on_progress`` on the event loop, as stage "reading"."""
        reader = reader or self.reader
        if reader is None:
            raise AttachError("files cannot be attached here: this engine was set up without a file reader")
        if not path.strip():
            raise AttachError("no file was chosen")
        name = safe_text(os.path.basename(path.rstrip("/\\")) or path)
        loop = asyncio.get_running_loop()

        def heard(value: dict[str, Any]) -> None:  # on the reader's thread
            if on_progress is not None:
                loop.call_soon_threadsafe(on_progress, {"stage": "reading", **value})

        cancelled = (lambda: cancel.cancelled) if cancel is not None else None
        try:
            file = await asyncio.to_thread(reader, path, self.ctx.config.attach_max_bytes, on_progress=heard,
                                           cancelled=cancelled)
        except AttachError:
            if cancel is not None and cancel.cancelled:
                raise AttachCancelled(f"attaching {name} was cancelled; nothing was recorded") from None
            raise
        except OSError as exc:  # a reader that let one through: still one plain line
            raise AttachError(f"{name} could not be read: {exc.strerror or exc}") from None
        if not file.text.strip():
            raise AttachError(f"{name} is empty: there is nothing to attach")
        return file

    async def attach(self, session_id: str, path: str, reader: FileReader | None = None, *,
                     on_progress: ReadProgress | None = None, cancel: CancelToken | None = None) -> Attached:
        """Attach the file at ``path`` to the session, read by ``reader`` (default: the reader
        port); return what was done (``Attached``). ``on_progress``/``cancel``: module doc."""
        async with self._lock:
            file = await self.read(path, reader, on_progress, cancel)
            state = await self.sessions.open(session_id)
            event = attach_event(file)
            sha = digest(file.text)
            earlier = attached_versions(state, safe_text(file.path))
            latest = earlier[-1] if earlier else None
            lines = line_count(file.text)
            if latest is not None and latest.attrs.get("sha256") == sha:
                return Attached(session_id=state.session_id, name=safe_text(event.title), path=str(latest.attrs["path"]),
                                version=int(latest.attrs["version"]), node_id=latest.node_id,
                                evidence_id=latest.ref_id or "", env_node_id=_env_node(state, latest),
                                size=file.size, lines=lines, changed=False)
            routed = await self.environment.ingest_env(state.session_id, [event], on_progress=on_progress,
                                                       cancel=cancel)
            mine = next((r for r in routed if r.event.event_id == event.event_id), None)
            if mine is None:
                raise AttachError(await self._not_stored(state.session_id, event))
            node = await self._add_artifact(state, mine, latest, sha, lines)
            doc = file.document or {}
            return Attached(session_id=state.session_id, name=mine.event.title, path=mine.event.uri,
                            version=int(node.attrs["version"]), node_id=node.node_id, evidence_id=mine.event.event_id,
                            env_node_id=mine.node_id, size=file.size, lines=lines, routed=mine,
                            parts=len(doc.get("parts") or []), pages=int(doc.get("pages") or 0))

    async def _not_stored(self, session_id: str, event: EnvEvent) -> str:
        """Why the event of an attached file was not stored, as one line."""
        reasons = [f.get("reason", "") for f in await self.environment.env_failures(session_id)
                   if f.get("event_id") == event.event_id and f.get("type") == "env.failed"]
        why = reasons[-1] if reasons else "the session already holds this event"
        return f"{safe_text(event.title)} could not be saved ({why})"

    async def _add_artifact(self, state: SessionState, routed: EnvRouted, latest: GraphNode | None, sha: str,
                            lines: int) -> GraphNode:
        """The artifact node of a new version with its edges: added to the graph and stored in one
        transaction (with an ``artifact.attached`` event log entry), under the session lock."""
        event = routed.event
        version = 1 + (int(latest.attrs.get("version", 0)) if latest is not None else 0)
        async with self.ctx.lock(state.session_id):
            at = utc_now()
            seq = {"valid_from_seq": len(state.turn_order)}
            node = GraphNode(kind=NodeKind.ARTIFACT, label=quote_label(f"Attached: {event.title} v{version}", 60),
                             ref_id=event.event_id, created_at=at,
                             attrs={"path": event.uri, "version": version, "attached": True, "sha256": sha,
                                    "size": event.payload.get("size"), "lines": lines})
            edges = [GraphEdge(src=node.node_id, dst=routed.node_id, kind=EdgeKind.DERIVED_FROM, created_at=at,
                               attrs=dict(seq))]
            if latest is not None and latest.node_id in state.graph:
                edges.append(GraphEdge(src=node.node_id, dst=latest.node_id, kind=EdgeKind.DERIVED_FROM,
                                       created_at=at, attrs={**seq, "previous_version": True}))
            anchor = _anchor(state, routed)
            if anchor is not None:
                edges.append(GraphEdge(src=node.node_id, dst=anchor, kind=EdgeKind.REFERENCES, created_at=at,
                                       attrs={**seq, "route": "attached"}))
            entry = {"node_id": node.node_id, "evidence_id": event.event_id, "path": event.uri, "version": version,
                     "sha256": sha, "edges": [e.edge_id for e in edges]}
            await self.ctx.on_store(self._write, state.session_id, node, edges, entry)
            state.add_node(node)
            for edge in edges:
                state.add_edge(edge)
        return node

    def _write(self, session_id: str, node: GraphNode, edges: list[GraphEdge], entry: dict[str, Any]) -> None:
        """On the store thread: the node, its edges and the log entry in one transaction."""
        store = self.ctx.store
        with store.transaction():
            store.save_node(session_id, node)
            for edge in edges:
                store.save_edge(session_id, edge)
            store.append_event(session_id, "artifact.attached", entry)
