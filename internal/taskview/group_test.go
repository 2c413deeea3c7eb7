package taskview

import (
	"slices"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// TestEveryPhaseHasItsGroup: each phase is in the group a person reads it
// as; recoverable_failed waits for a person with awaiting_reply.
func TestEveryPhaseHasItsGroup(t *testing.T) {
	t.Parallel()
	want := map[state.Phase]Group{
		state.PhaseQueued:  Queued,
		state.PhaseClaimed: Running, state.PhaseExecutorStarting: Running, state.PhaseTurnStarted: Running, state.PhaseCompleting: Running,
		state.PhaseAwaitingReply: Waiting, state.PhaseRecoverableFailed: Waiting,
		state.PhaseParked:    Parked,
		state.PhaseCompleted: Completed,
		state.PhaseFailed:    Failed, state.PhaseTimedOut: Failed, state.PhaseExpired: Failed,
		state.PhaseCancelled: Cancelled,
	}
	for _, ph := range state.Phases {
		w, ok := want[ph]
		if !ok {
			t.Errorf("phase %s: no group decided in this test; add it", ph)
			continue
		}
		if got := GroupOf(ph); got != w {
			t.Errorf("GroupOf(%s) = %s, want %s", ph, got, w)
		}
	}
}

// TestTheWaitingGroupIsWhatNeedsAPerson: the phases shown as waiting are
// those tasks ls and the console put on top as needing a person, no more,
// no fewer: where a task is listed and how it is coloured say the same.
func TestTheWaitingGroupIsWhatNeedsAPerson(t *testing.T) {
	t.Parallel()
	for _, ph := range state.Phases {
		waiting := GroupOf(ph) == Waiting
		needs := slices.Contains(api.NeedsPersonPhases, ph)
		if waiting != needs {
			t.Errorf("phase %s: shown waiting %v, needs a person (api.NeedsPersonPhases) %v", ph, waiting, needs)
		}
	}
}

// TestTheTerminalColoursAPhaseByItsGroup: two phases of one group have
// one colour, and every group has one.
func TestTheTerminalColoursAPhaseByItsGroup(t *testing.T) {
	t.Parallel()
	byGroup := map[Group]string{}
	for _, ph := range state.Phases {
		g, c := GroupOf(ph), PhaseColour(ph)
		if c == "" {
			t.Errorf("phase %s (%s) has no colour", ph, g)
		}
		if was, ok := byGroup[g]; ok && was != c {
			t.Errorf("group %s has two colours: %q and %q (%s)", g, was, c, ph)
		}
		byGroup[g] = c
	}
	if PhaseColour(state.PhaseRecoverableFailed) != ColourYellow || PhaseColour(state.PhaseFailed) != ColourRed {
		t.Errorf("recoverable_failed %q, failed %q: want yellow and red", PhaseColour(state.PhaseRecoverableFailed), PhaseColour(state.PhaseFailed))
	}
	if c := PhaseColour("from_a_newer_build"); c != ColourPlain {
		t.Errorf("an unknown phase is coloured %q, want plain", c)
	}
}

// TestFailuresAreTheEndsWithoutTheWork: a person hears of failed,
// timed_out, expired and recoverable_failed as failures; of no other
// phase.
func TestFailuresAreTheEndsWithoutTheWork(t *testing.T) {
	t.Parallel()
	want := []state.Phase{state.PhaseFailed, state.PhaseRecoverableFailed, state.PhaseTimedOut, state.PhaseExpired}
	for _, ph := range state.Phases {
		if got := Failure(ph); got != slices.Contains(want, ph) {
			t.Errorf("Failure(%s) = %v", ph, got)
		}
	}
	if Failure("from_a_newer_build") {
		t.Error("an unknown phase is a failure")
	}
}
