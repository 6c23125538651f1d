"""``python -m app`` opens the desktop app (``pcm`` is the headless command line)."""

import sys

from app.desktop import main

sys.exit(main())
