"""A minimal, Qt-free signal: the engine announces changes; views and stores subscribe.

The UI bridges these to Qt signals on the main thread; the core never imports Qt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec

P = ParamSpec("P")


class Signal(Generic[P]):
    """Synchronous observer list. ``emit`` calls every slot in connection order."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._slots: list[Callable[P, None]] = []

    def connect(self, slot: Callable[P, None]) -> None:
        if slot not in self._slots:
            self._slots.append(slot)

    def disconnect(self, slot: Callable[P, None]) -> None:
        """Remove ``slot``; disconnecting a slot that is not connected is a no-op."""
        try:
            self._slots.remove(slot)
        except ValueError:
            pass

    def emit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for slot in list(self._slots):
            slot(*args, **kwargs)

    def __len__(self) -> int:
        return len(self._slots)
