package taskfollow

import (
	"context"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// readsSource answers each read of a task with the next of its views,
// then the last one again.
type readsSource struct {
	views []*state.Task
	reads int
	local bool // an agent's data directory, not the control plane
}

func (s *readsSource) Tasks(context.Context, api.TaskFilter, int) ([]*state.Task, error) {
	return nil, nil
}

func (s *readsSource) Task(context.Context, string) (*state.Task, error) {
	v := s.views[min(s.reads, len(s.views)-1)]
	s.reads++
	return v, nil
}

func (s *readsSource) Transient(error) bool { return false }
func (s *readsSource) String() string       { return "the test's reads" }
func (s *readsSource) KnowsQueue() bool     { return !s.local }

// A follow does not end between an agent's terminal phase and its
// completion, which carries the result: submit --wait and subtask wait
// print the result, not a completed task without one.
func TestFollowWaitsForTheResultAfterTheTerminalPhase(t *testing.T) {
	lease := &state.Lease{ID: "l1", AgentID: "a1"}
	running := &state.Task{ID: "t1", Phase: state.PhaseTurnStarted, Lease: lease}
	phaseOnly := &state.Task{ID: "t1", Phase: state.PhaseCompleted, Lease: lease}
	done := &state.Task{ID: "t1", Phase: state.PhaseCompleted, Lease: lease, Result: &state.Result{Summary: "done: it"}}
	src := &readsSource{views: []*state.Task{running, phaseOnly, phaseOnly, done}}
	wake := make(chan struct{}, 8)
	for range 8 {
		wake <- struct{}{}
	}
	got, err := Task(context.Background(), src, "t1", wake, func(*state.Task) error { return nil })
	if err != nil || got.Result == nil || got.Result.Summary != "done: it" {
		t.Fatalf("the follow ended on %+v (%v) after %d reads, want the task with its result", got, err, src.reads)
	}

	// An agent's own task file saves the phase and the result together:
	// a follow of it ends at the terminal phase, result or none (a
	// failed task has none there).
	failed := &state.Task{ID: "t1", Phase: state.PhaseFailed, Lease: lease}
	local := &readsSource{views: []*state.Task{running, failed}, local: true}
	wake = make(chan struct{}, 8)
	for range 8 {
		wake <- struct{}{}
	}
	if got, err := Task(context.Background(), local, "t1", wake, func(*state.Task) error { return nil }); err != nil || got.Phase != state.PhaseFailed || local.reads != 2 {
		t.Errorf("a local follow ended on %+v (%v) after %d reads, want the failed task at the second", got, err, local.reads)
	}

	// A task no agent holds has no completion to come: it has ended.
	var s Settle
	now := time.Now()
	if !s.Done(&state.Task{Phase: state.PhaseCancelled}, now) {
		t.Error("a task cancelled in the queue is not taken as ended")
	}
	// One whose agent never sends it ends after the grace, not before.
	s = Settle{}
	if s.Done(phaseOnly, now) || s.Done(phaseOnly, now.Add(ResultGrace-time.Millisecond)) {
		t.Error("a terminal task without its result ended before the grace passed")
	}
	if !s.Done(phaseOnly, now.Add(ResultGrace)) {
		t.Error("a terminal task whose result never comes did not end after the grace")
	}
}
