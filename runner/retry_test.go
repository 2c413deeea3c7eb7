package runner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// A task the gate stopped, retried by a person and claimed again, runs
// its next attempt, also after a crash between the claim and the attempt;
// the new attempt says a person started it.
func TestPersonRetryRunsTheNextAttempt(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "claimed", true: "claimed, then the agent restarted"}[crashed], func(t *testing.T) {
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@fail network")
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseRecoverableFailed {
				t.Fatalf("phase %s, want recoverable_failed", f.Task.Phase)
			}
			if err := f.Runner.Run(context.Background(), f.Task); err == nil {
				t.Fatal("Run took up a terminal task nobody retried")
			}
			must(t, f.Task.RetryByPerson(time.Now()))
			must(t, f.Task.Transition(state.PhaseClaimed, "claimed by agent-1", time.Now()))
			if crashed && !f.Runner.Recover(f.Task) {
				t.Fatalf("Recover left a claimed retry: %s", f.Task.Phase)
			}
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 {
				t.Fatalf("phase %s with %d attempts, want completed with 2", f.Task.Phase, len(f.Task.Attempts))
			}
			if a := f.Task.Attempts[1]; a.Number != 2 || a.Model != "model-b" || !a.RetriedByPerson || a.Status != state.AttemptCompleted {
				t.Errorf("attempt 2: %+v", a)
			}
			if !slices.Contains(f.Rec.Kinds(), "complete:completed") {
				t.Errorf("reports %v", f.Rec.Kinds())
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
