package demo

import (
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// The live line of a task that ended says how it ended, never the last
// progress it reported, which is over.
func TestProgressLineOfAnEndedTask(t *testing.T) {
	running := api.ViewOf(&state.Task{Phase: state.PhaseTurnStarted, Progress: state.Progress{Message: "the model is answering"},
		Attempts: []state.Attempt{{Number: 1, Status: state.AttemptRunning, Model: "m"}}})
	if got := progressLine(running); got != "turn_started       the model is answering" {
		t.Errorf("running: %q", got)
	}
	done := running
	done.Phase, done.Result = state.PhaseCompleted, &state.Result{Summary: "done: the release notes"}
	if got := progressLine(done); got != "completed          done: the release notes" {
		t.Errorf("completed: %q", got)
	}
	done.Result = nil
	if got := progressLine(done); got != "completed" {
		t.Errorf("completed without a summary: %q", got)
	}
	failed := running
	failed.Phase, failed.PhaseReason = state.PhaseFailed, "quota: exceeded"
	if got := progressLine(failed); got != "failed             quota: exceeded" {
		t.Errorf("failed: %q", got)
	}
}
