package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/state"
)

// keysHeld is how many tasks have their keys in memory, and whether id is
// one.
func (e *env) keysHeld(id string) (int, bool) {
	fs, ok := e.srv.store.(*filestore.Store)
	if !ok {
		e.t.Skip("the keys in memory are the file store's")
	}
	return fs.KeysHeld(id)
}

// The keys of a task that ended leave memory; what its agent sends again
// is still a duplicate (read back from the task's events file), across a
// restart too, and nothing is applied twice. Another agent's late event is
// rejected without the keys being read. A person's retry brings them back.
func TestKeysOfEndedTasksLeaveMemoryWithoutLosingExactlyOnce(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	dir := t.TempDir()
	e := newEnv(t, dir, clk)
	ctx := context.Background()
	e.submit("fix it", "")
	clk.advance(time.Millisecond)
	running := e.submit("still running", "")
	c := e.claim("ag-1", "available", 1)[0]
	evs := runToCompletion(c)
	e.send("ag-1", evs...)
	e.claim("ag-2", "available", 1)
	if n, ok := e.keysHeld(c.Task.ID); !ok || n != 2 {
		t.Fatalf("keys held for %d tasks (the ended one: %v), want both tasks' while it just ended", n, ok)
	}

	clk.advance(filestore.KeysKeptAfterEnd)
	e.agent("ag-2").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag-2"}) // a watchdog pass
	if n, ok := e.keysHeld(c.Task.ID); ok || n != 1 {
		t.Fatalf("keys held for %d tasks (the ended one: %v), want only the running task's", n, ok)
	}
	if _, ok := e.keysHeld(running.ID); !ok {
		t.Fatal("the running task's keys were dropped")
	}

	want := strings.TrimSpace(strings.Repeat("duplicate ", len(evs)))
	if got := statuses(e.send("ag-1", evs...)); got != want {
		t.Fatalf("the ended task's events sent again: %s, want all duplicate", got)
	}
	// Another agent: rejected as late, its keys not read for it.
	clk.advance(time.Second)
	e.agent("ag-2").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag-2"})
	if r := e.send("ag-2", evs[len(evs)-1])[0]; r.Status != api.StatusRejected || r.Reason != api.ReasonTerminal {
		t.Errorf("another agent's late event: %+v, want rejected terminal", r)
	}
	if _, ok := e.keysHeld(c.Task.ID); ok {
		t.Error("another agent's late event read the ended task's keys back")
	}

	e = e.restart(clk)
	if _, ok := e.keysHeld(c.Task.ID); ok {
		t.Error("a start read the keys of an ended task")
	}
	if _, ok := e.keysHeld(running.ID); !ok {
		t.Error("a start did not read the keys of a task that has not ended")
	}
	if got := statuses(e.send("ag-1", evs...)); got != want {
		t.Fatalf("the ended task's events sent again after a restart: %s, want all duplicate", got)
	}
	stored, err := e.client.TaskEvents(ctx, c.Task.ID)
	if err != nil || len(stored) != len(evs) {
		t.Fatalf("%d events stored (%v), want %d: nothing twice", len(stored), err, len(evs))
	}
}

// A person's retry brings a task back into play, and its keys into
// memory: what its first agent sends again of attempt 1 is a duplicate,
// though its lease is gone.
func TestRetryReadsTheKeysBack(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	task := e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}
	failed := a
	failed.Status, failed.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	failed.Error = &state.Error{Code: state.CodeNetwork}
	failed.Retry = &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	run := []api.Event{
		ev("x:phase:executor_starting", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("x:attempt:1", state.EventAttempt, c, a),
		ev("x:attempt:2", state.EventAttempt, c, failed),
		ev("x:phase:recoverable_failed", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseRecoverableFailed}),
	}
	e.send("ag-1", run...)
	clk.advance(2 * filestore.KeysKeptAfterEnd)
	e.client.Tasks(ctx) // a watchdog pass
	if _, ok := e.keysHeld(task.ID); ok {
		t.Fatal("the ended task's keys are still held")
	}
	if _, err := e.client.RetryTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if got := statuses(e.send("ag-1", run...)); got != "duplicate duplicate duplicate duplicate" {
		t.Errorf("attempt 1's events sent again after the retry: %s", got)
	}
	if _, ok := e.keysHeld(task.ID); !ok {
		t.Fatal("the retried task's keys were not read back")
	}
}

// Keys are read back from the events file as JSON strings: one with
// quotes, backslashes, HTML characters, control characters or other
// scripts is still known after a restart.
func TestOddKeysAreReadBackExactly(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	var evs []api.Event
	for i, k := range []string{`a"b`, `back\slash`, `<tag>&amp;`, "tab\tnew\nline", "ключ-鍵-🔑", `\"`, `x\`, "\u2028"} {
		evs = append(evs, ev(k, state.EventProgress, c, state.ProgressEvent{Message: strings.Repeat("m", i)}))
	}
	if got := statuses(e.send("ag-1", evs...)); strings.Contains(got, "rejected") || strings.Contains(got, "duplicate") {
		t.Fatalf("first delivery: %s", got)
	}
	e = e.restart(clk)
	if got := statuses(e.send("ag-1", evs...)); got != strings.TrimSpace(strings.Repeat("duplicate ", len(evs))) {
		t.Errorf("after a restart: %s, want all duplicate", got)
	}
}
