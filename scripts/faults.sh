#!/usr/bin/env bash
# The fault suite: real processes against injected faults (a full disk on a
# small tmpfs, control plane crashes at each store point, a proxy that
# drops and breaks answers, an agent killed again and again). Each test
# asserts its own figures and logs one "FAULT | …" line; this prints them as
# a table. It mounts tmpfs file systems, so it needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -tags faults -count=1 -race -timeout 15m -run 'TestFault|TestE2EControlPlaneCrashAtEachStorePoint|TestE2EControlPlaneCrashAfterNotify' -v ./cmd/agent >"$out" 2>&1 || status=$?
grep -E '^\s*(--- (PASS|FAIL)|FAIL|ok )' "$out" >&2 || true
echo
echo "| scenario | figures | result |"
echo "|---|---|---|"
grep -h 'FAULT |' "$out" | sed -E 's/^.*FAULT \| ([^|]*)\| ([^|]*)\|.*$/| \1| \2| pass |/'
grep -E -- '--- (PASS|FAIL): TestE2EControlPlaneCrashAtEachStorePoint/' "$out" |
	sed -E 's/.*--- (PASS|FAIL): TestE2EControlPlaneCrashAtEachStorePoint\/([^ ]*) .*/| control plane SIGKILLed at store point \2, restarted | nothing accepted lost, no record dead, one event per record | \1 |/' | tr 'A-Z' 'a-z' | sed 's/| pass |$/| pass |/'
grep -E -- '--- (PASS|FAIL): TestE2EControlPlaneCrashAfterNotify ' "$out" |
	sed -E 's/.*--- (PASS|FAIL): .*/| control plane SIGKILLed at store point after-notify (a completion'"'"'s notification stored, the task file not), restarted with the webhook'"'"'s receiver up | the task completes; its notification arrives under one id | \1 |/' | sed 's/| PASS |$/| pass |/; s/| FAIL |$/| fail |/'
if [ "$status" -ne 0 ]; then
	echo
	echo "the fault suite failed:" >&2
	grep -E '^\s+[a-z_0-9]+_test\.go:[0-9]+: ' "$out" | grep -v 'output:$' >&2 || tail -100 "$out" >&2
fi
exit "$status"
