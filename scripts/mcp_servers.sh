#!/usr/bin/env bash
# Install the reference MCP servers the tool-server tests and `pcm eval tools` listings use, into
# ./.mcp-servers (gitignored) or $PCM_MCP_SERVERS: npm's filesystem, memory and everything servers
# (Node 20+) and PyPI's mcp-server-time in a venv of its own (it pins another mcp than the app's).
# Safe to run again: each step is skipped when its result is in place.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEST=${PCM_MCP_SERVERS:-$(pwd)/.mcp-servers}
NPM_PACKAGES="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31"
if ! command -v npm >/dev/null 2>&1; then
  echo "mcp_servers.sh: npm not found; the tool-server tests will be skipped" >&2; exit 0
fi
# A failed install never fails the caller (CI): the tests that need a server skip, saying which.
if [ ! -x "$DEST/npm/node_modules/.bin/mcp-server-everything" ]; then
  npm install --prefix "$DEST/npm" --no-audit --no-fund --loglevel=error $NPM_PACKAGES ||
    echo "mcp_servers.sh: npm install failed; the tool-server tests will be skipped" >&2
fi
if [ ! -x "$DEST/py/bin/mcp-server-time" ]; then
  PY=${PYTHON:-python3}
  { "$PY" -m venv "$DEST/py" &&
    "$DEST/py/bin/python" -m pip install --quiet --disable-pip-version-check mcp-server-time==2026.10.19; } ||
    echo "mcp_servers.sh: mcp-server-time did not install; its tests will be skipped" >&2
fi
echo "reference MCP servers in $DEST"
