package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
)

// A task the gate stopped, retried by a person and claimed again, runs
// its next attempt, also after a crash between the claim and the attempt;
// the new attempt says a person started it.
func TestPersonRetryRunsTheNextAttempt(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "claimed", true: "claimed, then the agent restarted"}[crashed], func(t *testing.T) {
			f := newFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@fail network")
			f.run(t, context.Background())
			if f.task.Phase != state.PhaseRecoverableFailed {
				t.Fatalf("phase %s, want recoverable_failed", f.task.Phase)
			}
			if err := f.runner.Run(context.Background(), f.task); err == nil {
				t.Fatal("Run took up a terminal task nobody retried")
			}
			must(t, f.task.RetryByPerson(time.Now()))
			must(t, f.task.Transition(state.PhaseClaimed, "claimed by agent-1", time.Now()))
			if crashed && !f.runner.Recover(f.task) {
				t.Fatalf("Recover left a claimed retry: %s", f.task.Phase)
			}
			f.run(t, context.Background())
			if f.task.Phase != state.PhaseCompleted || len(f.task.Attempts) != 2 {
				t.Fatalf("phase %s with %d attempts, want completed with 2", f.task.Phase, len(f.task.Attempts))
			}
			if a := f.task.Attempts[1]; a.Number != 2 || a.Model != "model-b" || !a.RetriedByPerson || a.Status != state.AttemptCompleted {
				t.Errorf("attempt 2: %+v", a)
			}
			if !contains(f.rec.kinds(), "complete:completed") {
				t.Errorf("reports %v", f.rec.kinds())
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
