"""How long this process has been running: start-up figures (time to window, time to ready)
measured from the moment the operating system started the process, imports included."""

from __future__ import annotations

import os
import time

_IMPORTED = time.monotonic()  # fallback origin where /proc is missing: when this module loaded


def process_age_s() -> float:
    """Seconds since this process started (Linux: from /proc, so the interpreter's own start and
    every import count); elsewhere, since this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            up = float(uptime.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks
        return max(0.0, up - started)
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED
