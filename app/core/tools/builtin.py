"""The built-in tools: search memory, read a file in a watched folder, list recent feed items,
create and update a task.

Each tool is built over a small port passed in by the engine (a search function, a feed lister,
a ``TaskWriter``, the watched folders), so this module does no store or index I/O of its own;
``read_file`` reads files, confined to the watched folders, in a worker thread.

``create_task``/``update_task`` are not ``action`` tools: they change only the session's own task
list, which keeps every record (``action`` marks tools with effects outside the app: sending,
deleting, writing files). Their ``TaskWriter`` is the engine's task service, so a task a tool
creates is on the task stack like any other (node, ``spawned`` edge, revision, transition rules).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, Field

from app.core.plan.tools import ToolSpec
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


# --------------------------------------------------------------------------- file confinement


def confine(path: str, folders: Sequence[Path]) -> tuple[Path, Path]:
    """Resolve ``path`` (absolute, or relative to a watched folder) to (file, its folder).

    Symlinks and ``..`` are resolved first, then the result must lie inside a watched folder:
    anything that escapes raises ``ToolRefused``; a path inside that is no file raises
    ``ToolNotFound``.
    """
    roots = [Path(f).resolve() for f in folders]
    if not roots:
        raise ToolRefused("no folder is watched, so no file may be read")
    raw = Path(path).expanduser()
    candidates = [raw] if raw.is_absolute() else [root / raw for root in roots]
    escaped = False
    for candidate in candidates:
        resolved = candidate.resolve()
        root = next((r for r in roots if resolved.is_relative_to(r)), None)
        if root is None:
            escaped = True
        elif resolved.is_file():
            return resolved, root
    if escaped:
        raise ToolRefused(f"{path!r} is outside the watched folders")
    raise ToolNotFound(f"no file {path!r} in the watched folders")


def find_in_folders(mentions: Sequence[str], folders: Sequence[Path], *, limit: int = FIND_LIMIT) -> dict[str, str]:
    """Map each mentioned path (``plan.md``, ``notes/plan.md``) to a path ``read_file`` accepts
    (relative to its watched folder), when such a file exists inside one; blocking."""
    found: dict[str, str] = {}
    pending = []
    for mention in mentions:
        try:
            file, root = confine(mention, folders)
            found[mention] = file.relative_to(root).as_posix()
        except (ToolRefused, ToolNotFound, OSError, ValueError):
            if not Path(mention).is_absolute() and ".." not in Path(mention).parts:
                pending.append(mention)  # look it up by name below (never for escaping paths)
    if not pending:
        return found
    seen = 0
    for folder in folders:
        root = Path(folder).resolve()
        for here, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                seen += 1
                rel = (Path(here) / name).relative_to(root).as_posix()
                for mention in [m for m in pending if m not in found]:
                    if rel == mention or rel.endswith("/" + mention.lstrip("./")):
                        try:
                            file, base = confine(rel, [root])
                        except (ToolRefused, ToolNotFound):
                            continue  # a symlink out of the folder is not a candidate
                        found[mention] = file.relative_to(base).as_posix()
            if seen >= limit or all(m in found for m in pending):
                break
    return found


def read_text(file: Path, max_bytes: int) -> tuple[str, int]:
    """(text, size in bytes) of the first ``max_bytes`` of a UTF-8 file; ``ToolRefused`` for binary."""
    size = file.stat().st_size
    with file.open("rb") as fh:
        data = fh.read(max_bytes)
    if b"\x00" in data[:8192]:
        raise ToolRefused(f"{file.name} is a binary file; only text files are read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if size > max_bytes and exc.start >= len(data) - 4:  # the cut split a character
            text = data[: exc.start].decode("utf-8", errors="strict")
        else:
            raise ToolRefused(f"{file.name} is not UTF-8 text") from None
    return text, size


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

    folders: Callable[[], Sequence[Path]]
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
        roots = list(self.folders())
        max_bytes = self.max_bytes

        def work() -> ToolResultItem:
            file, root = confine(args.path, roots)
            text, size = read_text(file, max_bytes)
            cut = size > max_bytes
            if cut:
                text += f"\n[… only the first {max_bytes} of {size} bytes were read]"
            return ToolResultItem(label=file.relative_to(root).as_posix(), content=text, uri=str(file),
                                  metadata={"bytes": size, "truncated": cut, "folder": str(root)})

        return [await asyncio.to_thread(work)]

    async def list_recent_feed_items(self, args: FeedItemsArgs, ctx: ToolContext) -> list[ToolResultItem]:
        items = await self.feed(ctx.session_id, args.n)
        lines = []
        for event in items:
            summary = " ".join(event.content.split())[:240]
            lines.append(f"- {event.title or '(untitled)'} ({event.uri or event.source}, {event.at[:16]})"
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
    folders: Callable[[], Sequence[Path]],
    search: MemorySearch,
    feed: FeedLister,
    tasks: TaskWriter,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Tool]:
    """The five built-in tools over the given ports (``folders()`` is read at each call)."""
    impl = _Builtins(folders, search, feed, tasks, max_bytes)
    return [
        Tool(_spec("search_memory", "Search what was said in this session: messages, memory notes and "
                   "environment events", "search memory recall"), SearchMemoryArgs, impl.search_memory,
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

