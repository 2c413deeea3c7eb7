package agentview

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// seedTasks writes four tasks' files into a new data directory: t-retry
// waits to run attempt 1 again from the start, t-cont to continue attempt
// 1's session in attempt 2, t-lost's attempt runs with no keeper, and
// t-done has completed.
func seedTasks(t *testing.T) string {
	t.Helper()
	dataDir := t.TempDir()
	store, err := state.OpenStore(datadir.Layout{Dir: dataDir}.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []*state.Task{
		{ID: "t-retry", Prompt: "p", Phase: state.PhaseClaimed, CurrentAttemptID: "a1",
			Attempts: []state.Attempt{{AttemptID: "a1", Number: 1, Status: state.AttemptPending}}},
		{ID: "t-cont", Prompt: "p", Phase: state.PhaseClaimed, CurrentAttemptID: "a2",
			Attempts: []state.Attempt{{AttemptID: "a1", Number: 1, Status: state.AttemptFailed}, {AttemptID: "a2", Number: 2, Status: state.AttemptPending, Continues: 1}}},
		{ID: "t-lost", Prompt: "p", Phase: state.PhaseTurnStarted, CurrentAttemptID: "a1",
			Attempts: []state.Attempt{{AttemptID: "a1", Number: 1, Status: state.AttemptRunning}}},
		{ID: "t-done", Prompt: "p", Phase: state.PhaseCompleted},
	} {
		if err := store.Save(task); err != nil {
			t.Fatal(err)
		}
	}
	return dataDir
}

// What a stop leaves: a line per task the next start takes up, none for
// an attempt no keeper runs on or a task that ended; the running tasks,
// as a list and a line.
func TestTasksAndNextRun(t *testing.T) {
	t.Parallel()
	dataDir := seedTasks(t)
	want := []string{
		"task t-cont will continue attempt 1's session (attempt 2) when the agent starts again",
		"task t-retry will run attempt 1 from the start when the agent starts again",
	}
	if got := NextRun(dataDir); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("next run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := strings.Join(RunningTasks(dataDir), ","); got != "t-cont,t-lost,t-retry" {
		t.Errorf("running tasks %s", got)
	}
	if got := TasksLine(dataDir); got != "3 running: t-cont, t-lost, t-retry" {
		t.Errorf("tasks line %q", got)
	}
	if got := TasksLine(t.TempDir()); got != "none yet (the agent has not run here)" {
		t.Errorf("tasks line of an empty data directory %q", got)
	}
}

// The health record as shown: every field the agent recorded, text a
// task could have put in it made visible.
func TestWriteHealth(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := datadir.HealthFile{AgentID: "ag-1", UpdatedAt: now.Add(-time.Minute)}
	h.Executor, h.Grade, h.Since, h.Reason = "codex", health.Unavailable, now.Add(-time.Hour), "auth\x1b[31m failed"
	h.ControlPlane = "https://cp.example.com"
	h.Storage = datadir.StorageStatus{Failing: "disk_full", Since: now, HeldReports: 3, HeldTasks: 1}
	h.Starts = datadir.StartQueue{Starting: 1, Queued: 2, Max: 2}
	var b bytes.Buffer
	WriteHealth(&b, h, t.TempDir(), now)
	for _, want := range []string{"executor:       codex\n", "grade:          unavailable (since 1h ago)", "control plane:  https://cp.example.com\n",
		"storage:        disk_full (since", "3 reports and 1 task states held in memory", "disk free:      ", "starts:         1 starting, 2 queued (--max-starts 2)\n",
		"recorded:       1m ago by agent ag-1\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("health lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("an escape sequence reached the terminal:\n%q", b.String())
	}
}

// WaitStopped says what the agent still does while it holds the data
// directory's lock, and what its next start takes up once it lets go;
// past its timeout it gives up with ErrStillRuns.
func TestWaitStopped(t *testing.T) {
	t.Parallel()
	dataDir := seedTasks(t)
	o, err := outbox.Open(datadir.Layout{Dir: dataDir}.Outbox(), outbox.Options{}) // holds the lock, as a running agent
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitStopped(context.Background(), &bytes.Buffer{}, dataDir, 42, 0, time.Millisecond); !errors.Is(err, ErrStillRuns) ||
		err.Error() != "agent pid 42 still runs after 0s" {
		t.Errorf("timeout: %v", err)
	}
	var out testkit.Buffer
	done := make(chan error)
	go func() { done <- WaitStopped(context.Background(), &out, dataDir, 42, time.Hour, time.Millisecond) }()
	testkit.WaitFor(t, "a waiting line", func() bool {
		return strings.Contains(out.String(), "waiting: 3 task(s) still running: [t-cont t-lost t-retry]\n")
	})
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "agent pid 42 stopped\ntask t-cont will continue") {
		t.Errorf("after the stop:\n%s", out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err = outbox.Open(datadir.Layout{Dir: dataDir}.Outbox(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := WaitStopped(ctx, &out, dataDir, 42, time.Hour, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v", err)
	}
}

// Stop with no agent on the data directory signals nothing and says so.
func TestStopWithNoAgent(t *testing.T) {
	t.Parallel()
	dataDir := seedTasks(t)
	var out, errOut bytes.Buffer
	err := Stop(context.Background(), &out, &errOut, StopOptions{DataDir: dataDir, Timeout: time.Hour, Tick: time.Millisecond, Bin: "agent"})
	if !errors.Is(err, datadir.ErrNotRunning) || out.Len() != 0 || errOut.Len() != 0 {
		t.Errorf("Stop: %v; out %q, errOut %q", err, out.String(), errOut.String())
	}
}
