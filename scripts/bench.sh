#!/usr/bin/env bash
# Runs the benchmark module in scripts/bench/ (its own go.mod, so the peers
# it measures against stay out of the product's): durable appends beside a
# raw write+fdatasync loop, a hand-written group commit, tidwall/wal and
# go-diskqueue; open; drain; the compaction pause; the idle agent. Prints
# markdown tables on stdout, progress on stderr. BENCHMARKS.md says what
# each number means.
#
#   scripts/bench.sh                 # the full run (about 10 minutes)
#   scripts/bench.sh -quick          # small counts, one round
#   scripts/bench.sh -only appends   # some sections: appends,open,drain,compaction,idle
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/scripts/bench"
# -mod=mod: the module follows the product's requirements when they change.
go build -mod=mod -o "${TMPDIR:-/tmp}/agent-bench.$$" .
trap 'rm -f "${TMPDIR:-/tmp}/agent-bench.$$"' EXIT
"${TMPDIR:-/tmp}/agent-bench.$$" -repo "$root" "$@"
