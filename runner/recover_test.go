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
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "fix it")
			a, _ := f.Task.StartFirstAttempt("a1", f.Runner.Models, time.Now())
			f.Task.Observe(a.AttemptID, state.Activity{SideEffect: c.facts.SideEffect}, time.Now())
			if got := f.Runner.Recover(f.Task); got != c.resume || f.Task.Phase != c.phase {
				t.Fatalf("resume %v, phase %s", got, f.Task.Phase)
			}
			a1 := f.Task.Attempts[0]
			if a1.Status != state.AttemptFailed || a1.Error.Code != "agent_restart" || a1.Retry == nil {
				t.Errorf("orphaned attempt %+v", a1)
			}
			if c.resume {
				f.Run(t, context.Background())
				if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 {
					t.Errorf("after resuming: %s with %d attempts", f.Task.Phase, len(f.Task.Attempts))
				}
			} else if a1.Retry.Gate != state.GateSideEffect || !slices.Contains(f.Rec.Kinds(), "complete:recoverable_failed") {
				t.Errorf("gate %q, reports %v", a1.Retry.Gate, f.Rec.Kinds())
			}
		})
	}
}
