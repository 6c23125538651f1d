"""The error base of the engine and its adapters (DESIGN.md §5).

A ``CoreError`` is something a person can act on: its ``str()`` is one line written for them,
and a front end shows exactly that line. Any other exception reaching a front end is a bug: it
is shown as a short notice and logged with its traceback.
"""

from __future__ import annotations


class CoreError(Exception):
    """An error meant for the user; ``str(err)`` is one line that says what went wrong."""


class NoRecordError(CoreError, LookupError):
    """A record (session, turn, task, node, ...) that was asked for does not exist.

    A ``LookupError``, not a ``KeyError``: ``KeyError`` would ``repr()`` the message.
    """


class ModelError(CoreError):
    """A model could not be loaded or used. ``str(err)`` is one line meant for the user."""


def user_line(exc: BaseException) -> str:
    """The one line a front end shows for ``exc``: a ``CoreError``'s own message, anything else
    as "something went wrong: …" (a bug: the caller logs its traceback)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if isinstance(exc, CoreError) else f"something went wrong: {first}"
