"""The engine's errors: one base, ``CoreError``, whose ``str()`` is one line meant for the user.

Anything else that escapes the engine is a bug: the UI and the CLI show it as one line too, and
log it with its traceback.
"""

from __future__ import annotations


class CoreError(Exception):
    """A failure the user can understand and act on; ``str(err)`` is one line for them."""


class NoRecordError(CoreError, LookupError):
    """A record (session, turn, node, task, evidence) that does not exist."""
