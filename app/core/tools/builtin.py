"""The built-in tools: search memory, read a file in a watched folder, list recent feed items,
create and update a task.

Each tool is built over a small port passed in by the engine (a search function, a feed lister,
a ``TaskWriter``, the ``FolderFiles`` of the watched folders), so this module does no I/O of its
own; ``read_file`` reads through ``FolderFiles`` (the one confined opener of ``app.sensors``)
in a worker thread.

``create_task``/``update_task`` are not ``action`` tools: they change only the session's own task
list, which keeps every record (``action`` marks tools with effects outside the app: sending,
deleting, writing files). Their ``TaskWriter`` is the engine's task service, so a task a tool
creates is on the task stack like any other (node, ``spawned`` edge, revision, transition rules).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from app.core.plan.tools import ToolSpec
from app.core.text.names import safe_text
from app.core.text.quoting import quote_label
from app.core.tools.model import ToolNotFound, ToolRefused, ToolResultItem
from app.core.tools.registry import Tool, ToolContext
from app.core.tools.selection import best_task
from app.core.types import EnvEvent, Task, TaskStatus, utc_now

DEFAULT_MAX_BYTES = 64_000  # what read_file returns of a file at most (the rest is cut, and said so)
FIND_LIMIT = 20_000  # directory entries a by-name lookup walks at most


# --------------------------------------------------------------------------- ports


class TaskWriter(Protocol):
    """Where ``create_task``/``update_task`` write: the session's task stack (the engine's
    ``TaskService``), so a task a tool makes is a task like any other."""

    async def create_task(self, session_id: str, name: str, *, parent_task_id: str | None = None,
                          acceptance: str = "", turn_id: str | None = None) -> Task: ...

    async def update_task(self, session_id: str, task_id: str, *, status: TaskStatus | None = None,
                          result_summary: str | None = None) -> Task: ...

    async def list_tasks(self, session_id: str) -> list[Task]: ...


#: (session_id, query, k) → hits as (id, kind, at, text), best first.
MemorySearch = Callable[[str, str, int], Awaitable[list[tuple[str, str, str, str]]]]
#: (session_id, n) → the newest feed events, newest first.
FeedLister = Callable[[str, int], Awaitable[list[EnvEvent]]]


# --------------------------------------------------------------------------- reading files


@dataclass(frozen=True)
class FileText:
    """What a confined read returns: the path relative to its watched folder (display-safe), the
    text of its first bytes (an HTML file's visible text), its size, whether it was cut, its
    folder and full path, how many names it has (> 1: a hard link, another name may be outside
    the folder) and how many hidden HTML elements were left out."""

    label: str
    text: str
    size: int
    truncated: bool
    folder: str
    uri: str
    hard_links: int = 1
    hidden_removed: int = 0


class FolderFiles(Protocol):
    """Reading inside the watched folders (``app.sensors.confined.ConfinedFolders``): every read
    goes through the one confined opener, so nothing outside a watched folder is ever returned.
    Blocking; the tools call it in a worker thread."""

    def read_text(self, path: str, max_bytes: int) -> FileText:
        """The file's text; ``ToolRefused`` (outside, a link out, binary, ...) or ``ToolNotFound``."""
        ...

    def find(self, mentions: Sequence[str], limit: int) -> dict[str, str]:
        """Each mentioned path that names a readable file in a watched folder → a path
        ``read_text`` accepts."""
        ...


#: Makes the ``FolderFiles`` of a set of watched folders (the composition root passes
#: ``ConfinedFolders``); without one, ``read_file`` refuses every call.
FolderFilesFactory = Callable[[Sequence[Path]], FolderFiles]


def file_result(got: FileText, max_bytes: int) -> ToolResultItem:
    """``read_file``'s result item: the text, said to be cut when it was, a hard link reported."""
    text = got.text
    if got.truncated:
        text += f"\n[… only the first {max_bytes} of {got.size} bytes were read]"
    if got.hard_links > 1:
        text += f"\n[this file has {got.hard_links} names (hard links); another may be outside the watched folder]"
    if got.hidden_removed:
        text += f"\n[{got.hidden_removed} hidden HTML element(s) left out]"
    return ToolResultItem(label=safe_text(got.label), content=text, uri=safe_text(got.uri),
                          metadata={"bytes": got.size, "truncated": got.truncated, "folder": safe_text(got.folder),
                                    "hard_links": got.hard_links, "hidden_removed": got.hidden_removed})


# --------------------------------------------------------------------------- input models


class SearchMemoryArgs(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="what to look for")
    k: int = Field(5, ge=1, le=20, description="how many hits")


class ReadFileArgs(BaseModel):
    path: str = Field(min_length=1, max_length=1024, description="a path inside a watched folder")


class FeedItemsArgs(BaseModel):
    n: int = Field(5, ge=1, le=20, description="how many of the newest items")


class CreateTaskArgs(BaseModel):
    name: str = Field(min_length=1, max_length=300)
    acceptance: str = Field("", max_length=500)
    parent_task_id: str | None = None


class UpdateTaskArgs(BaseModel):
    task: str = Field(min_length=1, max_length=300, description="the task's id or name")
    status: TaskStatus | None = None
    result_summary: str | None = Field(None, max_length=2000)


# --------------------------------------------------------------------------- the tools


@dataclass(frozen=True)
class _Builtins:
    """The implementations of the built-in tools over the given ports."""

    files: Callable[[], FolderFiles | None]
    search: MemorySearch
    feed: FeedLister
    tasks: TaskWriter
    max_bytes: int

    async def search_memory(self, args: SearchMemoryArgs, ctx: ToolContext) -> list[ToolResultItem]:
        hits = await self.search(ctx.session_id, args.query, args.k)
        lines = [f"{n}. ({kind}, {at[:16]}) {text[:300]}" for n, (_, kind, at, text) in enumerate(hits, start=1)]
        return [ToolResultItem(label=args.query, content="\n".join(lines) or "(nothing found)",
                               metadata={"hit_ids": [h[0] for h in hits]})]

    async def read_file(self, args: ReadFileArgs, _ctx: ToolContext) -> list[ToolResultItem]:
        files = self.files()
        if files is None:
            raise ToolRefused("no folder is watched, so no file may be read")
        got = await asyncio.to_thread(files.read_text, args.path, self.max_bytes)
        return [file_result(got, self.max_bytes)]

    async def list_recent_feed_items(self, args: FeedItemsArgs, ctx: ToolContext) -> list[ToolResultItem]:
        items = await self.feed(ctx.session_id, args.n)
        lines = []
        for event in items:
            summary = " ".join(event.content.split())[:240]
            lines.append(f"- {quote_label(event.title) or '(untitled)'} ({quote_label(event.uri or event.source)}, "
                         f"{event.at[:16]})"
                         + (f"\n  {summary}" if summary else ""))
        return [ToolResultItem(label=f"{len(items)} newest feed items", content="\n".join(lines) or "(no feed items)",
                               metadata={"event_ids": [e.event_id for e in items]})]

    async def create_task(self, args: CreateTaskArgs, ctx: ToolContext) -> list[ToolResultItem]:
        task = await self.tasks.create_task(ctx.session_id, args.name, parent_task_id=args.parent_task_id,
                                            acceptance=args.acceptance, turn_id=ctx.turn_id)
        return [ToolResultItem(label=task.name, content=f"created task {task.name!r} (status {task.status.value})",
                               metadata={"task_id": task.task_id})]

    async def update_task(self, args: UpdateTaskArgs, ctx: ToolContext) -> list[ToolResultItem]:
        known = await self.tasks.list_tasks(ctx.session_id)
        task = next((t for t in known if t.task_id == args.task), None) or best_task(args.task, known)
        if task is None:
            raise ToolNotFound(f"no task {args.task!r} in this session")
        updated = await self.tasks.update_task(ctx.session_id, task.task_id, status=args.status,
                                               result_summary=args.result_summary)
        return [ToolResultItem(label=updated.name,
                               content=f"task {updated.name!r} is now {updated.status.value}"
                               + (f"; result: {updated.result_summary}" if updated.result_summary else ""),
                               metadata={"task_id": updated.task_id, "at": utc_now()})]


def _spec(name: str, description: str, tags: str) -> ToolSpec:
    return ToolSpec(name=name, description=description, tags=tags.split())


def builtin_tools(
    *,
    files: Callable[[], FolderFiles | None],
    search: MemorySearch,
    feed: FeedLister,
    tasks: TaskWriter,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Tool]:
    """The five built-in tools over the given ports (``files()`` is asked at each call)."""
    impl = _Builtins(files, search, feed, tasks, max_bytes)
    return [
        Tool(_spec("search_memory", "Search what was said or decided earlier in this session: messages, memory "
                   "notes and environment events", "search memory recall say said discuss decide"), SearchMemoryArgs, impl.search_memory,
             primary_arg="query"),
        Tool(_spec("read_file", "Read a text file inside a watched folder", "file read"), ReadFileArgs,
             impl.read_file, primary_arg="path"),
        Tool(_spec("list_recent_feed_items", "List the newest items of the watched news feeds", "feed news list"),
             FeedItemsArgs, impl.list_recent_feed_items),
        Tool(_spec("create_task", "Add a task or a reminder to the session's task list",
                   "task todo reminder remind"), CreateTaskArgs, impl.create_task, primary_arg="name"),
        Tool(_spec("update_task", "Mark a task done, failed or blocked, or record its result",
                   "task todo status mark done"), UpdateTaskArgs, impl.update_task, primary_arg="task"),
    ]


def newest_feed_items(events: Sequence[EnvEvent], n: int) -> list[EnvEvent]:
    """The ``n`` newest feed events (by time, later insertion first on ties)."""
    feed = [(e.at, i, e) for i, e in enumerate(events) if e.kind == "feed"]
    return [e for _, _, e in sorted(feed, key=lambda x: (x[0], x[1]), reverse=True)[:n]]

