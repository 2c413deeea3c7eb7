package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// budgetFixture runs prompt through the sample under a budget, keeping
// the usage of every attempt report, with on_budget fail (a budget
// reached ends the task; park_test.go has the default, which asks).
func budgetFixture(t *testing.T, prompt string, task, def runner.Budget) (*runnertest.Fixture, func() []int64) {
	t.Helper()
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), prompt)
	f.Task.MaxTokens, f.Task.MaxTime = task.MaxTokens, state.Duration(task.MaxTime)
	f.Runner.Budget = def
	f.Runner.OnBudget = state.OnBudgetFail
	f.Runner.Policy.Rand = func() float64 { return 0 }
	var mu sync.Mutex
	var reported []int64
	f.Rec.OnReport = func(r runner.Report) {
		if a, ok := r.Payload.(state.Attempt); ok {
			mu.Lock()
			reported = append(reported, a.Usage.TotalTokens)
			mu.Unlock()
		}
	}
	return f, func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), reported...)
	}
}

// checkBudgetExceeded checks that the task ended failed, its last attempt
// budget_exceeded with message why and a decision that stops it for the
// budget, and that the timeline shows it.
func checkBudgetExceeded(t *testing.T, f *runnertest.Fixture, attempts int, why string) {
	t.Helper()
	if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != attempts {
		t.Fatalf("phase %s (%s), attempts:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task))
	}
	a := f.Task.Current()
	if a.Error == nil || a.Error.Code != state.CodeBudgetExceeded || !strings.Contains(a.Error.Message, why) {
		t.Errorf("attempt %d error %v, want budget_exceeded: …%s…", a.Number, a.Error, why)
	}
	if d := a.Retry; d == nil || d.TechnicallyRetryable || d.Gate != state.GateBudget || d.Decision != state.DecisionStopped {
		t.Errorf("decision %+v, want stopped for the budget", d)
	}
	if f.Task.LastErrorCode != state.CodeBudgetExceeded {
		t.Errorf("last error code %s", f.Task.LastErrorCode)
	}
	tl := state.Timeline(f.Task, time.Now())
	if !strings.Contains(tl[len(tl)-1], "budget_exceeded: ") || !strings.HasSuffix(tl[len(tl)-1], "-> stopped: budget_exceeded") {
		t.Errorf("timeline:\n%s", strings.Join(tl, "\n"))
	}
}

func TestTokenBudgetStopsTheAttemptThatPassesIt(t *testing.T) {
	// The sample goes on waiting after its usage: only the budget's stop
	// ends it.
	f, reported := budgetFixture(t, "@usage 600\n@output half way\n@usage 600\n@hang", runner.Budget{MaxTokens: 1000}, runner.Budget{})
	f.Run(t, context.Background())
	checkBudgetExceeded(t, f, 1, "1.2k tokens used, over the budget of 1k")
	a := f.Task.Attempts[0]
	if a.Usage != (state.Usage{InputTokens: 960, OutputTokens: 240, TotalTokens: 1200}) {
		t.Errorf("usage %+v", a.Usage)
	}
	if !strings.Contains(a.TimeoutUsed, "fired=budget") {
		t.Errorf("limits %q", a.TimeoutUsed)
	}
	// Each report of the attempt carries its usage as it grew.
	if got := reported(); !containsInOrder(got, 600, 1200) {
		t.Errorf("attempt reports' usage %v, want 600 then 1200", got)
	}
	tl := state.Timeline(f.Task, time.Now())
	if !strings.Contains(tl[0], "  1.2k tok  budget_exceeded: 1.2k tokens used") {
		t.Errorf("timeline %q", tl)
	}
	u := f.Task.Result
	if u == nil || u.Usage == nil || u.Usage.TotalTokens != 1200 || u.Usage.WallTime <= 0 {
		t.Errorf("result %+v", u)
	}
}

func TestTokenBudgetCountsEveryAttempt(t *testing.T) {
	// Attempt 1 uses 600 and fails, transiently; the replay's 600 more
	// pass the budget.
	f, _ := budgetFixture(t, "@usage 600\n@fail rate_limit\n@hang", runner.Budget{MaxTokens: 1000}, runner.Budget{})
	f.Run(t, context.Background())
	checkBudgetExceeded(t, f, 2, "1.2k tokens used (600 by this attempt), over the budget of 1k")
	if a1 := f.Task.Attempts[0]; a1.Error.Code != state.CodeRateLimit || a1.Retry.Decision != state.DecisionRetried || a1.Usage.TotalTokens != 600 {
		t.Errorf("attempt 1: %+v", a1)
	}
	if u := f.Task.Usage(time.Now()); u.TotalTokens != 1200 {
		t.Errorf("task usage %+v", u)
	}
}

func TestSpentBudgetRefusesTheNextAttempt(t *testing.T) {
	// Attempt 1 uses the whole budget, not more, and fails transiently:
	// its replay is refused before its executor starts.
	f, _ := budgetFixture(t, "@usage 1000\n@fail rate_limit", runner.Budget{MaxTokens: 1000}, runner.Budget{})
	f.Run(t, context.Background())
	checkBudgetExceeded(t, f, 2, "the earlier attempts used 1k tokens of the budget of 1k")
	if a2 := f.Task.Attempts[1]; a2.Facts.FirstEventAt != (time.Time{}) || a2.SessionID != "" {
		t.Errorf("attempt 2 ran: %+v", a2)
	}
}

func TestTimeBudgetStopsTheAttemptNotAsATimeout(t *testing.T) {
	f, _ := budgetFixture(t, "@output working\n@hang", runner.Budget{MaxTime: 300 * time.Millisecond}, runner.Budget{})
	f.Run(t, context.Background())
	checkBudgetExceeded(t, f, 1, "ran out the time budget of 300ms")
	if a := f.Task.Attempts[0]; !strings.Contains(a.TimeoutUsed, "budget_left=300ms") || !strings.Contains(a.TimeoutUsed, "fired=budget") {
		t.Errorf("limits %q", a.TimeoutUsed)
	}
}

func TestTimeBudgetCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	// Attempt 1 runs a while and fails transiently; its replay gets what
	// is left of the budget, and is stopped when that runs out. The
	// budget leaves attempt 1 seconds to start on a loaded machine (with
	// 700 ms, a slow start spent it all in attempt 1).
	const budget = 5 * time.Second
	f, _ := budgetFixture(t, "@sleep 200ms\n@fail rate_limit\n@hang", runner.Budget{MaxTime: budget}, runner.Budget{})
	f.Run(t, context.Background())
	checkBudgetExceeded(t, f, 2, "ran out the time budget of 5s (the earlier attempts ran ")
	a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
	left := budget - a1.WallTime(time.Now())
	if !strings.Contains(a2.TimeoutUsed, "budget_left="+left.Round(time.Millisecond).String()) {
		t.Errorf("attempt 2's limits %q, want what attempt 1 (%s) left: %s", a2.TimeoutUsed, a1.WallTime(time.Now()), left)
	}
}

