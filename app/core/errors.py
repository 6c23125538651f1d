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


class MemoryChanged(CoreError):
    """A memory action that no longer applies: another window or process revoked, edited or
    accepted the memory meanwhile (the action is decided on the memory as stored now)."""


class ModelError(CoreError):
    """A model could not be loaded or used. ``str(err)`` is one line meant for the user."""


class AttachError(CoreError):
    """A file could not be attached: it is missing, a folder, not text, too large or unreadable.
    ``str(err)`` says which, in one line meant for the user (a size limit names the limit)."""


class AttachCancelled(AttachError):
    """The user stopped attaching a file (its reading or indexing) before anything was recorded."""


class ProviderError(ModelError):
    """A chat provider could not answer: raised by ``ChatProvider.chat`` before any token was
    streamed (a failure after that is returned as ``finish_reason == "error"``).

    ``transient`` says that trying the same provider again soon may work (a refused or timed-out
    connection, HTTP 408/429/5xx); a wrong key, an unknown model or a refused spending limit are
    not transient. A provider registry retries a transient error with backoff, then falls back to
    the next provider.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class SettingsError(CoreError):
    """A settings file cannot be used: not JSON, or a value of the wrong kind. ``str(err)`` is one
    line naming the file and the fault (the field, or the line and column of bad JSON)."""


class ToolServerError(CoreError):
    """A tool server could not be reached, started, configured or called: it crashed, hung past
    its time limit, refused the call, or its settings are wrong. ``str(err)`` is one line naming
    the server; the turn goes on without that tool."""


def user_line(exc: BaseException) -> str:
    """The one line a front end shows for ``exc``: a ``CoreError``'s own message, anything else
    as "something went wrong: …" (a bug: the caller logs its traceback)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if isinstance(exc, CoreError) else f"something went wrong: {first}"
