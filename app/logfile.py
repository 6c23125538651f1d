"""The desktop app's log file: a rotating file in the user log folder (``app.config.log_dir``,
``~/.local/state/pcm-canvas/log`` on Linux), so what went wrong in a window started from a menu
can be read afterwards (Help → Open log folder).

Standard library only; the desktop composition root (``app/desktop.py``) starts it once.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from app.config import log_dir

LOG_NAME = "pcm-canvas.log"
MAX_BYTES = 1_000_000  # one file, then up to BACKUPS older ones: a few MB at most
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def start_log_file(folder: Path | None = None, *, level: int = logging.INFO) -> Path | None:
    """Log the process's INFO and above to ``folder/pcm-canvas.log`` (rotated at 1 MB, three
    kept) and to stderr; returns the file's path, or None when the folder cannot be written (then
    stderr alone). Calling it again adds no second handler."""
    root = logging.getLogger()
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    if not any(isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is sys.stderr
               for h in root.handlers):
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter(FORMAT))
        console.addFilter(lambda record: getattr(record, "console", True))  # extra={"console": False}: the file only
        root.addHandler(console)
    folder = folder or log_dir()
    path = folder / LOG_NAME
    if any(isinstance(h, logging.handlers.RotatingFileHandler) and Path(h.baseFilename) == path
           for h in root.handlers):
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS,
                                                       encoding="utf-8", delay=True)
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    return path
