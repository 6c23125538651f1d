"""``pcm memory list|show|revoke|edit|pin|unpin|accept|add`` and ``pcm topics``: the workspace's
memory from the command line.

    pcm memory list [--type fact] [--session ID] [--all] [--json]
    pcm memory show MEMORY_ID
    pcm memory revoke MEMORY_ID
    pcm memory edit MEMORY_ID "the new words"
    pcm memory pin|unpin MEMORY_ID
    pcm memory accept MEMORY_ID
    pcm memory add "Never deploy on Fridays." [--session ID]
    pcm topics [--json]

All but ``add`` read and write SQLite directly (no models load), each change decided on the
memory as it is stored at that moment, inside one transaction (another process — the app, ``pcm
mcp`` — may write the same memories; a running one takes the change in before its next build,
and its index follows). A revoked memory keeps its row (closed and marked revoked) and never
reaches a context again; an edit is a new memory that replaces the old one (refused when the
memory was revoked or edited meanwhile). ``accept`` takes a memory from outside — an imported
session's, or one an MCP client proposed ("pending" in the list) — as the user's own: a
preference, prohibition or permission becomes a statement of every session. ``add`` states
profile statements ("I prefer…", "Never…", "You may…") as the Memory panel's field does: the
engine's memory writer decides (a statement already held is not written again; a new
prohibition closes a permission of the same words) over the store alone — no embedder, no index:
the search index takes the new memories in when the app or another command with an index next
starts. They apply to every session, and the session given (default: the last used one, or a new
"Profile" session) keeps their record. A memory id may be given by its first characters, a
session by its first characters or ``last``.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from app.config import Settings
from app.core.engine.ids import resolve_id
from app.core.errors import CoreError
from app.core.memory.evolve import edited, is_valid, revoked, still_valid
from app.core.memory.writer import accept_write
from app.core.types import MemoryFragment, utc_now

if TYPE_CHECKING:
    from app.core.engine.facade import Engine


def _store(args: argparse.Namespace) -> Any:
    from app import main as wiring

    return wiring.open_store(Settings.load(args.data_dir))


def _state(memory: Any) -> str:
    if memory.pending:
        return "pending"
    if memory.accepted_at and memory.superseded_by:
        return "accepted"
    if memory.revoked_at:
        return "edited" if memory.superseded_by else "revoked"
    if memory.valid_to:
        return "closed" if memory.closed_at else "merged"
    return "valid"


def cmd_memory(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        if args.action == "list":
            return _list(store, args)
        memory = store.get_memory(resolve_id(store, "memory", args.memory_id))
        if memory is None:
            raise CoreError(f"no memory {args.memory_id!r} (pcm memory list shows their ids)")
        if args.action in _CHANGES:
            print(_CHANGES[args.action](store, memory.fragment_id, args))
            return 0
        print(json.dumps({"session_id": store.memory_session(memory.fragment_id), "state": _state(memory),
                          **memory.model_dump(mode="json")}, indent=2, ensure_ascii=False))
        return 0
    finally:
        store.close()


def _revoke(store: Any, memory_id: str, _args: argparse.Namespace) -> str:
    [memory] = store.update_memory(memory_id, lambda m: [m if m.revoked_at else revoked(m)], "memory.revoked")
    return f"revoked {memory.fragment_id} at {memory.revoked_at}: it is kept, and never recalled again"


def _edit(store: Any, memory_id: str, args: argparse.Namespace) -> str:
    text = (args.text or "").strip()
    if not text:
        raise CoreError('pcm memory edit needs the new words, e.g. pcm memory edit ID "deploy on Mondays"')
    old, new = store.update_memory(memory_id, lambda m: edited(still_valid(m), text, utc_now()), "memory.edited")
    return f"edited {old.fragment_id}: now {new.fragment_id}\t{new.type}\t{new.content}"


def _pin(store: Any, memory_id: str, args: argparse.Namespace) -> str:
    pinned = args.action == "pin"
    [memory] = store.update_memory(memory_id, lambda m: [m.model_copy(update={"pinned": pinned})], "memory.pinned")
    return f"{'pinned' if pinned else 'unpinned'} {memory.fragment_id}"


def _accept(store: Any, memory_id: str, _args: argparse.Namespace) -> str:
    """The memory from outside as the user's own (``writer.accept_write``), decided on every memory
    as stored inside the write transaction."""
    with store.transaction():
        memory = store.get_memory(memory_id)
        if not memory.origin:
            raise CoreError(f"memory {memory_id} was made here: there is nothing to accept")
        if memory.accepted_at:
            return f"{memory_id} was accepted at {memory.accepted_at}"
        session_id = store.memory_session(memory_id)
        write = accept_write(memory, [m for _, m in store.list_memories()], utc_now())
        store.add_memories(session_id, write.new)
        for changed in write.changed.values():
            store.save_memory(changed, "memory.accepted" if changed.fragment_id == memory_id else "memory.updated")
    stands: MemoryFragment = (write.new or [write.changed[memory_id]])[0]
    if stands.fragment_id == memory_id:
        return f"accepted {memory_id}\t{stands.type}\t{stands.content}"
    return f"accepted {memory_id}: your statement {stands.fragment_id}\t{stands.type}\t{stands.content}"


_CHANGES = {"revoke": _revoke, "edit": _edit, "pin": _pin, "unpin": _pin, "accept": _accept}


def _list(store: Any, args: argparse.Namespace) -> int:
    titles = {s["session_id"]: s["title"] for s in store.list_sessions(archived=True)}
    session = resolve_id(store, "session", args.session) if args.session else None
    rows = [(sid, m) for sid, m in store.list_memories()
            if (args.all or is_valid(m)) and (not args.type or m.type == args.type)
            and (session is None or sid == session)]
    if args.json:
        print(json.dumps([{"session_id": sid, "state": _state(m), "origin": m.origin, "accepted_at": m.accepted_at,
                           **m.model_dump(mode="json")} for sid, m in rows], indent=2, ensure_ascii=False))
        return 0
    for sid, m in rows:
        where = " ".join((titles.get(sid) or sid).split())
        text = " ".join(m.content.split())[:80]  # one line, whatever an import wrote
        print(f"{m.fragment_id}\t{m.type}\t{m.scope}\t{_state(m)}\t{m.valid_from[:10]}\t{text}\t{where}")
    if not rows:
        print("no memories yet: they are written after each answered turn")
    return 0


def cmd_topics(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        topics, mentions, log = store.load_topics()
    finally:
        store.close()
    counts: dict[str, int] = {}
    for topic_id, *_ in mentions:
        counts[topic_id] = counts.get(topic_id, 0) + 1
    if args.json:
        print(json.dumps({"topics": [{**t, "mentions": counts.get(t["topic_id"], 0)} for t in topics], "log": log},
                         indent=2, ensure_ascii=False))
        return 0
    for t in sorted(topics, key=lambda t: -counts.get(t["topic_id"], 0)):
        aliases = ", ".join(f"{a} ({rule})" for a, rule in t["aliases"].items())
        print(f"{t['topic_id']}\t{t['name']}\t{counts.get(t['topic_id'], 0)} messages\t{aliases}")
    if not topics:
        print("no topics yet: names in your inputs (Kubernetes, k8s, src/app.py) start them")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("memory", help="list, show, revoke, edit, pin, accept or add the workspace's memories")
    p.add_argument("action", choices=["list", "show", "revoke", "edit", "pin", "unpin", "accept", "add"])
    p.add_argument("memory_id", nargs="?", metavar="MEMORY_ID|TEXT",
                   help="show, revoke, edit, pin, unpin, accept: the memory's id or its first characters; add: profile statements "
                        "(\"Never deploy on Fridays.\")")
    p.add_argument("text", nargs="?", help="edit: the memory's new words")
    p.add_argument("--type", help="list: only this type (fact, preference, prohibition, decision, ...)")
    p.add_argument("--session", metavar="ID", help="list: only memories taken from this session; add: the "
                   "session that keeps their record (default: the last used one); an id, its first characters, or "
                   "'last'")
    p.add_argument("--all", action="store_true", help="list: also closed, merged and revoked memories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_checked)

    p = sub.add_parser("topics", help="the topic index: topics, their aliases and how often they come up")
    p.add_argument("--json", action="store_true", help="also the log of creates, merges and splits")
    p.set_defaults(func=cmd_topics)


def _checked(args: argparse.Namespace) -> int:
    if args.action == "add":
        if not (args.memory_id or "").strip():
            raise CoreError('pcm memory add needs the statement, e.g. pcm memory add "Never deploy on Fridays."')
        return cmd_memory_add(args)
    if args.action != "list" and not args.memory_id:
        raise CoreError(f"pcm memory {args.action} needs a MEMORY_ID (pcm memory list shows them)")
    return cmd_memory(args)


def cmd_memory_add(args: argparse.Namespace) -> int:
    """``pcm memory add TEXT``: the profile statements of TEXT, for every session (module doc)."""
    from app.cli_pipeline import _with_engine

    text = args.memory_id.strip()

    async def work(engine: Engine) -> int:
        if args.session:
            session_id: str | None = await engine.resolve_id("session", args.session)
        else:
            session_id = await engine.last_used_session()
        state = await engine.open_session(session_id, title="Profile")
        added = await engine.add_profile(text, state.session_id)
        if added is None:
            print('no preference, prohibition or permission in that text ("I prefer…", "Never…", "You may…")')
            return 1
        for memory in added.added:
            print(f"added {memory.fragment_id}\t{memory.type}\t{memory.content}")
        for memory in added.held:
            print(f"already held {memory.fragment_id}\t{memory.type}\t{memory.content}")
        for memory in added.closed:
            print(f"closed {memory.fragment_id}\t{memory.type}\t{memory.content}")
        return 0

    # No model: deciding is rules over the store; the index embeds the new memories when an engine
    # with an index next starts (its catch-up), and workspace notes are read from the store.
    return _with_engine(args, work, chat=False, counter="words", index=False)
