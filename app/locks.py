"""Advisory file locks between the processes that share a data folder.

Several processes may open one data folder at once (the desktop, ``pcm ask``, ``pcm import``, the
MCP server). SQLite orders their writes itself; these locks order what SQLite cannot see:

- ``FileLock``: an exclusive lock held for a ``with`` block, e.g. around the first creation of the
  LanceDB table or a whole index rebuild. Waiting is bounded (``timeout``) and ends in a one-line
  ``LockTimeout``.
- ``held_elsewhere(path)``: whether another live process holds the lock on ``path`` now. The
  operating system drops a process's locks when it dies (even by SIGKILL), so a lock file that
  nobody holds belongs to a process that is gone. ``app.store.connection`` uses this to tell the
  turns of a crashed run from those of a run still going.

The locks are ``flock`` locks on POSIX and ``msvcrt`` byte locks on Windows; both belong to the open
file, so two ``FileLock`` objects on one path exclude each other in one process too.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType

from app.core.errors import CoreError

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class LockTimeout(CoreError):
    """Another process held a lock of the data folder for longer than we may wait."""


class FileLock:
    """An exclusive lock on ``path`` (created if missing) between processes, for a ``with`` block.

    ``timeout`` (seconds) bounds the wait; ``None`` waits as long as it takes. ``what`` names the
    work the lock guards, for the timeout's message.
    """

    POLL_S = 0.02

    def __init__(self, path: Path, *, timeout: float | None = 60.0, what: str = "") -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.what = what or self.path.name
        self._fd: int | None = None

    def try_acquire(self, *, create: bool = True) -> bool:
        """Take the lock if it is free now; return whether this object holds it. Without
        ``create`` a missing file raises ``FileNotFoundError``."""
        if self._fd is not None:
            return True
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        if _try_lock(fd):
            self._fd = fd
            return True
        os.close(fd)
        return False

    def acquire(self) -> None:
        """Wait for the lock (polling; bounded by ``timeout``)."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while not self.try_acquire():
            if deadline is not None and time.monotonic() > deadline:
                raise LockTimeout(f"waited {self.timeout:.0f} s for another process to finish {self.what} "
                                  f"({self.path}); try again when it is done")
            time.sleep(self.POLL_S)

    def release(self) -> None:
        """Let the lock go (a no-op when not held)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                _unlock(fd)
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, _type: type[BaseException] | None, _exc: BaseException | None,
                 _tb: TracebackType | None) -> None:
        self.release()


def held_elsewhere(path: Path) -> bool:
    """True when another open file (another process, or another ``FileLock``) holds ``path``'s
    lock now; False when nobody does or the file does not exist."""
    probe = FileLock(path)
    try:
        return not probe.try_acquire(create=False)
    except FileNotFoundError:  # no file: nobody holds it
        return False
    finally:
        probe.release()
