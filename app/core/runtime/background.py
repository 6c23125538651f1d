"""Coroutines started in the background and not awaited by their starter, kept alive to the end.

The event loop holds only a weak reference to a task (see the warning on
``asyncio.create_task``): a task that nothing else references can be garbage-collected while it
waits and then silently never finishes — a stream that never answers, an event never written.
Everything started fire-and-forget goes through ``spawn``, which holds the task until it is done
and logs an exception that nobody retrieved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

_live: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """Schedule ``coro`` on the current loop and keep a strong reference until it finishes.

    The current loop, not only a running one: a Qt slot (a button click) runs between the
    loop's callbacks under qasync, where ``get_running_loop`` has nothing to return."""
    task = asyncio.ensure_future(coro)
    if name is not None:
        task.set_name(name)
    _live.add(task)
    task.add_done_callback(_finished)
    return task


def running() -> int:
    """How many spawned tasks have not finished yet."""
    return len(_live)


def _finished(task: asyncio.Task[Any]) -> None:
    _live.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s failed", task.get_name(), exc_info=task.exception())
