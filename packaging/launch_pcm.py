"""The frozen ``pcm`` executable (packaging/pcm_canvas.spec): the command line.

``pcm --pcm-python ARGS`` is the bundle's stand-in for ``python ARGS`` (the app's child
processes: ``app.frozen``); it is handled before the command line is imported."""

import sys

from app.frozen import child_mode_or_none

status = child_mode_or_none()
if status is not None:
    sys.exit(status)

from app.cli import main  # noqa: E402 - only when not a child

sys.exit(main())
