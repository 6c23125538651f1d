"""The frozen ``pcm-canvas`` executable (packaging/pcm_canvas.spec): the desktop app.

``pcm-canvas --pcm-python ARGS`` is the bundle's stand-in for ``python ARGS`` (the app's child
processes: ``app.frozen``); it is handled before the app and Qt are imported."""

import sys

from app.frozen import child_mode_or_none

status = child_mode_or_none()
if status is not None:
    sys.exit(status)

from app.desktop import main  # noqa: E402 - only when not a child

sys.exit(main())
