"""The list of sessions as a person uses it: titles, the last one used, search, archive.

Archiving hides a session from the list and never deletes anything; clearing ``archived_at``
undoes it. ``opened_at`` is set each time a session is opened, so "the last used session" is the
one opened most recently (older data folders, without it, fall back to the latest turn).
"""

from __future__ import annotations

import json
from typing import Any

from app.core.types import utc_now
from app.store.connection import NotFoundError, StoreBase

_LIST = (
    "SELECT s.session_id, s.title, s.created_at, s.updated_at, s.opened_at, s.archived_at, "
    "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count, "
    "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.session_id) AS turn_count "
    "FROM sessions s"
)


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere, its wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class SessionCatalog(StoreBase):
    """Listing, searching, archiving and the last used session (a part of ``SqliteStore``)."""

    def list_sessions(self, *, archived: bool = False) -> list[dict[str, Any]]:
        """Every session (id, title, times, message and turn counts) in creation order; archived
        ones only when ``archived`` (then all of them, each with its ``archived_at``)."""
        where = "" if archived else " WHERE s.archived_at IS NULL"
        return [dict(row) for row in self._db().execute(_LIST + where + " ORDER BY s.rowid")]

    def search_sessions(self, text: str, *, archived: bool = False) -> list[str]:
        """Ids of the sessions whose title or any message contains ``text`` (any case), in creation
        order; archived ones only when ``archived``."""
        pattern = _like(text.strip())
        hidden = "" if archived else " AND s.archived_at IS NULL"
        rows = self._db().execute(
            "SELECT s.session_id FROM sessions s WHERE (s.title LIKE ? ESCAPE '\\' OR EXISTS ("
            "SELECT 1 FROM messages m WHERE m.session_id = s.session_id AND m.content LIKE ? ESCAPE '\\'))"
            + hidden + " ORDER BY s.rowid", (pattern, pattern))
        return [row[0] for row in rows]

    def set_session_archived(self, session_id: str, archived: bool) -> None:
        """Archive the session (hide it from the list) or bring it back; logged either way."""
        with self.transaction():
            self._require_session(session_id)
            self._db().execute("UPDATE sessions SET archived_at = ? WHERE session_id = ?",
                               (utc_now() if archived else None, session_id))
            self._log(session_id, "session.archived" if archived else "session.unarchived", {})

    def title_untitled_session(self, session_id: str, title: str) -> bool:
        """Give the session ``title`` if it has none yet (its first input names it); True if set."""
        if not title:
            return False
        with self.transaction():
            cursor = self._db().execute("UPDATE sessions SET title = ? WHERE session_id = ? AND title = ''",
                                        (title, session_id))
            if cursor.rowcount:
                self._log(session_id, "session.updated", {"fields": ["title"], "automatic": True})
        return bool(cursor.rowcount)

    def set_session_generation(self, session_id: str, settings: dict[str, Any]) -> None:
        """Keep the session's own generation settings (a JSON object; {} for the defaults)."""
        with self.transaction():
            self._require_session(session_id)
            self._db().execute("UPDATE sessions SET generation = ? WHERE session_id = ?",
                               (json.dumps(settings, sort_keys=True), session_id))
            self._log(session_id, "session.generation_set", settings)

    def session_generation(self, session_id: str) -> dict[str, Any]:
        """The session's own generation settings ({} when it has none or does not exist)."""
        row = self._one("SELECT generation FROM sessions WHERE session_id = ?", (session_id,))
        return json.loads(row[0]) if row is not None and row[0] else {}

    def mark_session_opened(self, session_id: str) -> None:
        """Note that the session was opened now (what "the last used session" follows)."""
        with self.transaction():
            cursor = self._db().execute("UPDATE sessions SET opened_at = ? WHERE session_id = ?",
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
            row = self._one(query, ())
            if row is not None:
                return str(row[0])
        return None
