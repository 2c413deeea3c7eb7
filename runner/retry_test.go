package runner_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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

// Every attempt records the limit it ran under, which every view shows
// as "attempt 2/3": the policy's, one more for each attempt the agent's
// own stop cut short, and a person's retry's own number (the gate allows
// no automatic retry after it).
func TestAttemptsCarryTheirLimit(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail rate_limit")
		f.Run(t, context.Background())
		if got := limits(f.Task); !slices.Equal(got, []int{3, 3}) {
			t.Fatalf("limits %v, want [3 3]", got)
		}
		tl := state.Timeline(f.Task, time.Now())
		if len(tl) != 2 || !strings.HasPrefix(tl[0], "Attempt 1/3  failed") || !strings.HasPrefix(tl[1], "Attempt 2/3  completed") {
			t.Errorf("timeline:\n%s", strings.Join(tl, "\n"))
		}
		// What the control plane hears carries it from the first report.
		reported := 0
		for _, p := range f.Rec.Payloads() {
			if a, ok := p.(state.Attempt); ok {
				reported++
				if a.MaxAttempts != 3 {
					t.Errorf("attempt %d reported with the limit %d", a.Number, a.MaxAttempts)
				}
			}
		}
		if reported == 0 {
			t.Error("no attempt reported")
		}
	})
	t.Run("after a stop", func(t *testing.T) {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@wait-file "+filepath.Join(t.TempDir(), "never"))
		f.Runner.WorkRoot = t.TempDir()
		f.Runner.Policy.MaxAttempts = 1
		next := runUntilStopped(t, f, stopAt(f, false))
		if next.NumberText() != "2/2" || f.Task.Attempts[0].NumberText() != "1/1" {
			t.Errorf("attempts %s and %s, want 1/1 then 2/2 (the stop spent no attempt)", f.Task.Attempts[0].NumberText(), next.NumberText())
		}
	})
	t.Run("a person's retry", func(t *testing.T) {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@fail network")
		f.Runner.Policy.MaxAttempts = 1
		f.Run(t, context.Background())
		must(t, f.Task.RetryByPerson(time.Now()))
		must(t, f.Task.Transition(state.PhaseClaimed, "claimed by agent-1", time.Now()))
		f.Run(t, context.Background())
		if got := limits(f.Task); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("limits %v, want [1 2]", got)
		}
	})
}

func limits(task *state.Task) []int {
	var out []int
	for _, a := range task.Attempts {
		out = append(out, a.MaxAttempts)
	}
	return out
}
