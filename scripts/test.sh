#!/usr/bin/env bash
# The test command (README, .ci/run): installs the real MCP peers once into a cache folder, then
# runs fmt, clippy and every test of the workspace, the peer interop and conformance tests included.
# Every cargo feature that is on by default (yara, parquet) is built and tested here.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/peers.sh)"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --no-fail-fast
