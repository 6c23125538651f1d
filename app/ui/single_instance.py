"""One window per data folder: a second start on the same folder hands its FILE argument to the
window already open, raises it, and ends.

The first start holds ``desktop.lock`` in the data folder (a ``QLockFile``: the operating system's
lock, which a crashed process gives up) and listens on a ``QLocalServer`` named after the folder
(and the user); a later start that cannot take the lock connects to that server, sends one JSON
line (``{"file": path or null}``), waits for ``ok`` and exits. Two windows on different data
folders do not meet.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

LOCK_NAME = "desktop.lock"


def server_name(data_dir: Path) -> str:
    """The local server's name for ``data_dir``: the same for every start on that folder by this
    user, short enough for a Unix socket path."""
    key = f"{getpass.getuser()}\n{Path(data_dir).expanduser().resolve()}"
    return "pcm-canvas-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


class InstanceGuard(QObject):
    """The first window's claim on a data folder, and the door later starts knock on."""

    #: A later start asked to be shown: the file it was given (an exported session), or None.
    raise_requested = Signal(object)

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data_dir = Path(data_dir)
        self.name = server_name(self.data_dir)
        self._lock = QLockFile(str(self.data_dir / LOCK_NAME))
        self._lock.setStaleLockTime(0)  # stale only when its process is gone, never by age
        self._server: QLocalServer | None = None

    def claim(self) -> bool:
        """Become the folder's window (True), or find that another one holds it (False). A
        folder that cannot be locked at all (read-only) is not guarded: True."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._lock.tryLock(0):
            if self._lock.error() == QLockFile.LockError.LockFailedError:
                return False
            log.warning("no single-instance guard for %s (%s)", self.data_dir, self._lock.error())
            return True
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        QLocalServer.removeServer(self.name)  # a socket file a crashed start left behind
        if not server.listen(self.name):
            log.warning("cannot listen as %s: %s", self.name, server.errorString())
            return True
        server.newConnection.connect(self._on_connection)
        self._server = server
        return True

    def hand_over(self, file: Path | None, timeout_s: float = 5.0) -> bool:
        """Ask the folder's window to show itself (and open ``file``); True once it said ok. The
        first window may still be starting its server: connecting is tried until ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            socket = QLocalSocket()
            socket.connectToServer(self.name)
            if socket.waitForConnected(250):
                message = json.dumps({"file": str(file) if file is not None else None}) + "\n"
                socket.write(message.encode("utf-8"))
                socket.waitForBytesWritten(1000)
                answered = socket.waitForReadyRead(int(max(0.1, deadline - time.monotonic()) * 1000))
                ok = answered and bytes(socket.readAll().data()).strip() == b"ok"
                socket.disconnectFromServer()
                return ok
            time.sleep(0.1)
        return False

    def release(self) -> None:
        """Stop listening and give up the lock (the window closed)."""
        if self._server is not None:
            # A later start's socket Qt has not deleted yet: no slot may run on it once this guard
            # is gone (its pending deleteLater then crashed the process in the next event loop).
            for socket in self._server.findChildren(QLocalSocket):
                for signal in (socket.readyRead, socket.disconnected):
                    signal.disconnect()
                socket.abort()
            self._server.close()
            self._server = None
        if self._lock.isLocked():
            self._lock.unlock()

    def _on_connection(self) -> None:
        assert self._server is not None
        while (socket := self._server.nextPendingConnection()) is not None:
            socket.readyRead.connect(lambda s=socket: self._on_message(s))
            socket.disconnected.connect(socket.deleteLater)

    def _on_message(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():
            return
        line = bytes(socket.readLine().data()).decode("utf-8", "replace")
        try:
            given = json.loads(line).get("file")
        except (ValueError, AttributeError):
            given = None
        socket.write(b"ok\n")
        socket.flush()
        self.raise_requested.emit(Path(given) if isinstance(given, str) and given else None)
