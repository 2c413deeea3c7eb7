#!/usr/bin/env bash
# Runs the outbox benchmarks and prints durable appends beside the machine's
# own baseline (one write plus fdatasync per record), measured in the same
# run. Ratios, not absolute numbers, are what compare across machines.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime=${BENCHTIME:-2s}
out=$(go test -run '^$' -bench 'Append|Baseline|CompactionPause|Open' -benchtime "$benchtime" ./outbox)
echo "$out" | grep -E '^Benchmark' >&2
echo "$out" | awk '
/^BenchmarkBaselineWriteFdatasync/ {
	split($1, a, "payload="); split(a[2], p, "-"); size = p[1]
	for (i = 1; i <= NF; i++) if ($i == "records/s") base[size] = $(i-1)
}
/^BenchmarkAppend\// {
	split($1, a, "payload="); split(a[2], p, "/"); size = p[1]
	split($1, wr, "writers="); split(wr[2], q, "-"); writers = q[1]
	for (i = 1; i <= NF; i++) {
		if ($i == "records/s") rps[size, writers] = $(i-1)
		if ($i == "fsyncs/record") fpr[size, writers] = $(i-1)
	}
	order[++n] = size SUBSEP writers
}
/^BenchmarkCompactionPause/ { for (i = 1; i <= NF; i++) { if ($i == "pause-µs") pause = $(i-1); if ($i == "compaction-µs") took = $(i-1) } }
/^BenchmarkOpen/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") openmb = $(i-1) }
END {
	printf "\n| payload | writers | records/s | fsyncs/record | baseline records/s | vs baseline |\n"
	printf "|---:|---:|---:|---:|---:|---:|\n"
	for (k = 1; k <= n; k++) {
		split(order[k], sw, SUBSEP); sz = sw[1]; wc = sw[2]
		printf "| %d B | %d | %.0f | %.3f | %.0f | %.2fx |\n", sz, wc, rps[sz, wc], fpr[sz, wc], base[sz], rps[sz, wc] / base[sz]
	}
	if (pause != "") printf "\ncompaction of 20 000 live records under 8 writers: appends paused %.0f µs of %.0f µs\n", pause, took
	if (openmb != "") printf "recovery (Open) reads %s MB/s\n", openmb
}'
