#!/bin/sh
# Regenerate BENCHMARKS.md: build `olm`, the harness and §4's image benchmark in release mode,
# then run the harness. (Not `cargo run`: it would hold cargo's build lock for the whole run.)
# Arguments go to olm-bench: --quick, --no-e2e, --e2e-only, --out FILE, --fbc DIR,
# --images-rounds N, --unpack-rounds N (root), ...; `olm-bench --help` lists them.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p olm -p olm-bench
cargo build --release -p olm-e2e --example image_bench
exec "${CARGO_TARGET_DIR:-target}/release/olm-bench" "$@"
