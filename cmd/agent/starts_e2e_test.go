package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// --max-starts bounds the attempts starting at once apart from those
// running: with room to run three but one start, a task whose executor
// has not answered yet holds the start, the next waits in the start
// queue (its log says so, agent health counts it), and starts as soon as
// the first answers.
func TestMaxStartsQueuesStartsApartFromRunning(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-concurrent", "3", "--max-starts", "1")
	gate := filepath.Join(t.TempDir(), "gate")
	slow := submit(t, c, "Start slowly\n@wait-file "+gate+"\n@output answered")
	waitLocalPhase(t, dataDir, slow, state.PhaseTurnStarted)
	next := submit(t, c, "Start next\n@output hi")
	testkit.WaitFor(t, "agent health to count the queued start", func() bool {
		r := runAgent(t, "health", "--data-dir", dataDir)
		return strings.Contains(r.stdout, "starts:         1 starting, 1 queued (--max-starts 1)")
	})
	if r := runAgent(t, "tasks", "logs", next, "--data-dir", dataDir); !strings.Contains(r.stdout, "attempt 1/3 waits to start: 1 attempts are starting (--max-starts 1), 1 in the queue") {
		t.Errorf("the queued task's log does not say it waits:\n%s", r.stdout)
	}
	if local, err := datadir.LoadTask(dataDir, next); err != nil || local.Phase != state.PhaseExecutorStarting || len(local.Attempts) != 1 || !local.Attempts[0].Facts.FirstEventAt.IsZero() {
		t.Fatalf("the queued task: %v %+v, want its attempt waiting to start", err, local)
	}
	must(t, os.WriteFile(gate, nil, 0o600))
	for _, id := range []string{slow, next} {
		if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
			t.Errorf("task %s: %s, want completed", id, v.Phase)
		}
	}
	testkit.WaitFor(t, "agent health to count no start", func() bool {
		r := runAgent(t, "health", "--data-dir", dataDir)
		return strings.Contains(r.stdout, "starts:         0 starting, 0 queued (--max-starts 1)")
	})
}
