#!/usr/bin/env bash
# The packaging check: build (or reuse) the bundle and the .deb, then run them as a user would.
#
#   bash packaging/check.sh             # reuses dist/<folder> when it is newer than the sources
#   bash packaging/check.sh --rebuild   # always builds
#
# 1. packaging/build.sh (models fetched and verified, PyInstaller) unless the bundle is current;
# 2. packaging/build_deb.sh;
# 3. tests/packaging/ (pytest -m packaging): the bundle copied to an empty folder and run with a
#    clean environment (PATH=/usr/bin:/bin, a fresh HOME, no venv, offscreen Qt): `pcm-canvas
#    --self-test`, `pcm models verify --probe`, `pcm ask`, `pcm mcp` listed by the official MCP
#    client; startup to window and to ready, frozen vs venv, in the same run; the .deb installed
#    with dpkg -i (as root; unpacked otherwise), started, and removed again;
# 4. prints the figures (also in dist/packaging-report.json).
# Environment: PCM_VENV (default ./.venv), PCM_STARTUP_RUNS (default 5).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source packaging/names.sh
VENV=${PCM_VENV:-$(pwd)/.venv}
REBUILD=0
for arg in "$@"; do
  case "$arg" in
    --rebuild) REBUILD=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "check.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
log() { printf '\033[1m[check]\033[0m %s\n' "$*"; }
"$VENV/bin/python" -c 'import pytest, mcp' 2>/dev/null || {
  echo "check.sh: the test tools are missing from $VENV: run bash scripts/setup.sh --dev first" >&2; exit 1; }

BUNDLE="dist/$BUNDLE_FOLDER"
# The bundle is current when it is newer than every file it is built from.
stale() {
  [ -x "$BUNDLE/$BUNDLE_GUI" ] || return 0
  [ -n "$(find app resources packaging models/manifest.json pyproject.toml -newer "$BUNDLE/$BUNDLE_GUI" \
           -type f ! -name '*.pyc' ! -name check.sh ! -name build_deb.sh -print -quit)" ]
}
if [ "$REBUILD" = 1 ] || stale; then
  bash packaging/build.sh
else
  log "reusing $BUNDLE (newer than its sources; --rebuild to build anyway)"
fi

if command -v dpkg-deb >/dev/null; then
  log "building the .deb"
  bash packaging/build_deb.sh
else
  log "no dpkg-deb here: the .deb part is skipped"
fi

log "running the bundle from an empty folder with a clean environment (tests/packaging, a few minutes)"
REPORT="dist/packaging-report.json"
LOG="dist/packaging-check.log"
rm -f "$REPORT"
if ! PCM_PACKAGING_CHECK=1 PCM_PACKAGING_REPORT="$REPORT" QT_QPA_PLATFORM=offscreen \
     nice -n 10 "$VENV/bin/python" -m pytest -m packaging tests/packaging -v -rA -p no:cacheprovider -s \
     > "$LOG" 2>&1; then
  tail -60 "$LOG"
  echo "[check] FAILED (the whole log: $LOG)" >&2
  exit 1
fi
grep -E "^(PASSED|FAILED|SKIPPED|ERROR) " "$LOG" | sed 's/^/  /' || true
tail -1 "$LOG"

"$VENV/bin/python" - "$REPORT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
size = r["size"]
print(f"\nbundle: {size['total_mb']} MB (du -sh: {size['du']}); largest parts: "
      + ", ".join(f"{p['part']} {p['mb']} MB" for p in size["largest"]))
for label, s in r["startup"].items():
    print(f"startup, {label}: to window median {s['window_s']['median']:.2f} s, to ready median "
          f"{s['ready_s']['median']:.2f} s over {s['runs']} runs (first start on a fresh folder: "
          f"{s['first']['window_s']:.2f} s / {s['first']['ready_s']:.2f} s)")
if "deb" in r:
    print(f"deb: {r['deb']['file']} ({r['deb']['mb']} MB), {r['deb'].get('installed', 'not installed')}"
          + (f", {r['deb']['xcb']}" if r["deb"].get("xcb") else ""))
print(r.get("self_test", ""))
PY
log "passed"
