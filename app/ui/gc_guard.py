"""Keep Python's cyclic garbage collector on the UI thread.

CPython runs a cyclic collection in whichever thread happens to cross the allocation threshold.
The engine's executor threads (store, embed, index, llm) allocate a lot, so without this guard a
collection often runs on one of them — and any Qt object caught in a reference cycle (a widget
whose signal is connected to a lambda that captures it, a window a test dropped) is then
destroyed off the UI thread. Qt does not allow that; the process dies with a segfault some time
later, far from the cause. This is what crashed CI once in ``tests/ui`` (exit 139 in a worker
thread), and it is the failure calibre, pyqtgraph and napari document.

``MainThreadGC`` turns automatic collection off and runs the same generational collections from
a timer on the UI thread instead, using the thresholds that were in force. The oldest
generation is collected at most every ``full_every_s`` seconds, so a large heap (thousands of
canvas nodes) does not pay for a full collection on every tick.
"""

from __future__ import annotations

import gc
import time

from PySide6.QtCore import QObject, QTimer


class MainThreadGC(QObject):
    """While started, cyclic garbage is collected only on the thread that owns this object."""

    def __init__(self, parent: QObject | None = None, *, interval_ms: int = 200, full_every_s: float = 10.0) -> None:
        super().__init__(parent)
        self.full_every_s = full_every_s
        self._threshold = gc.get_threshold()
        self._was_enabled = False
        self._last_full = time.monotonic()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)

    @property
    def active(self) -> bool:
        return self._timer.isActive()

    def start(self) -> None:
        """Turn automatic collection off and start collecting from the timer."""
        if self.active:
            return
        self._threshold = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        """Collect once more here, then give collection back to the interpreter as it was."""
        if not self.active:
            return
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()

    def check(self) -> int:
        """Collect the generations whose counts passed their thresholds; returns the generation
        collected, or -1 when none was due."""
        if self._threshold[0] <= 0:  # collection was switched off before we started: keep it so
            return -1
        counts = gc.get_count()
        generation = -1
        for g in range(3):
            if counts[g] <= self._threshold[g]:
                break
            generation = g
        if generation == 2 and time.monotonic() - self._last_full < self.full_every_s:
            generation = 1
        if generation >= 0:
            gc.collect(generation)
            if generation == 2:
                self._last_full = time.monotonic()
        return generation
