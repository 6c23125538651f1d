"""The one confined opener: every read of outside content from a watched folder goes through it.

The folder sensor (:func:`app.sensors.files.read_text_preview`) and the ``read_file`` tool
(:class:`ConfinedFolders`, the engine's ``FolderFiles`` port) both read through
:func:`open_in_folder`. It never trusts a path: it opens the watched folder once, then walks the
path one name at a time with ``openat``-style opens relative to the directory it holds
(``dir_fd``), every one with ``O_NOFOLLOW``:

* a symbolic link met on the way (the file itself or any folder above it) is read with
  ``readlink`` and its target walked the same way from where the link stands; a target that
  leaves the watched folder (an absolute path elsewhere, or ``..`` above the folder) is refused
  with :class:`Refused` ``link_out``: "refused: link out of the watched folder";
* the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a fifo or a device never blocks the
  open), and only what ``os.fstat`` on the *opened* descriptor says is a regular file — the
  same inode ``fstatat`` saw a moment before — is read; on Linux the descriptor's real path
  (``/proc/self/fd``) must also lie inside the folder's real path.

So the check is made on the opened file itself, not on its path beforehand: a file swapped for a
symlink while it is being opened either is opened as the link (refused by ``O_NOFOLLOW``) or was
still the file. A file with more than one name (``st_nlink > 1``, a hard link — another name may
be outside the folder) is read, and reported: ``Opened.links``. Where the OS has no ``dir_fd``
opens (Windows), :func:`_open_by_path` resolves, opens and re-checks the opened file's identity.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.core.text.names import safe_text
from app.core.tools.builtin import FileText
from app.core.tools.model import ToolNotFound, ToolRefused
from app.sensors.text import html_text

MAX_LINKS = 40  # symbolic links followed in one walk (as the kernel's ELOOP limit)
#: Whether the OS opens relative to a directory descriptor (Linux, macOS): the walk needs it.
DIR_FD = {os.open, os.stat, os.readlink} <= os.supports_dir_fd
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_HTML_SUFFIXES = (".html", ".htm", ".xhtml")

REASONS = {
    "link_out": "refused: link out of the watched folder",
    "outside": "refused: outside the watched folders",
    "not_a_file": "not a regular file",
    "loop": "refused: too many symbolic links",
    "changed": "refused: the file changed while it was being opened",
}


class Refused(Exception):
    """The path may not be read; ``reason`` is a key of :data:`REASONS`."""

    def __init__(self, reason: str, path: str = "") -> None:
        self.reason, self.path = reason, path
        super().__init__(f"{safe_text(path)!r}: {REASONS[reason]}" if path else REASONS[reason])


class Missing(Exception):
    """Nothing by that name inside the watched folder."""


@dataclass(frozen=True)
class Opened:
    """An open regular file inside ``root``: its descriptor (the caller closes it), its path
    relative to ``root`` (``/``-separated, links resolved), and ``fstat`` of the descriptor."""

    fd: int
    root: str
    rel: str
    st: os.stat_result

    @property
    def links(self) -> int:
        """How many names the file has (> 1: a hard link; another name may be outside)."""
        return int(self.st.st_nlink)


def _split(path: str) -> list[str]:
    return [p for p in path.replace(os.sep, "/").split("/") if p not in ("", ".")]


class _Walk:
    """One walk below a root: the stack of directory descriptors it holds, the names taken."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.root_fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        self.stack: list[int] = []
        self.names: list[str] = []
        self.links = 0

    def close(self) -> None:
        for fd in self.stack:
            os.close(fd)
        self.stack.clear()
        os.close(self.root_fd)

    @property
    def here(self) -> int:
        return self.stack[-1] if self.stack else self.root_fd

    def up(self, via_link: bool, path: str) -> None:
        if not self.stack:  # ".." above the watched folder
            raise Refused("link_out" if via_link else "outside", path)
        os.close(self.stack.pop())
        self.names.pop()

    def restart(self) -> None:
        while self.stack:
            os.close(self.stack.pop())
        self.names.clear()

    def real_root(self) -> str:
        return _fd_path(self.root_fd) or os.path.realpath(self.root)


