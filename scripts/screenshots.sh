#!/usr/bin/env bash
# Render the real desktop window under Xvfb into PNG files, so the look can be reviewed:
#   bash scripts/screenshots.sh [OUT_DIR] [all|app|canvas]   (default: screenshots/, all)
# app: a small demo session typed into the window on the default models (scripts/screenshots.py);
# canvas: three-topic sessions of 17, 60 and 200 turns at Fit, low zoom, focused and everything,
# light and dark, each after a restart (scripts/canvas_shots.py; the scripted model, no download).
# Needs Debian packages (apt-get install -y xvfb xauth libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0) and `bash scripts/setup.sh` done before.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-screenshots}"
WHAT="${2:-all}"
if ! command -v xvfb-run >/dev/null; then
    echo "screenshots: xvfb-run not found; install: apt-get install -y xvfb xauth libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0" >&2
    exit 2
fi
PY="${PCM_VENV:-.venv}/bin/python"
run() { QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" "$PY" "$@" --out "$OUT"; }
case "$WHAT" in
    app) run scripts/screenshots.py ;;
    canvas) run scripts/canvas_shots.py ;;
    all) run scripts/screenshots.py && run scripts/canvas_shots.py ;;
    *) echo "screenshots: say all, app or canvas" >&2; exit 2 ;;
esac
