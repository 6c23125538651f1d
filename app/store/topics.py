"""The topic index in SQLite (migration 0007; a part of ``SqliteStore``).

Topics are workspace-wide: topics with their aliases, the topic–message mentions, and the
append-only log of creates, merges and splits (``app.core.memory.topics`` decides them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from app.core.types import utc_now
from app.store import records as R
from app.store.connection import Database


class TopicStore:
    """Topics, their mentions and their log; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def save_topics(self, topics: Iterable[Any], mentions: Iterable[Any], log: Iterable[dict[str, Any]], *,
                    replace: bool = False) -> None:
        """Write topics, new mentions and log records in one transaction.

        ``topics`` and ``mentions`` are ``app.core.memory.topics`` Topic / Mention values. A topic
        already stored keeps the aliases it has and gains these (another process may have added
        some since this one read it: a copy kept in memory never takes them away), unless
        ``replace`` (a split takes an alias out).
        """
        aliases = "excluded.aliases" if replace else "json_patch(topics.aliases, excluded.aliases)"
        with self.db.transaction():
            db = self.db.connection()
            for t in topics:
                db.execute("INSERT INTO topics (topic_id, name, aliases, created_at) VALUES (?, ?, ?, ?) "
                           f"ON CONFLICT(topic_id) DO UPDATE SET name = excluded.name, aliases = {aliases}",
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
        with self.db.transaction():
            self.db.connection().execute(
                "UPDATE topic_mentions SET topic_id = ?, rule = 'split' WHERE topic_id = ? AND term = ?",
                (to_topic, topic_id, term))

    def load_topics(self) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str, str]], list[dict[str, Any]]]:
        """(topics as dicts, mentions as (topic_id, session_id, message_id, term, rule), the log)."""
        db = self.db.connection()
        topics = [{"topic_id": r["topic_id"], "name": r["name"], "aliases": json.loads(r["aliases"]),
                   "created_at": r["created_at"]} for r in db.execute("SELECT * FROM topics ORDER BY rowid")]
        mentions = [(r["topic_id"], r["session_id"], r["message_id"], r["term"], r["rule"])
                    for r in db.execute("SELECT * FROM topic_mentions ORDER BY rowid")]
        log = [json.loads(r["payload"]) for r in db.execute("SELECT payload FROM topic_log ORDER BY seq")]
        return topics, mentions, log

    def session_topics(self, session_id: str) -> list[dict[str, Any]]:
        """The topics the session's messages mention, with those mentions (for export)."""
        db = self.db.connection()
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
        db = self.db.connection()
        for topic in topics:
            row = self.db.one("SELECT aliases FROM topics WHERE topic_id = ?", (topic["topic_id"],))
            aliases = {**topic.get("aliases", {}), **(json.loads(row["aliases"]) if row else {})}
            db.execute("INSERT INTO topics (topic_id, name, aliases, created_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT(topic_id) DO UPDATE SET aliases = excluded.aliases",
                       (topic["topic_id"], topic["name"], R.dumps(aliases), utc_now()))
            for m in topic.get("mentions", []):
                db.execute("INSERT OR IGNORE INTO topic_mentions (topic_id, session_id, message_id, term, rule) "
                           "VALUES (?, ?, ?, ?, ?)", (topic["topic_id"], session_id, m["message_id"], m["term"],
                                                      m["rule"]))