def _fd_path(fd: int) -> str | None:
    """The real path of an open descriptor (Linux ``/proc``), None where that is not known."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return target.removesuffix(" (deleted)")


def _link_parts(walk: _Walk, target: str, path: str) -> list[str]:
    """The names a link's target adds to the walk (an absolute target must lie in the root)."""
    if not os.path.isabs(target):
        return _split(target)
    for base in (walk.real_root(), os.path.abspath(walk.root)):
        if target == base or target.startswith(base.rstrip(os.sep) + os.sep):
            walk.restart()
            return _split(target[len(base):])
    raise Refused("link_out", path)


class _Swapped(Exception):
    """The name changed between ``fstatat`` and the open (a file swapped for a link, or back)."""


def _open_last(walk: _Walk, name: str, seen: os.stat_result, path: str) -> int:
    """Open the final name with O_NOFOLLOW|O_NONBLOCK and prove it is the regular file seen."""
    if not stat.S_ISREG(seen.st_mode):
        raise Refused("not_a_file", path)
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=walk.here)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_ino, st.st_dev) != (seen.st_ino, seen.st_dev):
        os.close(fd)
        raise _Swapped
    return fd


_SWAP_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EINVAL)


def _take(walk: _Walk, name: str, pending: list[str], path: str) -> tuple[int | None, bool]:
    """Step onto ``name``: (the opened file's fd when it is the last name, whether it was a
    link whose target was put in front of ``pending``). Raises ``_Swapped`` on a race."""
    try:
        seen = os.stat(name, dir_fd=walk.here, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        raise Missing(path) from None
    try:
        if stat.S_ISLNK(seen.st_mode):
            pending[:0] = _link_parts(walk, os.readlink(name, dir_fd=walk.here), path)
            return None, True
        if not pending:
            fd = _open_last(walk, name, seen, path)
            walk.names.append(name)
            return fd, False
        if not stat.S_ISDIR(seen.st_mode):
            raise Missing(path)
        walk.stack.append(os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=walk.here))
        walk.names.append(name)
        return None, False
    except OSError as exc:
        if exc.errno in _SWAP_ERRNOS:  # it changed since the stat: look again
            raise _Swapped from None
        raise


def _step(walk: _Walk, pending: list[str], via_link: bool, path: str) -> tuple[int | None, bool]:
    """Take one name off ``pending``; returns (the opened file's fd when it was the last name,
    whether the walk is now inside a link's target). Links and races count towards MAX_LINKS."""
    name = pending.pop(0)
    if name == "..":
        walk.up(via_link, path)
        return None, via_link
    try:
        fd, linked = _take(walk, name, pending, path)
    except _Swapped:
        pending.insert(0, name)
        linked, fd = False, None
        walk.links += 1
        if walk.links > MAX_LINKS:
            raise Refused("changed", path) from None
        return None, via_link
    if linked:
        walk.links += 1
        if walk.links > MAX_LINKS:
            raise Refused("loop", path)
    return fd, via_link or linked


def open_in_folder(root: str, rel: str) -> Opened:
    """Open ``rel`` (relative to the watched folder ``root``) for reading, confined to ``root``.

    Raises :class:`Refused` (link out of the folder, not a regular file, ...), :class:`Missing`,
    or ``OSError`` (e.g. permission denied). The caller closes ``Opened.fd``.
    """
    if not DIR_FD:
        return _open_by_path(root, rel)
    try:
        walk = _Walk(root)
    except (FileNotFoundError, NotADirectoryError):
        raise Missing(rel) from None
    try:
        pending = _split(rel)
        if not pending:
            raise Refused("not_a_file", rel)
        via_link = False
        fd: int | None = None
        while fd is None:
            if not pending:  # a link to a folder, or to the folder itself
                raise Refused("not_a_file", rel)
            fd, via_link = _step(walk, pending, via_link, rel)
        real, base = _fd_path(fd), walk.real_root()
        if real is not None and not real.startswith(base.rstrip(os.sep) + os.sep):
            os.close(fd)  # e.g. a bind mount inside the folder: the file really lives elsewhere
            raise Refused("link_out" if via_link else "outside", rel)
        return Opened(fd, root, "/".join(walk.names), os.fstat(fd))
    finally:
        walk.close()


