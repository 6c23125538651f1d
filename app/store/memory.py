"""Memory objects and the topic index in SQLite (mixed into ``SqliteStore``).

Memory objects live in ``memory_fragments`` (one row per memory, the session it came from; fields
beyond the columns in ``data``). A memory is never deleted: closing, consolidating and revoking set
``valid_to`` (and ``superseded_by`` / ``revoked_at``); an edit or a link's evolution rewrites the row
with the earlier values kept in ``revisions``. Topics (migration 0007) are workspace-wide: topics
with their aliases, the topic–message mentions, and the append-only log of creates, merges and
splits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from app.core.types import MemoryFragment, utc_now
from app.store import records as R
from app.store.connection import NotFoundError, StoreBase


class MemoryStore(StoreBase):
    """Memory objects and topics; see the module docstring."""

    def add_memory(self, session_id: str, fragment: MemoryFragment) -> MemoryFragment:
        """Store a memory object; return it."""
        self._add(R.MEMORY, session_id, fragment, "memory.added")
        return fragment

    def add_memories(self, session_id: str, fragments: Sequence[MemoryFragment]) -> list[MemoryFragment]:
        """Store the memories not stored yet (by id) in one transaction; return those written."""
        with self.transaction():
            self._require_session(session_id)
            new = [f for f in fragments if self._one(
                "SELECT 1 FROM memory_fragments WHERE fragment_id = ?", (f.fragment_id,)) is None]
            for fragment in new:
                self._insert(R.MEMORY, session_id, fragment)
            if new:
                self._log(session_id, "memory.added", {"fragment_ids": [f.fragment_id for f in new]})
        return new

    def list_memory(self, session_id: str, include_superseded: bool = False) -> list[MemoryFragment]:
        """Return the session's memory objects in order (valid ones unless asked)."""
        where = "session_id = ?" + ("" if include_superseded else " AND valid_to IS NULL")
        return self._list(R.MEMORY, where, (session_id,))

    def list_memories(self) -> list[tuple[str, MemoryFragment]]:
        """Every memory object of the workspace with the session it came from (closed and revoked
        ones too), in the order they were recorded."""
        rows = self._db().execute("SELECT * FROM memory_fragments ORDER BY json_extract(data, '$.recorded_at'), "
                                  "session_id, seq")
        return [(row["session_id"], R.MEMORY.from_row(row)) for row in rows]

    def get_memory(self, fragment_id: str) -> MemoryFragment | None:
        """A memory object by id (closed and revoked ones too), or None."""
        return self._get(R.MEMORY, fragment_id)

    def memory_session(self, fragment_id: str) -> str:
        """The id of the session a memory came from."""
        row = self._one("SELECT session_id FROM memory_fragments WHERE fragment_id = ?", (fragment_id,))
        if row is None:
            raise NotFoundError(f"no memory {fragment_id!r}")
        return str(row["session_id"])

    def save_memory(self, fragment: MemoryFragment, event: str = "memory.updated") -> MemoryFragment:
        """Rewrite a stored memory object (a revision, a closing, a revocation, its access count)."""
        self._upsert(R.MEMORY, self.memory_session(fragment.fragment_id), fragment, event)
        return fragment

    def supersede_memory(self, fragment_id: str, at: str | None = None) -> MemoryFragment:
        """Mark a memory object as no longer valid from ``at`` (the row is kept); return it."""
        memory = self.get_memory(fragment_id)
        if memory is None:
            raise NotFoundError(f"no memory {fragment_id!r}")
        if memory.valid_to is not None:  # superseding twice keeps the first valid_to
            return memory
        return self.save_memory(memory.model_copy(update={"valid_to": at or utc_now()}), "memory.superseded")

    def touch_memories(self, fragment_ids: Iterable[str], at: str | None = None) -> None:
        """Count a recall of each memory (``access_count``, ``last_accessed_at``)."""
        at = at or utc_now()
        with self.transaction():
            for fragment_id in fragment_ids:
                self._db().execute(
                    "UPDATE memory_fragments SET data = json_set(data, '$.access_count', "
                    "COALESCE(json_extract(data, '$.access_count'), 0) + 1, '$.last_accessed_at', ?) "
                    "WHERE fragment_id = ?", (at, fragment_id))

    def messages_by_ids(self, ids: Sequence[str], around: int = 0) -> list[tuple[str, int, Any]]:
        """(session id, seq, message) of each stored message among ``ids`` (any session) and of the
        ``around`` messages before and after each in its session: workspace recall resolves other
        sessions' hits, and their neighbours in conversation, with it. Ordered by session and seq."""
        out: dict[str, tuple[str, int, Any]] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start:start + 500])
            marks = ", ".join("?" for _ in chunk)
            rows = self._db().execute(
                "SELECT m2.* FROM messages m1 JOIN messages m2 ON m2.session_id = m1.session_id "
                f"AND m2.seq BETWEEN m1.seq - ? AND m1.seq + ? WHERE m1.message_id IN ({marks})",
                (around, around, *chunk))
            for row in rows:
                out[row["message_id"]] = (row["session_id"], int(row["seq"]), R.MESSAGES.from_row(row))
        return sorted(out.values(), key=lambda r: (r[0], r[1]))

    # ------------------------------------------------------------------ topics

    def save_topics(self, topics: Iterable[Any], mentions: Iterable[Any], log: Iterable[dict[str, Any]]) -> None:
        """Write topics (insert or replace), new mentions and log records in one transaction.

        ``topics`` and ``mentions`` are ``app.core.memory.topics`` Topic / Mention values.
        """
        with self.transaction():
            db = self._db()
            for t in topics:
                db.execute("INSERT INTO topics (topic_id, name, aliases, created_at) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT(topic_id) DO UPDATE SET name = excluded.name, aliases = excluded.aliases",
                           (t.topic_id, t.name, R.dumps(t.aliases), t.created_at))
            for m in mentions:
                db.execute("INSERT OR REPLACE INTO topic_mentions (topic_id, session_id, message_id, term, rule) "
                           "VALUES (?, ?, ?, ?, ?)", (m.topic_id, m.session_id, m.message_id, m.term, m.rule))
            for entry in log:
                db.execute("INSERT INTO topic_log (at, op, payload) VALUES (?, ?, ?)",
                           (entry.get("at", utc_now()), entry["op"], R.dumps(entry)))

    def move_topic_mentions(self, topic_id: str, term: str, to_topic: str) -> None:
        """Re-point the mentions of ``topic_id`` made by ``term`` to ``to_topic`` (a split); the
        rule of a moved mention becomes "split"."""
        with self.transaction():
            self._db().execute("UPDATE topic_mentions SET topic_id = ?, rule = 'split' WHERE topic_id = ? AND term = ?",
                               (to_topic, topic_id, term))

    def load_topics(self) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str, str]], list[dict[str, Any]]]:
        """(topics as dicts, mentions as (topic_id, session_id, message_id, term, rule), the log)."""
        db = self._db()
        topics = [{"topic_id": r["topic_id"], "name": r["name"], "aliases": json.loads(r["aliases"]),
                   "created_at": r["created_at"]} for r in db.execute("SELECT * FROM topics ORDER BY rowid")]
        mentions = [(r["topic_id"], r["session_id"], r["message_id"], r["term"], r["rule"])
                    for r in db.execute("SELECT * FROM topic_mentions ORDER BY rowid")]
        log = [json.loads(r["payload"]) for r in db.execute("SELECT payload FROM topic_log ORDER BY seq")]
        return topics, mentions, log

    def session_topics(self, session_id: str) -> list[dict[str, Any]]:
        """The topics the session's messages mention, with those mentions (for export)."""
        db = self._db()
        out: dict[str, dict[str, Any]] = {}
        for r in db.execute("SELECT t.topic_id, t.name, t.aliases, m.message_id, m.term, m.rule FROM topic_mentions m "
                            "JOIN topics t ON t.topic_id = m.topic_id WHERE m.session_id = ? ORDER BY m.rowid",
                            (session_id,)):
            topic = out.setdefault(r["topic_id"], {"topic_id": r["topic_id"], "name": r["name"],
                                                   "aliases": json.loads(r["aliases"]), "mentions": []})
            topic["mentions"].append({"message_id": r["message_id"], "term": r["term"], "rule": r["rule"]})
        return list(out.values())

    def add_session_topics(self, session_id: str, topics: Iterable[dict[str, Any]]) -> None:
        """Write exported topics and their mentions of ``session_id`` (import): a topic already
        here keeps its name and gains the aliases it lacks."""
        db = self._db()
        for topic in topics:
            row = self._one("SELECT aliases FROM topics WHERE topic_id = ?", (topic["topic_id"],))
            aliases = {**topic.get("aliases", {}), **(json.loads(row["aliases"]) if row else {})}
            db.execute("INSERT INTO topics (topic_id, name, aliases, created_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT(topic_id) DO UPDATE SET aliases = excluded.aliases",
                       (topic["topic_id"], topic["name"], R.dumps(aliases), utc_now()))
            for m in topic.get("mentions", []):
                db.execute("INSERT OR IGNORE INTO topic_mentions (topic_id, session_id, message_id, term, rule) "
                           "VALUES (?, ?, ?, ?, ?)", (topic["topic_id"], session_id, m["message_id"], m["term"],
                                                      m["rule"]))
