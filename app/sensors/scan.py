"""Folder snapshots and their differences, for the rescan after lost file events.

A snapshot maps each file's absolute path to ``(inode, size, mtime_ns)``: three ints per file
instead of a full ``stat_result`` (watchdog's DirectorySnapshot), and ignored folders are pruned
while walking instead of filtered afterwards (a ``.git`` folder is never entered).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FileState = tuple[int, int, int]  # inode, size, mtime_ns
Snapshot = dict[str, FileState]
IsIgnored = Callable[[str], bool]


def ignore_matcher(patterns: Sequence[str]) -> IsIgnored:
    """A predicate on a path relative to its watched folder (``/``-separated).

    A pattern matches the relative path or the file's own name, so ``*.tmp`` and ``.#*`` apply in
    every subfolder; ``fnmatch`` lets ``*`` cross ``/``, so ``*/.git/*`` matches at any depth. A
    folder is pruned when ``<folder>/`` matches (``.git/*`` matches ``.git/``).
    """
    pats = tuple(p.replace("\\", "/") for p in patterns if p)

    def is_ignored(rel: str) -> bool:
        if not pats:
            return False
        name = rel.rstrip("/").rsplit("/", 1)[-1]
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in pats)

    return is_ignored


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators (pure string work, no I/O)."""
    prefix = root if root.endswith(os.sep) else root + os.sep
    # Watchdog's paths start with the watched folder: slicing is ~20x cheaper than relpath, and
    # this runs on the observer thread for every event of a burst.
    rel = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def scan_folder(root: str, is_ignored: IsIgnored, *, should_stop: Callable[[], bool] | None = None) -> Snapshot:
    """A snapshot of every non-ignored file below ``root`` (symlinks are not followed)."""
    snap: Snapshot = {}
    stack = [root]
    while stack:
        if should_stop is not None and should_stop():
            break
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                entries = list(it)
        except OSError:  # vanished or unreadable while walking: what is left is still a snapshot
            continue
        for entry in entries:
            rel = relative(entry.path, root)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not is_ignored(rel + "/"):
                        stack.append(entry.path)
                    continue
                if is_ignored(rel):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            snap[entry.path] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return snap


@dataclass(frozen=True)
class Difference:
    """One file that differs between two snapshots: ``change`` is created/modified/deleted/moved;
    ``src`` is the old path of a move."""

    change: str
    path: str
    src: str = ""


def diff_snapshots(old: Snapshot, new: Snapshot) -> list[Difference]:
    """What changed from ``old`` to ``new``: a deleted and a created path with the same inode is
    a move (and a modification too, when size or mtime changed, is still reported as the move)."""
    created = [p for p in new if p not in old]
    deleted = [p for p in old if p not in new]
    by_inode = {old[p][0]: p for p in deleted}
    out: list[Difference] = []
    moved_from: set[str] = set()
    for path in created:
        src = by_inode.get(new[path][0])
        if src is not None and src not in moved_from:
            moved_from.add(src)
            out.append(Difference("moved", path, src))
        else:
            out.append(Difference("created", path))
    out.extend(Difference("deleted", p) for p in deleted if p not in moved_from)
    for path, state in new.items():
        before = old.get(path)
        if before is not None and before != state:
            out.append(Difference("modified", path))
    return out
