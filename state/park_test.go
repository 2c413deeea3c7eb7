package state

import (
	"errors"
	"testing"
	"time"
)

// TestParkWaitsHeldAndLeavesOnlyToResumeOrEnd: a running task parks with
// why and until when, stays running (its agent holds it), and leaves only
// for executor_starting, as its session resumes, or a terminal phase;
// leaving forgets the park.
func TestParkWaitsHeldAndLeavesOnlyToResumeOrEnd(t *testing.T) {
	task := claimed(t)
	must(t, task.Transition(PhaseExecutorStarting, "", t0))
	must(t, task.Transition(PhaseTurnStarted, "", t0))
	resets := t0.Add(5 * time.Second)
	must(t, task.Park(Park{Reason: ParkUsageLimit, ResumesAt: resets, Since: t0}, "usage limit", t0))
	if task.Phase != PhaseParked || !task.Phase.Running() || task.Phase.Terminal() || task.Parked == nil || !task.Parked.ResumesAt.Equal(resets) {
		t.Fatalf("parked: phase %s, parked %+v", task.Phase, task.Parked)
	}
	must(t, task.Check())
	for _, to := range []Phase{PhaseTurnStarted, PhaseAwaitingReply, PhaseCompleting, PhaseClaimed, PhaseQueued, PhaseExpired} {
		if err := task.Clone().Transition(to, "", t0); !errors.Is(err, ErrTransition) {
			t.Errorf("parked -> %s: %v, want ErrTransition", to, err)
		}
	}
	if c := task.Clone(); c.Parked == task.Parked {
		t.Error("a clone shares the park")
	}
	ended := task.Clone()
	must(t, ended.Transition(PhaseCancelled, "cancelled by a person", t0))
	if ended.Parked != nil {
		t.Errorf("a cancelled task keeps its park: %+v", ended.Parked)
	}
	must(t, task.Transition(PhaseExecutorStarting, "resumed", resets))
	if task.Parked != nil {
		t.Errorf("a resumed task keeps its park: %+v", task.Parked)
	}
	queued := NewTask("q", "p", t0)
	if err := queued.Park(Park{Reason: ParkUsageLimit}, "", t0); !errors.Is(err, ErrTransition) {
		t.Errorf("a queued task parked: %v", err)
	}
}

// TestUsageLimitIsTransient: the code an executor gives for a usage
// limit says another attempt may succeed (after the reset).
func TestUsageLimitIsTransient(t *testing.T) {
	if !CodeUsageLimit.Known() || CodeUsageLimit.Retry() != RetryTransient {
		t.Fatalf("usage_limit: known %v, retry %v", CodeUsageLimit.Known(), CodeUsageLimit.Retry())
	}
}
