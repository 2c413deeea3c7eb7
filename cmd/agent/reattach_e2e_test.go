package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// tickerScript is an exec child that reports progress n times, every
// 100 ms (n=200: 20 s), each report naming its count and the child's pid,
// with a log line beside each, then its result.
func tickerScript(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ticker.sh")
	script := fmt.Sprintf(`#!/bin/sh
read -r task
echo '{"type":"phase","phase":"turn_started"}'
i=1
while [ $i -le %d ]; do
	echo "{\"type\":\"progress\",\"message\":\"tick $i pid $$\",\"percent\":$((i * 100 / %d))}"
	echo "log line $i"
	echo "err line $i" >&2
	i=$((i + 1))
	sleep 0.1
done
echo "{\"type\":\"result\",\"summary\":\"ticked %d times\"}"
`, n, n, n)
	must(t, os.WriteFile(path, []byte(script), 0o700))
	return path
}

// progressSeen is the progress events the control plane holds for task
// id, by message, counted.
func progressSeen(t *testing.T, c *cp, id string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, ev := range c.events(t, id) {
		if ev.Kind != state.EventProgress {
			continue
		}
		var p state.Progress
		must(t, json.Unmarshal(ev.Payload, &p))
		seen[p.Message]++
	}
	return seen
}

// logLinesSeen counts each log line the control plane holds for task id.
func logLinesSeen(t *testing.T, c *cp, id string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, ev := range c.events(t, id) {
		if ev.Kind != state.EventLog {
			continue
		}
		var l api.LogPayload
		must(t, json.Unmarshal(ev.Payload, &l))
		for _, line := range l.Lines {
			seen[line]++
		}
	}
	return seen
}

// untilTick waits until the control plane has progress past tick n.
func untilTick(t *testing.T, c *cp, id string, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("tick %d of task %s", n, id), func() bool {
		for msg := range progressSeen(t, c, id) {
			var k, pid int
			if _, err := fmt.Sscanf(msg, "tick %d pid %d", &k, &pid); err == nil && k >= n {
				return true
			}
		}
		return false
	})
}

// TestE2EATaskOutlivesThreeRestartsOfItsAgent runs a task that reports
// progress for 20 s and restarts its agent three times meanwhile: stopped
// (SIGTERM), killed (SIGKILL), stopped again. The task completes in one
// attempt, its one executor process running throughout (every report
// names the same pid), and the control plane holds every progress report
// and every line of its output exactly once.
func TestE2EATaskOutlivesThreeRestartsOfItsAgent(t *testing.T) {
	const n = 200
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	args := []string{"--executor", "exec", "--executor-command", tickerScript(t, n), "--reattach-grace", "2m"}
	ag := startAgentProc(t, c, dataDir, args...)
	id := submit(t, c, "tick")
	for i, restart := range []struct {
		at   int
		kill bool
	}{{40, false}, {90, true}, {140, false}} {
		untilTick(t, c, id, restart.at)
		if restart.kill {
			ag.kill()
		} else {
			if code := ag.stop(); code != 0 {
				t.Fatalf("stop %d: exit %d", i+1, code)
			}
			if out := ag.output(); !strings.Contains(out, "task will be re-attached when the agent starts again") {
				t.Errorf("stop %d did not say the task will be re-attached:\n%s", i+1, tail(out, 3000))
			}
		}
		ag = startAgentProc(t, c, dataDir, args...)
	}
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
		t.Fatalf("the task ended %s after %d attempts, want completed after 1", v.Phase, len(v.Attempts))
	}
	progress := progressSeen(t, c, id)
	pids := map[string]bool{}
	for msg := range progress {
		var k, pid int
		if _, err := fmt.Sscanf(msg, "tick %d pid %d", &k, &pid); err == nil {
			pids[fmt.Sprint(pid)] = true
		}
	}
	if len(pids) != 1 {
		t.Errorf("progress came from executor pids %v, want one", pids)
	}
	lines := logLinesSeen(t, c, id)
	for i := 1; i <= n; i++ {
		for pid := range pids {
			if got := progress[fmt.Sprintf("tick %d pid %s", i, pid)]; got != 1 {
				t.Errorf("progress tick %d is held %d times", i, got)
			}
		}
		for _, l := range []string{fmt.Sprintf("log line %d", i), fmt.Sprintf("err line %d", i)} {
			if lines[l] != 1 {
				t.Errorf("%q is held %d times", l, lines[l])
			}
		}
	}
	if len(progress) != n {
		t.Errorf("%d progress reports, want %d", len(progress), n)
	}
	if v.Result == nil || v.Result.Summary != fmt.Sprintf("ticked %d times", n) {
		t.Errorf("result %+v", v.Result)
	}
	// The keeper is released: nothing of the attempt is left.
	testkit.WaitFor(t, "the spool to be removed", func() bool {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "spool"))
		return len(entries) == 0
	})
}
