"""Loaders for replay datasets kept outside the repository (../shared/data; never copied in).

Only the small readers the evaluations need: each returns plain typed records, in file order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StreamMessage:
    """One chat line of a multi-party stream (irc-dev ``messages.jsonl``)."""

    id: str
    stream: str
    ts: str
    author: str
    text: str
    kind: str = "message"
    scored: bool = True


def _jsonl(path: Path) -> Iterator[dict]:
    """Yield the JSON objects of a JSON-lines file, skipping blank lines."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                yield json.loads(line)


def load_stream_messages(path: Path) -> list[StreamMessage]:
    """Return the messages of ``messages.jsonl`` in file (= stream) order."""
    return [
        StreamMessage(
            id=str(rec["id"]),
            stream=str(rec.get("stream", "")),
            ts=str(rec.get("ts", "")),
            author=str(rec.get("author") or ""),
            text=str(rec.get("text") or ""),
            kind=str(rec.get("kind") or "message"),
            scored=bool(rec.get("scored", True)),
        )
        for rec in _jsonl(path)
    ]


def load_route_gold(path: Path) -> dict[str, frozenset[str] | None]:
    """Return message id → the set of acceptable parents, or None for a new conversation."""
    gold: dict[str, frozenset[str] | None] = {}
    for rec in _jsonl(path):
        parents = rec.get("parent_ids")
        if parents is None:
            parents = [] if rec.get("parent_id") is None else [rec["parent_id"]]
        gold[str(rec["id"])] = frozenset(str(p) for p in parents) or None
    return gold


def group_streams(messages: list[StreamMessage]) -> dict[str, list[StreamMessage]]:
    """Return stream name → its messages in order (streams in order of first appearance)."""
    streams: dict[str, list[StreamMessage]] = {}
    for message in messages:
        streams.setdefault(message.stream, []).append(message)
    return streams
