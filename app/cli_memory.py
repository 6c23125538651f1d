"""``pcm memory list|show|revoke`` and ``pcm topics``: the workspace's memory from the command line.

    pcm memory list [--type fact] [--session ID] [--all] [--json]
    pcm memory show MEMORY_ID
    pcm memory revoke MEMORY_ID
    pcm topics [--json]

They read and write SQLite directly (no models load). A revoked memory keeps its row (closed and
marked revoked) and never reaches a context again; an app that has the session open sees the
revocation the next time it opens it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.config import Settings
from app.core.errors import CoreError
from app.core.memory.evolve import is_valid, revoked


def _store(args: argparse.Namespace) -> Any:
    from app import main as wiring

    return wiring.open_store(Settings.load(args.data_dir))


def _state(memory: Any) -> str:
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
        memory = store.get_memory(args.memory_id)
        if memory is None:
            raise CoreError(f"no memory {args.memory_id!r} (pcm memory list shows their ids)")
        if args.action == "revoke":
            if memory.revoked_at is None:
                memory = store.save_memory(revoked(memory), "memory.revoked")
            print(f"revoked {memory.fragment_id} at {memory.revoked_at}: it is kept, and never recalled again")
            return 0
        print(json.dumps({"session_id": store.memory_session(memory.fragment_id), "state": _state(memory),
                          **memory.model_dump(mode="json")}, indent=2, ensure_ascii=False))
        return 0
    finally:
        store.close()


def _list(store: Any, args: argparse.Namespace) -> int:
    titles = {s["session_id"]: s["title"] for s in store.list_sessions(archived=True)}
    rows = [(sid, m) for sid, m in store.list_memories()
            if (args.all or is_valid(m)) and (not args.type or m.type == args.type)
            and (not args.session or sid == args.session)]
    if args.json:
        print(json.dumps([{"session_id": sid, "state": _state(m), **m.model_dump(mode="json")} for sid, m in rows],
                         indent=2, ensure_ascii=False))
        return 0
    for sid, m in rows:
        where = titles.get(sid) or sid
        print(f"{m.fragment_id}\t{m.type}\t{m.scope}\t{_state(m)}\t{m.valid_from[:10]}\t{m.content[:80]}\t{where}")
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
    p = sub.add_parser("memory", help="list, show or revoke the workspace's memories")
    p.add_argument("action", choices=["list", "show", "revoke"])
    p.add_argument("memory_id", nargs="?", metavar="MEMORY_ID", help="show, revoke: the memory's id")
    p.add_argument("--type", help="list: only this type (fact, preference, prohibition, decision, ...)")
    p.add_argument("--session", metavar="ID", help="list: only memories taken from this session")
    p.add_argument("--all", action="store_true", help="list: also closed, merged and revoked memories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_checked)

    p = sub.add_parser("topics", help="the topic index: topics, their aliases and how often they come up")
    p.add_argument("--json", action="store_true", help="also the log of creates, merges and splits")
    p.set_defaults(func=cmd_topics)


def _checked(args: argparse.Namespace) -> int:
    if args.action != "list" and not args.memory_id:
        raise CoreError(f"pcm memory {args.action} needs a MEMORY_ID (pcm memory list shows them)")
    return cmd_memory(args)
