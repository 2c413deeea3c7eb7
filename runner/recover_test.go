package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
)

func TestRecoverAfterACrash(t *testing.T) {
	cases := []struct {
		name   string
		facts  state.Facts
		resume bool
		phase  state.Phase
	}{
		{"nothing done yet: a new attempt", state.Facts{}, true, state.PhaseExecutorStarting},
		{"a side effect: a person decides", state.Facts{SideEffect: true}, false, state.PhaseRecoverableFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, sampleExec(t, exec.Config{}), "fix it")
			a, _ := f.task.StartFirstAttempt("a1", f.runner.Models, time.Now())
			f.task.Observe(a.AttemptID, state.Activity{SideEffect: c.facts.SideEffect}, time.Now())
			if got := f.runner.Recover(f.task); got != c.resume || f.task.Phase != c.phase {
				t.Fatalf("resume %v, phase %s", got, f.task.Phase)
			}
			a1 := f.task.Attempts[0]
			if a1.Status != state.AttemptFailed || a1.Error.Code != "agent_restart" || a1.Retry == nil {
				t.Errorf("orphaned attempt %+v", a1)
			}
			if c.resume {
				f.run(t, context.Background())
				if f.task.Phase != state.PhaseCompleted || len(f.task.Attempts) != 2 {
					t.Errorf("after resuming: %s with %d attempts", f.task.Phase, len(f.task.Attempts))
				}
			} else if a1.Retry.Gate != state.GateSideEffect || !contains(f.rec.kinds(), "complete:recoverable_failed") {
				t.Errorf("gate %q, reports %v", a1.Retry.Gate, f.rec.kinds())
			}
		})
	}
}
