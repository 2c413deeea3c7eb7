package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// parkedPhase is the parked phase event a run reported, nil when none.
func parkedPhase(rec *runnertest.Recorder) *state.PhaseEvent {
	for _, p := range rec.Phases() {
		if p.Phase == state.PhaseParked {
			return &p
		}
	}
	return nil
}

// checkContinuedOnce checks that the task completed in two attempts, the
// second continuing the first's session after its limit reset, with one
// follow-up turn, and that what the first had done was not done again.
func checkContinuedOnce(t *testing.T, f *runnertest.Fixture, park *state.Park) {
	t.Helper()
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
	if a1.Error == nil || a1.Error.Code != state.CodeUsageLimit || a1.Retry.Decision != state.DecisionContinued {
		t.Fatalf("attempt 1: %s", runnertest.AttemptsText(f.Task))
	}
	if a2.Continues != 1 || a2.SessionID != a1.SessionID || a2.StartedAt.Before(park.ResumesAt) {
		t.Fatalf("attempt 2 continues %d, session %q (attempt 1's %q), started %s before the reset at %s",
			a2.Continues, a2.SessionID, a1.SessionID, a2.StartedAt, park.ResumesAt)
	}
	// A usage limit spends no attempt: the policy's limit still allows
	// the retries it allowed.
	if a2.MaxAttempts != 2 {
		t.Errorf("attempt 2 runs under the limit %d, want 2 (one attempt and the limit's)", a2.MaxAttempts)
	}
	var saved struct {
		Prompts []string `json:"prompts"`
	}
	b, err := os.ReadFile(a1.SessionPath)
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(saved.Prompts) != 2 || !strings.Contains(saved.Prompts[1], "The usage limit has reset") {
		t.Fatalf("the session's turns: %q, want the prompt and one follow-up", saved.Prompts)
	}
	logs := strings.Join(f.Rec.Logs(), "\n")
	if strings.Count(logs, "rotated the key") != 1 || !strings.Contains(logs, "after the reset") {
		t.Errorf("the side effect was repeated, or the work after the limit not done:\n%s", logs)
	}
}

// An attempt that stops at a usage limit said to reset parks the task,
// with the reason and when it resumes, and at that time (and a little
// jitter) continues the same session with one follow-up turn; it spends
// no attempt.
func TestUsageLimitParksAndContinuesTheSessionOnce(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@limit 300ms\n@output after the reset")
	f.Runner.WorkRoot = t.TempDir()
	f.Runner.Policy.MaxAttempts = 1 // no retry: the park is not one
	f.Run(t, context.Background())
	p := parkedPhase(f.Rec)
	if p == nil || p.Parked == nil || p.Parked.Reason != state.ParkUsageLimit || p.Parked.ResumesAt.IsZero() {
		t.Fatalf("no parked phase with its park reported: %v", f.Rec.Kinds())
	}
	if !strings.Contains(p.Reason, "usage_limit") || !strings.Contains(p.Reason, "continues attempt 1's session") {
		t.Errorf("parked reason %q", p.Reason)
	}
	checkContinuedOnce(t, f, p.Parked)
	if f.Task.Parked != nil {
		t.Errorf("the completed task keeps its park: %+v", f.Task.Parked)
	}
	kinds := strings.Join(f.Rec.Kinds(), " ")
	if !strings.Contains(kinds, "phase:parked attempt:2:pending phase:executor_starting") {
		t.Errorf("reports %s", kinds)
	}
}

// An agent stopped while its task is parked leaves it parked, its
// pending attempt recorded; its next run (Recover, then Run) waits out
// the rest of the park and continues the session once.
func TestAParkedTaskSurvivesTheAgentsRestart(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@limit 500ms\n@output after the reset")
	f.Runner.WorkRoot = t.TempDir()
	f.Runner.Policy.MaxAttempts = 1
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	f.Rec.OnReport = func(r runner.Report) {
		if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseParked {
			stop(runner.ErrShutdown)
		}
	}
	if err := f.Runner.Run(ctx, f.Task); err != nil {
		t.Fatal(err)
	}
	if f.Task.Phase != state.PhaseParked || f.Task.Parked == nil || f.Task.Current().Status != state.AttemptPending || f.Task.Check() != nil {
		t.Fatalf("after the stop: task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	park := *f.Task.Parked
	// The agent's next run, from what it had recorded.
	saved, err := json.Marshal(f.Task)
	if err != nil {
		t.Fatal(err)
	}
	f.Task = new(state.Task)
	must(t, json.Unmarshal(saved, f.Task))
	f.Rec.OnReport = nil
	if !f.Runner.Recover(f.Task) {
		t.Fatal("Recover would not take the parked task up")
	}
	f.Run(t, context.Background())
	checkContinuedOnce(t, f, &park)
}

// A parked task a person cancels ends cancelled, its pending attempt
// with it, without waiting for the reset; one a person wakes (continued
// early) resumes at once.
func TestAParkedTaskIsCancelledOrWokenEarly(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@limit 1h")
		f.Runner.WorkRoot = t.TempDir()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		f.Rec.OnReport = func(r runner.Report) {
			if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseParked {
				cancel(&runner.Cancel{Reason: "cancelled by a person"})
			}
		}
		f.Run(t, ctx)
		if f.Task.Phase != state.PhaseCancelled || f.Task.Parked != nil || f.Task.Attempts[1].Status != state.AttemptCancelled {
			t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
		}
	})
	t.Run("woken", func(t *testing.T) {
		f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect rotated the key\n@limit 1h\n@output after the reset")
		f.Runner.WorkRoot = t.TempDir()
		wake := make(chan runner.WakeOrder, 1)
		f.Runner.Wake = wake
		f.Rec.OnReport = func(r runner.Report) {
			if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseParked {
				wake <- runner.WakeOrder{}
			}
		}
		f.Run(t, context.Background())
		if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 || f.Task.Attempts[1].Continues != 1 {
			t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
		}
		resumed := false
		for _, p := range f.Rec.Phases() {
			resumed = resumed || p.Phase == state.PhaseExecutorStarting && strings.Contains(p.Reason, "a person continued it early")
		}
		if !resumed {
			t.Errorf("phases %+v", f.Rec.Phases())
		}
	})
}

