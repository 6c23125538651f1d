"""The Qt binding is one that keeps Python's reference counts right.

PySide6-Essentials 6.12.0 on CPython 3.11 drops a reference to ``None`` on every call of a Qt
method returning void, and the interpreter aborts after a few thousand calls ("none_dealloc").
pyproject.toml pins a release without that bug; this test fails if an upgrade brings it back.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QPointF


def test_void_qt_calls_keep_none_referenced() -> None:
    point = QPointF()
    before = sys.getrefcount(None)
    for _ in range(2000):
        point.setX(1.0)
    assert sys.getrefcount(None) >= before - 50  # other threads may hold a few in flight
