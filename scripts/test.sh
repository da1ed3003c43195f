#!/usr/bin/env bash
# The test command (README, .ci/run): installs the real MCP peers once into a cache folder, then
# runs every test of the workspace, the peer interop and conformance tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/peers.sh)"
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --no-fail-fast
# The Parquet actions sit behind maljan-files' cargo feature `parquet` (off by default), so the
# workspace run above does not build them: lint them, and run only the tests the feature adds
# (its unit tests and tests/parquet.rs), which keeps the extra time to the arrow/parquet build.
cargo clippy -p maljan-files --all-targets --all-features --quiet -- -D warnings
cargo test -p maljan-files --features parquet --no-fail-fast --lib --test parquet