// Without a reset time, a usage limit waits the configured backoff, as
// a rate limit does: no park.
func TestUsageLimitWithoutAResetTimeBacksOff(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail usage_limit")
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 || parkedPhase(f.Rec) != nil {
		t.Fatalf("task %s, attempts %s, phases %+v", f.Task.Phase, runnertest.AttemptsText(f.Task), f.Rec.Phases())
	}
	if f.Task.Attempts[0].Retry.Decision != state.DecisionRetried {
		t.Errorf("attempt 1: %s", runnertest.AttemptsText(f.Task))
	}
}

// A task that reaches its token budget parks (reason budget, saying the
// budget it reached) instead of failing; a raise that leaves it spent
// keeps it parked, said in its log; a raise past what it spent continues
// the session, once, and spends no attempt. Also when the agent stops
// while it is parked, and takes it up again.
func TestABudgetReachedParksUntilAPersonRaisesIt(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "parked", true: "restarted while parked"}[restart], func(t *testing.T) {
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@side-effect rotated the key\n@usage 600\n@sleep 1s\n@output after the raise")
			f.Runner.WorkRoot = t.TempDir()
			f.Runner.Policy.MaxAttempts = 1
			f.Task.MaxTokens = 500
			wake := make(chan runner.WakeOrder)
			f.Runner.Wake = wake
			ctx, stop := context.WithCancelCause(context.Background())
			defer stop(nil)
			raise := func() {
				go func() {
					wake <- runner.WakeOrder{MaxTokens: 550} // still under the 600 spent
					wake <- runner.WakeOrder{MaxTokens: 1000}
				}()
			}
			f.Rec.OnReport = func(r runner.Report) {
				if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseParked {
					if restart {
						stop(runner.ErrShutdown)
					} else {
						raise()
					}
				}
			}
			if err := f.Runner.Run(ctx, f.Task); err != nil {
				t.Fatal(err)
			}
			p := parkedPhase(f.Rec)
			if p == nil || p.Parked.Reason != state.ParkBudget || p.Parked.MaxTokens != 500 || !p.Parked.ResumesAt.IsZero() ||
				!strings.Contains(p.Reason, "parked until a person raises the budget (agent tasks budget)") {
				t.Fatalf("parked: %+v", p)
			}
			if restart {
				if f.Task.Phase != state.PhaseParked {
					t.Fatalf("stopped while parked: %s", f.Task.Phase)
				}
				saved, err := json.Marshal(f.Task)
				must(t, err)
				f.Task = new(state.Task)
				must(t, json.Unmarshal(saved, f.Task))
				f.Rec.OnReport = nil
				if !f.Runner.Recover(f.Task) {
					t.Fatal("Recover would not take the parked task up")
				}
				raise()
				f.Run(t, context.Background())
			}
			if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 || f.Task.MaxTokens != 1000 {
				t.Fatalf("task %s, max tokens %d, attempts %s", f.Task.Phase, f.Task.MaxTokens, runnertest.AttemptsText(f.Task))
			}
			a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
			if a1.Error.Code != state.CodeBudgetExceeded || a1.Retry.Decision != state.DecisionContinued || a2.Continues != 1 || a2.MaxAttempts != 2 {
				t.Fatalf("attempts %s; attempt 2 runs under %d", runnertest.AttemptsText(f.Task), a2.MaxAttempts)
			}
			logs := strings.Join(f.Rec.Logs(), "\n")
			if !strings.Contains(logs, "the budget raised to 550 tokens is still spent") || strings.Count(logs, "rotated the key") != 1 || !strings.Contains(logs, "after the raise") {
				t.Errorf("logs:\n%s", logs)
			}
			resumed := false
			for _, ph := range f.Rec.Phases() {
				resumed = resumed || strings.HasPrefix(ph.Reason, "resumed: a person raised its budget to 1k tokens")
			}
			if !resumed {
				t.Errorf("phases %+v", f.Rec.Phases())
			}
		})
	}
}
