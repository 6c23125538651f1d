"""How late the UI event loop serves a precise timer: the measure of a responsive window."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer


class LagProbe:
    """A precise repeating timer on the UI loop; ``lags`` are how late each tick came (ms)."""

    def __init__(self, interval_ms: int = 5) -> None:
        self.interval = interval_ms
        self.lags: list[float] = []
        self._last = 0.0
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last:
            self.lags.append(max(0.0, (now - self._last) * 1000 - self.interval))
        self._last = now

    def start(self) -> None:
        self.lags.clear()
        self._last = 0.0
        self._timer.start()

    def stop(self) -> list[float]:
        self._timer.stop()
        return list(self.lags)
