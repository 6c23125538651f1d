"""The sessions table: a session's own fields, and the list of sessions as a person uses it
(titles, the last one used, search, archive).

Archiving hides a session from the list and never deletes anything; clearing ``archived_at``
undoes it. ``opened_at`` is set each time a session is opened, so "the last used session" is the
one opened most recently (older data folders, without it, fall back to the latest turn).
"""

from __future__ import annotations

import json
from typing import Any

from app.core.types import Meta, Summary, new_id, utc_now
from app.store import records as R
from app.store.connection import Database, NotFoundError, StoreError

_LIST = (
    "SELECT s.session_id, s.title, s.created_at, s.updated_at, s.opened_at, s.archived_at, s.origin, "
    "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count, "
    "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.session_id) AS turn_count "
    "FROM sessions s"
)


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere, its wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SessionCatalog:
    """Sessions: create, update and read one; list, search and archive them; the last used one
    (a part of ``SqliteStore``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_session(self, title: str = "", session_id: str | None = None, *,
                       created_at: str | None = None, origin: str | None = None) -> str:
        """Create a session and return its id; an existing ``session_id`` raises ``StoreError``.
        ``origin`` "imported": its title came with an import (outside text) until it is renamed."""
        session_id = session_id or new_id()
        created_at = created_at or utc_now()
        with self.db.transaction():
            if self.db.one("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)):
                raise StoreError(f"session {session_id!r} already exists")
            self.db.connection().execute(
                "INSERT INTO sessions (session_id, title, created_at, updated_at, origin) "
                "VALUES (?, ?, ?, ?, ?)", (session_id, title, created_at, created_at, origin or None))
            self.db.log(session_id, "session.created", {"title": title})
        return session_id

    def update_session(self, session_id: str, *, title: str | None = None,
                       meta: Meta | None = None, summary: Summary | None = None,
                       doc_extras: dict[str, Any] | None = None) -> None:
        """Set the given session fields (``None`` leaves a field unchanged); a title set here is
        the user's (its ``origin`` is cleared)."""
        values: dict[str, Any] = {}
        if title is not None:
            values["title"], values["origin"] = title, None
        if meta is not None:
            values["meta"] = R.dumps(R.dump_model(meta))
        if summary is not None:
            values["summary"] = R.dumps(R.dump_model(summary))
        if doc_extras is not None:
            values["doc_extras"] = R.dumps(doc_extras)
        if not values:
            return
        with self.db.transaction():
            self.db.require_session(session_id)
            sets = ", ".join(f"{name} = ?" for name in values)
            self.db.connection().execute(f"UPDATE sessions SET {sets} WHERE session_id = ?",
                                         (*values.values(), session_id))
            self.db.log(session_id, "session.updated", {"fields": sorted(values)})

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Return the session as a dict (meta/summary as core types or None), or None."""
        row = self.db.one("SELECT * FROM sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None
        return {
            "session_id": row["session_id"], "title": row["title"],
            "created_at": row["created_at"], "updated_at": row["updated_at"], "origin": row["origin"],
            "meta": None if row["meta"] is None else Meta.model_validate(json.loads(row["meta"])),
            "summary": None if row["summary"] is None
            else Summary.model_validate(json.loads(row["summary"])),
            "doc_extras": json.loads(row["doc_extras"]),
        }

    def list_sessions(self, *, archived: bool = False) -> list[dict[str, Any]]:
        """Every session (id, title, times, message and turn counts) in creation order; archived
        ones only when ``archived`` (then all of them, each with its ``archived_at``)."""
        where = "" if archived else " WHERE s.archived_at IS NULL"
        return [dict(row) for row in self.db.connection().execute(_LIST + where + " ORDER BY s.rowid")]

    def search_sessions(self, text: str, *, archived: bool = False) -> list[str]:
        """Ids of the sessions whose title or any message contains ``text`` (any case), in creation
        order; archived ones only when ``archived``."""
        pattern = _like(text.strip())
        hidden = "" if archived else " AND s.archived_at IS NULL"
        rows = self.db.connection().execute(
            "SELECT s.session_id FROM sessions s WHERE (s.title LIKE ? ESCAPE '\\' OR EXISTS ("
            "SELECT 1 FROM messages m WHERE m.session_id = s.session_id AND m.content LIKE ? ESCAPE '\\'))"
            + hidden + " ORDER BY s.rowid", (pattern, pattern))
        return [row[0] for row in rows]

    def set_session_archived(self, session_id: str, archived: bool) -> None:
        """Archive the session (hide it from the list) or bring it back; logged either way."""
        with self.db.transaction():
            self.db.require_session(session_id)
            self.db.connection().execute("UPDATE sessions SET archived_at = ? WHERE session_id = ?",
                                         (utc_now() if archived else None, session_id))
            self.db.log(session_id, "session.archived" if archived else "session.unarchived", {})

    def title_untitled_session(self, session_id: str, title: str) -> bool:
        """Give the session ``title`` if it has none yet (its first input names it); True if set."""
        if not title:
            return False
        with self.db.transaction():
            cursor = self.db.connection().execute(
                "UPDATE sessions SET title = ?, origin = NULL WHERE session_id = ? AND title = ''", (title, session_id))
            if cursor.rowcount:
                self.db.log(session_id, "session.updated", {"fields": ["title"], "automatic": True})
        return bool(cursor.rowcount)

    def set_session_generation(self, session_id: str, settings: dict[str, Any]) -> None:
        """Keep the session's own generation settings (a JSON object; {} for the defaults)."""
        with self.db.transaction():
            self.db.require_session(session_id)
            self.db.connection().execute("UPDATE sessions SET generation = ? WHERE session_id = ?",
                                         (json.dumps(settings, sort_keys=True), session_id))
            self.db.log(session_id, "session.generation_set", settings)

    def session_generation(self, session_id: str) -> dict[str, Any]:
        """The session's own generation settings ({} when it has none or does not exist)."""
        row = self.db.one("SELECT generation FROM sessions WHERE session_id = ?", (session_id,))
        return json.loads(row[0]) if row is not None and row[0] else {}

    def mark_session_opened(self, session_id: str) -> None:
        """Note that the session was opened now (what "the last used session" follows)."""
        with self.db.transaction():
            cursor = self.db.connection().execute("UPDATE sessions SET opened_at = ? WHERE session_id = ?",
                                                  (utc_now(), session_id))
            if cursor.rowcount == 0:
                raise NotFoundError(f"no session {session_id!r}")

    def last_used_session_id(self) -> str | None:
        """The session opened most recently and not archived; without any opened, the session
        of the latest turn, else the latest created; or None."""
        for query in (
            "SELECT session_id FROM sessions WHERE archived_at IS NULL AND opened_at IS NOT NULL "
            "ORDER BY opened_at DESC, rowid DESC LIMIT 1",
            "SELECT t.session_id FROM turns t JOIN sessions s USING (session_id) "
            "WHERE s.archived_at IS NULL ORDER BY t.rowid DESC LIMIT 1",
            "SELECT session_id FROM sessions WHERE archived_at IS NULL ORDER BY rowid DESC LIMIT 1",
        ):
            row = self.db.one(query, ())
            if row is not None:
                return str(row[0])
        return None
