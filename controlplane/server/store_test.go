package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A crash in the middle of an append leaves a torn last line; the next
// start cuts it, so the next event stored is a line of its own, not glued
// to the torn one and lost.
func TestTornEventsLineIsCutAtStart(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	dir := t.TempDir()
	e := newEnv(t, dir, &clock{now: t0})
	task := e.submit("x", "any")
	c := e.claim("a", "available", 1)[0]
	e.send("a", ev("k1", state.EventProgress, c, state.ProgressEvent{Message: "one"}))
	path := filepath.Join(dir, "events", task.ID+".jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"key":"k-torn","kind":"progress","task_id":"` + task.ID + `","payl`)
	f.Close()

	e = e.restart(&clock{now: t0})
	if r := e.send("a", ev("k2", state.EventProgress, c, state.ProgressEvent{Message: "two"})); r[0].Status != api.StatusAccepted {
		t.Fatalf("after the repair: %+v", r)
	}
	evs, err := e.client.TaskEvents(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Key != "k1" || evs[1].Key != "k2" {
		t.Fatalf("events after a torn line: %+v", evs)
	}
	if r := e.send("a", ev("k2", state.EventProgress, c, state.ProgressEvent{Message: "two"})); r[0].Status != api.StatusDuplicate {
		t.Fatalf("k2 again after a restart: %+v", r)
	}
}

// A crash after a batch's events are stored and before the task file is
// saved: the next start applies the stored events the file misses, so a
// batch sent again is duplicate, never rejected for what the store
// half-applied (a completion after the phase it ends in, say).
func TestTaskFileBehindItsEventsIsBroughtUpToDate(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	dir := t.TempDir()
	e := newEnv(t, dir, &clock{now: t0})
	task := e.submit("x", "any")
	c := e.claim("a", "available", 1)[0]
	taskFile := filepath.Join(dir, "tasks", task.ID+".json")
	stale, err := os.ReadFile(taskFile)
	if err != nil {
		t.Fatal(err)
	}
	batch := []api.Event{
		ev("p1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("p2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
		ev("p3", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseCompleting}),
		ev("p4", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseCompleted}),
		ev("c1", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done"}),
	}
	for _, r := range e.send("a", batch...) {
		if r.Status != api.StatusAccepted {
			t.Fatalf("%+v", r)
		}
	}
	// The crash: the task file as it was before the batch.
	if err := os.WriteFile(taskFile, stale, 0o600); err != nil {
		t.Fatal(err)
	}

	e = e.restart(&clock{now: t0})
	v, err := e.client.Task(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Phase != state.PhaseCompleted || v.Result == nil || v.Result.Summary != "done" {
		t.Fatalf("after the restart the task is %s with result %+v, want completed with its result", v.Phase, v.Result)
	}
	for _, r := range e.send("a", batch...) {
		if r.Status != api.StatusDuplicate {
			t.Fatalf("the batch sent again: %+v, want duplicate", r)
		}
	}
}
