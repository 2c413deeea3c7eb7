package runnertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Fixture is one task, claimed, and a runner to run it.
type Fixture struct {
	Runner *runner.Runner
	Rec    *Recorder
	Health *health.Tracker
	Task   *state.Task
}

// NewFixture returns a fixture whose runner drives exe with a short backoff
// and log flush, over the models model-a and model-b; its task t-1 asks
// prompt. The recorder keeps logs.
func NewFixture(t testing.TB, exe runner.Executor, prompt string) *Fixture {
	t.Helper()
	rec := &Recorder{KeepLogs: true}
	tr := health.NewTracker(exe.Name(), health.Options{})
	task := state.NewTask("t-1", prompt, time.Now())
	if err := task.Transition(state.PhaseClaimed, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Executor: exe, Sink: rec, Health: tr, Models: []string{"model-a", "model-b"},
		Policy: runner.Policy{BaseDelay: 10 * time.Millisecond}, LogFlush: 20 * time.Millisecond}
	return &Fixture{Runner: r, Rec: rec, Health: tr, Task: task}
}

// NewCLIFixture returns a fixture whose runner drives exe (a real CLI) with
// short limits, over models, in work directories of a temporary root, as
// an owner of the test's own.
func NewCLIFixture(t testing.TB, exe runner.Executor, prompt string, models []string) *Fixture {
	t.Helper()
	f := NewFixture(t, exe, prompt)
	f.Runner.Models = models
	f.Runner.WorkRoot = t.TempDir()
	// An owner per test: parallel tests must not see each other's
	// processes as left behind.
	f.Runner.Owner = Owner(t)
	f.Runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{20 * time.Second}, Attempt: []time.Duration{2 * time.Minute}}
	return f
}

// RunLimit bounds Fixture.Run: longer than any test's attempts take on a
// loaded machine, far shorter than the suite's timeout.
const RunLimit = 10 * time.Minute

// Run runs the task to its end and fails the test unless it ended in a
// terminal phase with its invariants kept.
func (f *Fixture) Run(t testing.TB, ctx context.Context) {
	t.Helper()
	// A task that waits for a person (parked at its budget, a question)
	// would wait for good: the run is given up past RunLimit.
	ctx, cancel := context.WithTimeout(ctx, RunLimit)
	defer cancel()
	if err := f.Runner.Run(ctx, f.Task); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !f.Task.Phase.Terminal() {
		t.Fatalf("Run returned with the task %s (%s)", f.Task.Phase, f.Task.PhaseReason)
	}
	if err := f.Task.Check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
}

// AttemptsText says how each of the task's attempts ended, on one line.
func AttemptsText(task *state.Task) string {
	var parts []string
	for _, a := range task.Attempts {
		s := fmt.Sprintf("#%d %s", a.Number, a.Status)
		if a.Error != nil {
			s += " " + a.Error.Error()
		}
		if a.Retry != nil {
			s += fmt.Sprintf(" gate=%s %s", a.Retry.Gate, a.Retry.Decision)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
