#!/bin/sh
# The whole-community-catalog conformance run (docs/conformance.md, issue #59): the 297 packages of
# packages.txt, read untouched from community-operators-prod at the commit below, taken by
# tests/tests/conformance.rs as a cluster admin takes them (render, serve, subscribe, wait).
# A benchmark, not CI: all heads take about an hour on 2 cores; walks take longer.
#
#   bench/community/run.sh [--upstream] [heads|walks|full] [K/N] [OUT_DIR]
#
#   heads       each package's default-channel head installed without startingCSV (the default)
#   walks       a walk to the head from at most 2 upgrades below it (as CI runs the subset)
#   full        a walk from the oldest installable bundle of the default channel
#   K/N         only the K-th of N equal slices of the packages, in name order (default 1/1)
#   --upstream  upstream OLM v0.46's operators are the OLM under test instead of olm-rs
#               (from ~/.cache/olm-dev/bin/olm-v0.46.0, which olm-bench builds)
#
# COMMUNITY_PACKAGES=bench/community/held-out.txt runs another list of the same commit: the 36
# packages of the catalog the project never took (the held-out set); its tree, render and table
# are kept apart (<name>-tree-…, <name>-rendered-…, <olm>-<name>-<mode>-….md).
#
# The source: $COMMUNITY_OPERATORS_GIT (a clone of
# https://github.com/redhat-openshift-ecosystem/community-operators-prod, bare or not), else a
# blobless clone into OUT_DIR. The table goes to OUT_DIR/<olm>-<mode>-<K>of<N>.md
# (OUT_DIR defaults to target/community).
set -eu
cd "$(dirname "$0")/../.."
olm=olm-rs
if [ "${1:-}" = --upstream ]; then
    olm=upstream
    export OLM_CONFORMANCE_UPSTREAM="$HOME/.cache/olm-dev/bin/olm-v0.46.0"
    shift
fi
mode=${1:-heads}
slice=${2:-1/1}
out=${3:-${CARGO_TARGET_DIR:-target}/community}
commit=699495f2ff526f9679a0d9d54688f09c683eff2c
case $mode in
heads) export OLM_CONFORMANCE_HEADS=1 ;;
walks) ;;
full) export OLM_CONFORMANCE_FULL=1 ;;
*) echo "run.sh: mode '$mode': expected heads, walks or full" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
git_dir=${COMMUNITY_OPERATORS_GIT:-$out/community-operators-prod.git}
if [ ! -e "$git_dir" ]; then
    git clone --bare --filter=blob:none https://github.com/redhat-openshift-ecosystem/community-operators-prod "$git_dir"
fi
list=${COMMUNITY_PACKAGES:-bench/community/packages.txt}
# The default list keeps its old names; another list gets a prefix of its own.
prefix=$(basename "$list" .txt)-
[ "$prefix" = packages- ] && prefix=
tree="$out/${prefix}tree-$commit"
if [ ! -d "$tree/operators" ]; then
    rm -rf "$tree.partial" && mkdir -p "$tree.partial"
    # shellcheck disable=SC2046 # one path argument per package name
    git --git-dir="$git_dir" archive "$commit" $(sed 's|^|operators/|' "$list") | tar -x -C "$tree.partial"
    mv "$tree.partial" "$tree"
fi
# Built first, then run directly: `cargo test` would hold cargo's build lock for the whole run.
cargo build -q -p olm
suite=$(cargo test -p olm-e2e --test conformance --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
[ -x "$suite" ] || { echo "run.sh: could not build the conformance suite" >&2; exit 1; }
table="$out/$olm-$prefix$mode-${slice%/*}of${slice#*/}.md"
# Rendered once per commit, shared by every slice and mode.
OLM_CONFORMANCE_RENDERED="$out/${prefix}rendered-$commit" \
OLM_CONFORMANCE_PACKAGES="$tree/operators" OLM_CONFORMANCE_SLICE="$slice" OLM_CONFORMANCE_TABLE="$table" \
    "$suite" real_packages_install_and_walk_their_default_channel --exact --nocapture \
    || echo "run.sh: some packages failed; the table says which" >&2
echo "table: $table"
