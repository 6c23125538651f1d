"""What a typed id means: ``last``, a whole id, or the first characters of one.

The window shows ids cut to 8 characters; ``pcm`` (and ``pcm-canvas --session``) accepts them (and
``last``) wherever it asks for a turn or a session, and a memory's first characters where it asks
for a memory. ``resolve_id``
reads the store through the three lookups it needs, so the engine (``Engine.resolve_id``) and the
CLI's store-only commands share it.
"""

from __future__ import annotations

from typing import Protocol

from app.core.errors import CoreError, NoRecordError

MIN_PREFIX = 4  # characters of an id the window shows (it shows 8) that pick one record


class IdLookup(Protocol):
    """The store's lookups ``resolve_id`` reads (``SessionStore`` has them). Blocking."""

    def latest_turn_id(self, session_id: str | None = None) -> str | None: ...
    def last_used_session_id(self) -> str | None: ...
    def match_ids(self, kind: str, prefix: str, *, limit: int = 2) -> list[str]: ...


def resolve_id(lookup: IdLookup, kind: str, text: str) -> str:
    """The full id a typed one means: ``last`` (the latest turn, or the last used session), a
    whole id, or a prefix of at least ``MIN_PREFIX`` characters that matches exactly one record.
    Raises ``NoRecordError`` for nothing found and ``CoreError`` for an ambiguous prefix."""
    text = text.strip()
    if text == "last" and kind == "memory":
        raise NoRecordError("'last' names a turn or a session: give a memory's id (pcm memory list shows them)")
    if text == "last":
        found = lookup.latest_turn_id() if kind == "turn" else lookup.last_used_session_id()
        if found is None:
            raise NoRecordError(f"there is no {kind} yet")
        return str(found)
    matches = lookup.match_ids(kind, text, limit=2) if len(text) >= MIN_PREFIX else []
    if len(matches) == 1:
        return str(matches[0])
    if not matches:
        raise NoRecordError(f"no {kind} {text!r}" + ("" if len(text) >= MIN_PREFIX
                                                    else f" (give at least {MIN_PREFIX} characters of its id)"))
    raise CoreError(f"{text!r} is the start of several {kind} ids: give more characters")