func TestTheTasksOwnBudgetWins(t *testing.T) {
	cases := []struct {
		name      string
		task, def runner.Budget
		want      state.Phase
	}{
		{"the default applies", runner.Budget{}, runner.Budget{MaxTokens: 100}, state.PhaseFailed},
		{"the task's own wins", runner.Budget{MaxTokens: 10_000}, runner.Budget{MaxTokens: 100}, state.PhaseCompleted},
		{"no budget", runner.Budget{}, runner.Budget{}, state.PhaseCompleted},
		{"another bound's default still applies", runner.Budget{MaxTime: time.Hour}, runner.Budget{MaxTokens: 100}, state.PhaseFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, _ := budgetFixture(t, "@usage 500", c.task, c.def)
			f.Run(t, context.Background())
			if f.Task.Phase != c.want {
				t.Fatalf("phase %s, want %s:\n%s", f.Task.Phase, c.want, runnertest.AttemptsText(f.Task))
			}
			if u := f.Task.Attempts[0].Usage; u.TotalTokens != 500 {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

// containsInOrder reports whether list holds want's values in order.
func containsInOrder(list []int64, want ...int64) bool {
	for _, v := range list {
		if len(want) > 0 && v == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// The control plane stops a task whose tree of subtasks passed its
// root's budget (the agent cancels its context with a *BudgetStop): the
// running attempt is stopped and ends budget_exceeded with the control
// plane's reason, and so does one waiting out its backoff, never retried.
func TestBudgetStopEndsTheTaskBudgetExceeded(t *testing.T) {
	const why = "the tree of t-root used 1.1k tokens, over its budget of 1k"
	for _, c := range []struct {
		name, prompt string
		attempts     int
		stopWhen     func(a state.Attempt) bool
	}{
		{"running", "@usage 300\n@hang", 1, func(a state.Attempt) bool { return a.Usage.TotalTokens == 300 }},
		{"in its backoff", "@fail rate_limit 5\n@hang", 2, func(a state.Attempt) bool { return a.Number == 2 && a.Status == state.AttemptPending }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := budgetFixture(t, c.prompt, runner.Budget{}, runner.Budget{})
			f.Runner.Policy.Rand = func() float64 { return 1 } // a backoff long enough to stop in
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f.Rec.OnReport = func(r runner.Report) {
				if a, ok := r.Payload.(state.Attempt); ok && c.stopWhen(a) {
					cancel(&runner.BudgetStop{Reason: why})
				}
			}
			f.Run(t, ctx)
			checkBudgetExceeded(t, f, c.attempts, why)
			if a := f.Task.Current(); !strings.Contains(a.TimeoutUsed, "fired=budget") {
				t.Errorf("limits %q", a.TimeoutUsed)
			}
		})
	}
}
