"""The frozen entry point (packaging/pcm_canvas.spec): the desktop app as ``pcm-canvas``, the
command line as ``pcm`` (the name it was started by: on Linux and macOS ``pcm`` is a symbolic link
to ``pcm-canvas``, on Windows a second executable built from this script).

``--pcm-python ARGS`` first is the bundle's stand-in for ``python ARGS`` (the app's child
processes: ``app.frozen``); it is handled before the app, Qt or torch are imported."""

import sys
from pathlib import Path

from app.frozen import CLI_NAME, child_mode_or_none

status = child_mode_or_none()
if status is None:
    if Path(sys.argv[0]).stem == CLI_NAME:
        from app.cli import main
    else:
        from app.desktop import main
    status = main()
sys.exit(status)
