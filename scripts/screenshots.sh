#!/usr/bin/env bash
# Render the real desktop window under Xvfb with a small demo session into PNG files, so the
# look can be reviewed:  bash scripts/screenshots.sh [OUT_DIR]   (default: screenshots/)
# Needs Debian packages (apt-get install -y xvfb xauth libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0) and `bash scripts/setup.sh` done before.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-screenshots}"
if ! command -v xvfb-run >/dev/null; then
    echo "screenshots: xvfb-run not found; install: apt-get install -y xvfb xauth libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0" >&2
    exit 2
fi
PY="${PCM_VENV:-.venv}/bin/python"
QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" "$PY" scripts/screenshots.py --out "$OUT"