def _inside(path: str, base: str) -> bool:
    path, base = os.path.normcase(path), os.path.normcase(base.rstrip(os.sep))
    return path.startswith(base + os.sep)


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_ino, st.st_dev


def _open_by_path(root: str, rel: str) -> Opened:
    """The opener where the OS has no ``dir_fd`` opens (Windows): resolve the path, open what it
    resolves to, then prove the opened file is still the file the path resolves to inside the
    folder (same identity). Links out are refused; a swap seen between the checks is refused.
    Weaker than the walk (two races won in a row between the checks are not ruled out), which
    is why the walk is used wherever ``dir_fd`` is supported."""
    base = os.path.realpath(root)
    path = os.path.join(root, *_split(rel))
    if not _inside(os.path.normpath(os.path.abspath(path)), os.path.abspath(root)):
        raise Refused("outside", rel)
    real = os.path.realpath(path)
    if not _inside(real, base):
        raise Refused("link_out", rel)
    try:
        seen = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        raise Missing(rel) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("loop", rel) from None
        raise
    if not stat.S_ISREG(seen.st_mode):
        raise Refused("not_a_file", rel)
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_BINARY", 0) | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    st = os.fstat(fd)
    again = os.path.realpath(path)
    if _identity(st) != _identity(seen) or again != real or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Refused("changed", rel)
    return Opened(fd, root, os.path.relpath(real, base).replace(os.sep, "/"), st)


