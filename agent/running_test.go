package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// A parked task gives its slot up: another task may start in it; it
// resumes only when a slot is free again, and holds it from then; with
// park_keeps_slot it keeps its slot and resumes at once.
func TestAParkedTaskGivesItsSlotUp(t *testing.T) {
	r := newRunningTasks(false)
	limit := func() int { return 1 }
	r.start("a", &supervised{phase: state.PhaseTurnStarted, wake: make(chan runner.WakeOrder, 1)}, func() {})
	if n, _ := r.room(1); n != 0 {
		t.Fatalf("room %d with one task running, limit 1", n)
	}
	r.update("a", state.PhaseParked, 1, time.Time{})
	if n, _ := r.room(1); n != 1 {
		t.Fatalf("room %d with the one task parked", n)
	}
	r.start("b", &supervised{phase: state.PhaseClaimed}, func() {})

	// Its reset come, it waits for b's slot: here until its stop.
	ctx, cancel := context.WithCancelCause(context.Background())
	stopped := errors.New("the agent stops")
	done := make(chan error, 1)
	go func() { done <- r.unpark(ctx, "a", limit) }()
	cancel(stopped)
	if err := <-done; !errors.Is(err, stopped) {
		t.Fatalf("unpark with every slot taken: %v, want it to wait until stopped", err)
	}
	go func() { done <- r.unpark(context.Background(), "a", limit) }()
	r.end("b")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := r.room(1); n != 0 {
		t.Errorf("room %d once the parked task resumed", n)
	}
	if r.wake("a", runner.WakeOrder{}) {
		t.Error("a task no longer parked was woken")
	}

	keep := newRunningTasks(true)
	keep.start("a", &supervised{phase: state.PhaseParked, wake: make(chan runner.WakeOrder, 1)}, func() {})
	if n, _ := keep.room(1); n != 0 {
		t.Errorf("room %d with park_keeps_slot", n)
	}
	for i := range 2 { // the second finds the first waiting: still woken
		if !keep.wake("a", runner.WakeOrder{MaxTokens: int64(i)}) {
			t.Errorf("wake %d: a parked task was not woken", i+1)
		}
	}
	if err := keep.unpark(context.Background(), "a", limit); err != nil {
		t.Error(err)
	}
}
