#!/usr/bin/env bash
# Build the PyInstaller one-folder bundle: dist/<folder>/ with the desktop app and `pcm`.
#
#   bash packaging/build.sh            # after `bash scripts/setup.sh` (README)
#
# Uses .venv (PCM_VENV), installs the [packaging] extra (PyInstaller) when missing, fetches and
# verifies the default models (`pcm models fetch`, `pcm models verify`: sha256 against
# models/manifest.json), runs PyInstaller on packaging/pcm_canvas.spec, then prints the bundle's
# size and its three largest parts. Names: packaging/bundle.ini. Output: dist/ (git-ignored),
# PyInstaller's work files in build/pyinstaller/.
# Environment: PCM_VENV (default ./.venv), PCM_BUILD_NICE (default 10: a shared machine).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
source packaging/names.sh
VENV=${PCM_VENV:-$ROOT/.venv}
NICE=${PCM_BUILD_NICE:-10}
export HF_HUB_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '\033[1m[build]\033[0m %s\n' "$*"; }
fail() { printf '[build] error: %s\n' "$*" >&2; exit 1; }

case "$(uname -s)" in
  MINGW*|MSYS*|CYGWIN*) BIN="$VENV/Scripts"; EXE=.exe ;;
  *) BIN="$VENV/bin"; EXE= ;;
esac
[ -x "$BIN/python$EXE" ] || fail "no virtual environment at $VENV: run \`bash scripts/setup.sh\` first (README)"
VPY="$BIN/python$EXE"

# 1. PyInstaller, from the [packaging] extra of pyproject.toml.
if ! "$VPY" -c 'import PyInstaller' 2>/dev/null; then
  log "installing the [packaging] extra (PyInstaller)"
  "$VPY" -m pip install --quiet -e ".[packaging]"
fi

# 2. The default models, fetched and hash-verified (the bundle carries them; never committed).
log "fetching and verifying the default models"
"$BIN/pcm$EXE" models fetch
"$BIN/pcm$EXE" models verify

# 3. The bundle.
log "running PyInstaller (several minutes)"
rm -rf "dist/$BUNDLE_FOLDER"
NICE_CMD=(); command -v nice >/dev/null && NICE_CMD=(nice -n "$NICE")
"${NICE_CMD[@]}" "$VPY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/pcm_canvas.spec
OUT="dist/$BUNDLE_FOLDER"
[ -x "$OUT/$BUNDLE_GUI$EXE" ] && [ -x "$OUT/$BUNDLE_CLI$EXE" ] || fail "PyInstaller did not produce $OUT/$BUNDLE_GUI and $OUT/$BUNDLE_CLI"

# 4. What it weighs, and what dominates.
log "bundle: $OUT"
"$VPY" packaging/sizes.py "$OUT"