def read_fd(fd: int, max_bytes: int) -> bytes:
    """Up to ``max_bytes`` from ``fd`` (fewer only at its end)."""
    chunks, got = [], 0
    while got < max_bytes:
        chunk = os.read(fd, min(1 << 16, max_bytes - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def decode(data: bytes, *, cut: bool = False) -> tuple[str | None, str, str | None]:
    """(text, encoding, why not read): UTF-8 (BOM allowed) or UTF-16 with a BOM; NUL bytes mean
    "binary"; with ``cut`` a character split by the cut at the end is dropped."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), "utf-16", None
        except UnicodeDecodeError:
            return None, "", "undecodable"
    if b"\x00" in data:  # text files have no NUL bytes; every common binary format does
        return None, "", "binary"
    try:
        return data.decode("utf-8-sig"), "utf-8", None
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 4:
            return data[: exc.start].decode("utf-8-sig"), "utf-8", None
        return None, "", "undecodable"


def as_text(name: str, text: str) -> tuple[str, int | None]:
    """An HTML file's visible text (hidden elements left out, their count second); other
    files as they are (None)."""
    if name.lower().endswith(_HTML_SUFFIXES):
        return html_text(text, max_chars=max(20_000, len(text)))
    return text, None


def _unescaped(path: str) -> str:
    r"""``path`` with ``\xNN`` escapes (as ``safe_text`` writes bytes of a name that is not
    UTF-8) turned back into those bytes."""
    if "\\x" not in path:
        return path
    return re.sub(r"\\x([89a-fA-F][0-9a-fA-F])", lambda m: chr(0xDC00 + int(m.group(1), 16)), path)


class ConfinedFolders:
    """The ``FolderFiles`` port of the ``read_file`` tool over the watched ``folders``: every
    read is :func:`open_in_folder`; paths are absolute or relative to a watched folder."""

    def __init__(self, folders: Sequence[str | os.PathLike[str]]) -> None:
        self.roots = [os.path.abspath(os.path.expanduser(os.fspath(f))) for f in folders]

    def _locate(self, path: str) -> Iterator[tuple[str, str]]:
        """(root, path relative to it) for each way ``path`` may be meant."""
        for candidate in dict.fromkeys((path, _unescaped(path))):
            expanded = os.path.expanduser(candidate)
            if not os.path.isabs(expanded):
                yield from ((root, expanded) for root in self.roots)
                continue
            for root in self.roots:
                for base in dict.fromkeys((root, os.path.realpath(root))):
                    if expanded.startswith(base.rstrip(os.sep) + os.sep):
                        yield root, expanded[len(base.rstrip(os.sep)) + 1:]

    def open(self, path: str) -> Opened:
        """The first watched folder that holds ``path``; ``ToolRefused`` / ``ToolNotFound``."""
        if not self.roots:
            raise ToolRefused("no folder is watched, so no file may be read")
        refused: Refused | None = None
        for root, rel in self._locate(path):
            try:
                return open_in_folder(root, rel)
            except Refused as exc:
                refused = refused or exc
            except Missing:
                continue
            except PermissionError:
                raise ToolRefused(f"{safe_text(path)!r} may not be read (permission denied)") from None
        if refused is not None:
            raise ToolRefused(str(refused))
        if not any(True for _ in self._locate(path)):
            raise ToolRefused(f"{safe_text(path)!r} is outside the watched folders")
        raise ToolNotFound(f"no file {safe_text(path)!r} in the watched folders")

    def read_text(self, path: str, max_bytes: int) -> FileText:
        """The first ``max_bytes`` of a text file inside a watched folder, decoded (an HTML file
        as its visible text); ``ToolRefused`` for binary or undecodable files."""
        opened = self.open(path)
        try:
            data = read_fd(opened.fd, max_bytes)
        finally:
            os.close(opened.fd)
        size = opened.st.st_size
        name = os.path.basename(opened.rel)
        text, _, why = decode(data, cut=size > max_bytes)
        if text is None:
            kind = "a binary file; only text files are read" if why == "binary" else "not UTF-8 text"
            raise ToolRefused(f"{safe_text(name)} is {kind}")
        text, hidden = as_text(name, text)
        return FileText(label=safe_text(opened.rel), text=text, size=size, truncated=size > max_bytes,
                        folder=safe_text(opened.root), uri=safe_text(os.path.join(opened.root, opened.rel)),
                        hard_links=opened.links, hidden_removed=hidden or 0)

    def find(self, mentions: Sequence[str], limit: int) -> dict[str, str]:
        """Map each mentioned path (``plan.md``, ``notes/plan.md``) to a path ``read_text``
        accepts (relative to its folder, display-safe), for files that exist inside a watched
        folder and may be read; at most ``limit`` directory entries are looked at by name."""
        found: dict[str, str] = {}
        pending = []
        for mention in mentions:
            try:
                opened = self.open(mention)
                os.close(opened.fd)
                found[mention] = safe_text(opened.rel)
            except (ToolRefused, ToolNotFound, OSError, ValueError):
                if not os.path.isabs(mention) and ".." not in Path(mention).parts:
                    pending.append(mention)  # look it up by name below (never for escaping paths)
        if pending:
            self._find_by_name(pending, found, limit)
        return found

    def _find_by_name(self, pending: list[str], found: dict[str, str], limit: int) -> None:
        seen = 0
        for root in self.roots:
            for here, dirs, files in os.walk(root):  # never into symlinked folders
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    seen += 1
                    rel = os.path.relpath(os.path.join(here, name), root).replace(os.sep, "/")
                    for mention in [m for m in pending if m not in found]:
                        want = mention.lstrip("./")
                        if safe_text(rel) == mention or rel == mention or safe_text(rel).endswith("/" + want):
                            try:
                                opened = open_in_folder(root, rel)
                            except (Refused, Missing, OSError):
                                continue  # a symlink out of the folder is not a candidate
                            os.close(opened.fd)
                            found[mention] = safe_text(opened.rel)
                if seen >= limit or all(m in found for m in pending):
                    return
