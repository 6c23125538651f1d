"""What the MCP tools do, over the engine facade: each returns (text within the token limit,
structured content with evidence, session and turn ids). Transport-free, so it is tested
directly as well as through the official MCP client (``tests/mcp``).

- ``snippets``: records of every session relevant to a query (vector + full text fused by the
  engine, ``Engine.search``), by relevance, recency or both; with ``expand`` each input comes with
  its answer (and an answer with its input).
- ``summary``: the context PCM's compiler builds for the query in each conversation (the plan,
  recall, the relevance gate and the budget all act; nothing is generated): a context summary
  whose every line names its evidence. ``level`` sets how much of ``max_tokens`` it may use.
- ``record_event``: an input or observation stored into a session in arrival order by a writer
  task, on the branch the anchor router picks for it (a build without generation); the call
  returns at once with the message id the record will have.
- ``attach_file``: a text file inside a watched folder attached to a session as evidence, versioned
  by its text (``Engine.attach_file`` with ``watched_only``: the confined opener ``read_file`` uses).
- ``facts``: keyed statements the user made (``Engine.facts``), each with when it became true and,
  when a later statement replaced it, until when.
- ``memory``: stored notes (memory fragments and environment events) relevant to a query.
- ``sessions``, ``status``, ``configure_provider``.
Nothing here deletes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

from app.core.errors import AttachError, CoreError
from app.core.types import Author, AuthorKind, BlockType, Message, Role, new_id, utc_now

if TYPE_CHECKING:  # the engine's modules load with the engine (in the background), not with the server
    from app.core.engine.facade import Engine

log = logging.getLogger(__name__)

Strategy = Literal["relevance", "recency", "mixed"]
Level = Literal["brief", "standard", "detailed"]
LEVEL_SHARE = {"brief": 0.35, "standard": 0.7, "detailed": 1.0}  # of max_tokens a summary may use
MAX_LIMIT = 100  # search_memory's most results
MAX_TOKENS = 32_000  # the most any tool's text may take (a context larger than any local model's)
EVIDENCE_BLOCKS = (BlockType.EVIDENCE, BlockType.CONVERSATION, BlockType.STATE, BlockType.MEMORY)


class ToolArgumentError(CoreError):
    """A tool argument that cannot be used; the message names the field."""


@dataclass
class Snippet:
    evidence_id: str
    session_id: str
    turn_id: str | None
    role: str
    at: str
    text: str
    score: float

    def line(self) -> str:
        return f"[{self.evidence_id[:8]} · session {self.session_id[:8]} · {self.at[:16]} · {self.role}] {self.text}"


def _in_range(at: str, since: str | None, until: str | None) -> bool:
    return (since is None or at >= since) and (until is None or at <= until)


def moment(field: str, value: str | None, *, end: bool = False) -> str | None:
    """``value`` (ISO 8601: a date, or a date-time with or without its offset; naive is UTC) as
    the stored times are written (UTC, ``…Z``), for comparing as text; a bare date as ``end``
    covers its whole day. ``ToolArgumentError`` naming ``field`` when it is not a date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ToolArgumentError(f"{field}: not an ISO 8601 date or date-time ({text[:40]!r}); e.g. "
                                "2026-03-01 or 2026-03-01T09:30:00Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if end and len(text) == 10:  # a date alone: until the end of that day
        when += timedelta(days=1, microseconds=-1)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def time_range(start: str | None, end: str | None) -> tuple[str | None, str | None]:
    """A ``timeRange`` argument checked and normalised (``moment``); its start not after its end."""
    since, until = moment("timeRange.start", start), moment("timeRange.end", end, end=True)
    if since is not None and until is not None and since > until:
        raise ToolArgumentError(f"timeRange: start ({start}) is after end ({end})")
    return since, until


@dataclass
class ContextService:
    """The tools' logic over one engine (see the module doc)."""

    engine: Engine
    data_dir: Any = None
    add_provider: Callable[..., Any] | None = None  # app.llm.providers.settings.add_agent_provider
    _queue: asyncio.Queue[tuple[str, Message]] | None = None
    _writer: asyncio.Task[None] | None = None
    # the latest message ids record_event stored, in order (bounded: the server may run for days)
    written: deque[str] = field(default_factory=lambda: deque(maxlen=1000))

    # ------------------------------------------------------------------ reading

    def _fit(self, lines: list[str], max_tokens: int) -> tuple[str, int]:
        """As many whole lines as fit ``max_tokens`` (the engine's counter); the count kept."""
        kept: list[str] = []
        used = 0
        for line in lines:
            cost = self.engine.count_tokens(line) + 1
            if used + cost > max_tokens:
                break
            kept.append(line)
            used += cost
        return "\n".join(kept), len(kept)

    async def _snippet(self, message_id: str, score: float) -> Snippet | None:
        records = self.engine.records()
        message = await records.message(message_id)
        turn = await records.turn(message.turn_id) if message is not None and message.turn_id else None
        if message is None or turn is None:
            return None
        return Snippet(message_id, turn["session_id"], message.turn_id, message.role.value, message.at,
                       " ".join(message.content.split()), score)

    async def _partner(self, snip: Snippet) -> Snippet | None:
        """The other message of the snippet's turn (the answer of an input, the input of an answer)."""
        turn = await self.engine.records().turn(snip.turn_id) if snip.turn_id else None
        if turn is None:
            return None
        other = turn.get("answer_message_id") if snip.evidence_id == turn.get("input_message_id") \
            else turn.get("input_message_id")
        return await self._snippet(other, snip.score) if other and other != snip.evidence_id else None

    async def snippets(self, query: str, max_tokens: int = 1000, strategy: Strategy = "mixed",
                       expand: bool = True, since: str | None = None,
                       until: str | None = None) -> tuple[str, dict[str, Any]]:
        if not query.strip():
            raise ToolArgumentError("query: give some words to look for")
        if not 16 <= max_tokens <= MAX_TOKENS:
            raise ToolArgumentError(f"maxTokens: between 16 and {MAX_TOKENS} (got {max_tokens})")
        hits = await self.engine.records().search(query, k=24, since=since, until=until)
        found = [s for s in [await self._snippet(i, score) for i, score in hits] if s is not None]
        if strategy == "recency":
            found.sort(key=lambda s: s.at, reverse=True)
        elif strategy == "mixed":  # by relevance rank, a newer one ahead of a close older one
            newest = sorted({s.at for s in found})
            age = {at: n / max(1, len(newest) - 1) for n, at in enumerate(newest)}
            place = {s.evidence_id: 1 - n / max(1, len(found)) for n, s in enumerate(found)}
            found.sort(key=lambda s: 0.85 * place[s.evidence_id] + 0.15 * age[s.at], reverse=True)
        ordered: list[Snippet] = []
        seen: set[str] = set()
        for snip in found:
            for item in ([snip, await self._partner(snip)] if expand else [snip]):
                if item is not None and item.evidence_id not in seen:
                    seen.add(item.evidence_id)
                    ordered.append(item)
        text, kept = self._fit([s.line() for s in ordered], max_tokens)
        if not ordered:
            text = "Nothing stored matches."
        elif not kept:  # matches exist, but not even the best fits: say so, never "nothing matches"
            best = self.engine.count_tokens(ordered[0].line()) + 1
            text = (f"{len(ordered)} stored records match, but none fits within maxTokens={max_tokens}: the best "
                    f"needs {best} tokens. Ask again with a larger maxTokens.")
        return text, {"query": query, "strategy": strategy, "snippets": [vars(s) for s in ordered[:kept]],
                      "matched": len(ordered), "fits": kept > 0 or not ordered}

    async def summary(self, query: str, conversation_ids: list[str] | None = None, since: str | None = None,
                      until: str | None = None, max_tokens: int = 2000,
                      level: Level = "standard") -> tuple[str, dict[str, Any]]:
        if not query.strip():
            raise ToolArgumentError("query: give some words to summarize for")
        since, until = time_range(since, until)
        if not 64 <= max_tokens <= MAX_TOKENS:
            raise ToolArgumentError(f"maxTokens: between 64 and {MAX_TOKENS} (got {max_tokens})")
        sessions = {r["session_id"]: r for r in await self.engine.list_sessions(archived=True)}
        wanted = conversation_ids or [sid for sid in [await self.engine.last_used_session()] if sid]
        unknown = [sid for sid in wanted if sid not in sessions]
        if unknown:
            raise ToolArgumentError(f"conversationIds: no session {unknown[0]!r} (list_sessions gives the ids)")
        budget = max(64, int(max_tokens * LEVEL_SHARE[level]) // max(1, len(wanted)))
        parts, items = [], []
        for sid in wanted:
            record, _ = await self.engine.build(sid, query, budget=budget)
            times = await self._times([r.evidence_id for b in record.context.blocks for r in b.refs])
            lines = []
            for block in record.context.blocks:
                ids = [r.evidence_id for r in block.refs]
                if block.block_type not in EVIDENCE_BLOCKS or not block.content.strip():
                    continue
                if ids and not any(_in_range(times.get(i, ""), since, until) for i in ids):
                    continue
                lines.append(block.content.strip())
                items.append({"session_id": sid, "block_type": block.block_type.value, "evidence_ids": ids,
                              "content": block.content})
            title = sessions[sid].get("title") or sid[:8]
            parts.append(f"## {title} ({sid[:8]})\n" + ("\n".join(lines) if lines else "(nothing relevant)"))
        text, kept = self._fit("\n\n".join(parts).splitlines(), max_tokens)
        if items and kept <= 1:  # a header at most: the lines found do not fit
            text = (f"{len(items)} relevant blocks were found, but none fits within maxTokens={max_tokens}. "
                    "Ask again with a larger maxTokens or a briefer level.")
        return text, {"query": query, "level": level, "sessions": wanted, "blocks": items,
                      "fits": not items or kept > 1}

    async def _times(self, evidence_ids: list[str]) -> dict[str, str]:
        out = {}
        for eid in evidence_ids:
            message = await self.engine.records().message(eid)
            if message is not None:
                out[eid] = message.at
        return out

    async def facts(self, query: str = "", session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        known = [r["session_id"] for r in await self.engine.list_sessions(archived=session_id is not None)]
        if session_id is not None and session_id not in known:
            raise ToolArgumentError(f"sessionId: no session {session_id!r} (list_sessions gives the ids)")
        out = []
        for sid in [session_id] if session_id else known:
            state = await self.engine.session_state(sid)  # reading: not the user opening it
            by_key: dict[str, list[Any]] = {}
            for fact in self.engine.facts(state):
                by_key.setdefault(fact.key, []).append(fact)
            for key, versions in by_key.items():
                versions.sort(key=lambda f: f.at)
                for n, fact in enumerate(versions):
                    valid_to = versions[n + 1].at if n + 1 < len(versions) else None
                    out.append({"key": key, "value": fact.value, "valid_from": fact.at, "valid_to": valid_to,
                                "evidence_id": fact.evidence_id, "session_id": sid})
        words = [w for w in query.lower().split() if w]
        if words:
            out = [f for f in out if any(w in f"{f['key']} {f['value']}".lower() for w in words)]
        lines = [f"{f['key']} = {f['value']} (from {f['valid_from'][:16]}"
                 + (f" until {f['valid_to'][:16]})" if f["valid_to"] else ", still true)") for f in out]
        return "\n".join(lines) or "No stated facts match.", {"facts": out}

    async def memory(self, query: str, limit: int = 10) -> tuple[str, dict[str, Any]]:
        if not query.strip():
            raise ToolArgumentError("query: give some words to look for")
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolArgumentError(f"limit: between 1 and {MAX_LIMIT} (got {limit})")
        hits = await self.engine.records().search(query, k=limit, kinds=("memory", "env"))
        rows = {r.id: r for r in await self.engine.records().searchable([i for i, _ in hits])}
        found = [{"evidence_id": i, "kind": rows[i].kind, "session_id": rows[i].session_id, "at": rows[i].at,
                  "content": rows[i].text, "score": round(score, 6)} for i, score in hits if i in rows]
        lines = [f"[{f['evidence_id'][:8]} · {f['kind']} · {f['at'][:16]}] {' '.join(f['content'].split())[:300]}"
                 for f in found]
        return "\n".join(lines) or "No stored note matches.", {"memories": found}

    async def sessions(self, archived: bool = False) -> tuple[str, dict[str, Any]]:
        rows = await self.engine.list_sessions(archived=archived)
        keep = ("session_id", "title", "created_at", "opened_at", "archived_at", "turn_count", "message_count")
        items = [{k: r.get(k) for k in keep} for r in rows]
        lines = [f"{r['session_id']}  {r['title'] or '(untitled)'}  · {r['turn_count']} turns" for r in items]
        return "\n".join(lines) or "No sessions yet.", {"sessions": items}

    async def status(self) -> tuple[str, dict[str, Any]]:
        rows = await self.engine.list_sessions(archived=True)
        indexed = await self.engine.records().index_size()
        info = {"sessions": len(rows), "turns": sum(int(r.get("turn_count") or 0) for r in rows),
                "indexed_records": indexed, "chat_model": self.engine.model_name,
                "token_counter": self.engine.counter_name, "pending_events": self._queue.qsize() if self._queue else 0}
        return "\n".join(f"{k}: {v}" for k, v in info.items()), info

    # ------------------------------------------------------------------ writing

    async def record_event(self, text: str, session_id: str | None = None, kind: str = "input",
                           author: str = "") -> tuple[str, dict[str, Any]]:
        """Queue ``text`` for ``session_id`` (the session used last, or a new one); return at once."""
        if not text.strip():
            raise ToolArgumentError("text: nothing to record")
        if kind not in ("input", "observation"):
            raise ToolArgumentError("kind: 'input' or 'observation'")
        await self._check_session(session_id)
        sid = session_id or await self.engine.last_used_session() or (await self.engine.open_session(None)).session_id
        who = Author(kind=AuthorKind.USER if kind == "input" else AuthorKind.TOOL, id=author or "mcp")
        # what a client records is outside text (origin "agent"), whoever it names as the author:
        # quoted (fenced) wherever a context shows it, never the user's profile or facts
        message = Message(message_id=new_id(), role=Role.USER if kind == "input" else Role.TOOL,
                          content=text, author=who, at=utc_now()).with_origin("agent")
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._writer = asyncio.create_task(self._write(), name="mcp record_event writer")
        await self._queue.put((sid, message))
        return f"Queued as {message.message_id} in session {sid}.", {
            "session_id": sid, "message_id": message.message_id, "evidence_id": message.message_id, "queued": True}

    async def add_profile(self, text: str, session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """The profile statements of ``text`` proposed for the user: stored as memories from an
        agent, pending — no session's profile — until the user accepts them (``pcm memory accept
        ID``, the Memory panel); ``session_id`` (the session used last, or a new one) keeps their record."""
        if not text.strip():
            raise ToolArgumentError("text: nothing to add")
        await self._check_session(session_id)
        sid = session_id or await self.engine.last_used_session()
        # an agent writing is not the user opening a session: only a first session is created
        state = await (self.engine.session_state(sid) if sid else self.engine.open_session(None, title="Profile"))
        added = await self.engine.add_profile(text, state.session_id, origin="agent")
        if added is None:
            raise ToolArgumentError('text: no preference, prohibition or permission in it ("I prefer…", '
                                    '"Never…", "You may…")')
        parts = {"added": added.added, "held": added.held, "closed": added.closed}
        lines = [f"{what.replace('held', 'already held')}: {m.type}: {m.content}" for what, ms in parts.items()
                 for m in ms]
        if added.added:
            lines.append("Proposed: they apply once the user accepts them (pcm memory accept ID, or the Memory "
                         "panel); until then no session's profile holds them.")
        return "\n".join(lines), {"session_id": state.session_id, **{
            what: [{"memory_id": m.fragment_id, "type": m.type, "content": m.content, "pending": m.pending}
                   for m in ms]
            for what, ms in parts.items()}}

    async def attach_file(self, path: str, session_id: str | None = None) -> tuple[str, dict[str, Any]]:
        """Attach the text file at ``path`` to ``session_id`` (the session used last, or a new one)
        as the user's "Attach file…" does, but read as ``read_file`` reads: only inside the folders
        the user watches (an agent gets no wider view of the disk than the model has)."""
        if not path.strip():
            raise ToolArgumentError("path: no file named")
        await self._check_session(session_id)
        # no session yet: a new id, created only once the file has been read (a refusal leaves none)
        sid = session_id or await self.engine.last_used_session() or new_id()
        try:
            done = await self.engine.attach_file(sid, path, watched_only=True)
        except AttachError as exc:
            raise ToolArgumentError(f"path: {exc}") from None
        data = {"session_id": done.session_id, "evidence_id": done.evidence_id, "node_id": done.node_id,
                "name": done.name, "path": done.path, "version": done.version, "changed": done.changed,
                "lines": done.lines, "bytes": done.size}
        if not done.changed:
            return f"Unchanged: {done.name} v{done.version} is already attached with this text.", data
        return (f"Attached {done.name} v{done.version} ({done.lines} lines) to session {done.session_id}; "
                f"evidence {done.evidence_id}."), data

    async def _check_session(self, session_id: str | None) -> None:
        """A ``sessionId`` argument names a stored session (None: the caller picks one)."""
        if session_id is not None:
            known = {r["session_id"] for r in await self.engine.list_sessions(archived=True)}
            if session_id not in known:
                raise ToolArgumentError(f"sessionId: no session {session_id!r} (list_sessions gives the ids)")

    async def _write(self) -> None:
        assert self._queue is not None
        while True:
            sid, message = await self._queue.get()
            try:
                parent, sure = await self._routed_parent(sid, message.content)
                await self.engine.ingest(sid, [message], parents={message.message_id: parent},
                                         routed={message.message_id: sure})
                self.written.append(message.message_id)
            except Exception:  # noqa: BLE001 - one bad event must not stop the writer
                log.exception("record_event: could not store %s", message.message_id)
            finally:
                self._queue.task_done()

    async def _routed_parent(self, session_id: str, text: str) -> tuple[str | None, float]:
        """Where the anchor router puts ``text`` in the session (a build, nothing recorded): the
        last message of the turn it continues, or None for a new branch; and how sure routing was
        of that tree (its share, ``session.membership``)."""
        record, _ = await self.engine.build(session_id, text)
        sure = float((record.routing.get("shares") or {}).get("share", 1.0))
        if record.anchor_node is None:
            return None, 1.0
        state = await self.engine.session_state(session_id)
        turn = state.graph.node(record.anchor_node).ref_id if record.anchor_node in state.graph else None
        mids = state.turns[turn].message_ids if turn in state.turns else []
        return (mids[-1], sure) if mids else (None, 1.0)

    async def drain(self) -> None:
        """Wait until every queued event is stored (tests, and before the server stops)."""
        if self._queue is not None:
            await self._queue.join()

    async def configure_provider(self, provider: str, config: dict[str, Any],
                                 set_as_default: bool = False) -> tuple[str, dict[str, Any]]:
        """A new provider entry named as this client's (``add_agent_provider``): never one the user
        configured changed or redirected, never the default — only the user makes one the default."""
        if self.add_provider is None:
            raise ToolArgumentError("provider: this server cannot change providers")
        if set_as_default:
            raise ToolArgumentError("setAsDefault: only the user makes a provider the default "
                                    "(pcm providers default ID, or Settings → Providers)")
        added = self.add_provider(self.data_dir, {"provider": provider, **config})
        reloaded = await self.engine.reload_providers()
        data = added.model_dump(mode="json") if hasattr(added, "model_dump") else dict(added)
        return (f"Provider {data.get('id')} saved, tried after the providers you configured"
                + ("; in use now." if reloaded else "; used from the next start.")), {"provider": data}
