package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A task's budgets travel to the agent that claims it; the usage its
// attempts report shows in the task, its attempts and its result; a
// budget below zero is refused.
func TestBudgetsAndUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	for _, req := range []api.CreateTaskRequest{
		{Prompt: "p", MaxTokens: -1},
		{Prompt: "p", MaxTime: state.Duration(-time.Second)},
	} {
		if _, err := e.client.CreateTask(ctx, req); statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "want 0 (the agent's default) or more") {
			t.Errorf("%+v: %v, want 400", req, err)
		}
	}
	task, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "p", MaxTokens: 1000, MaxTime: state.Duration(time.Minute)})
	if err != nil || task.MaxTokens != 1000 || task.MaxTime.D() != time.Minute {
		t.Fatalf("created: %v %+v", err, task)
	}
	c := e.claim("agent-a", "available", 1)[0]
	if c.Task.MaxTokens != 1000 || c.Task.MaxTime.D() != time.Minute {
		t.Fatalf("claimed without its budget: %+v", c.Task)
	}
	used := state.Usage{InputTokens: 960, OutputTokens: 240, TotalTokens: 1200}
	evs := runToCompletion(c)
	// The attempt ends over its budget, with its usage.
	evs[5] = ev(task.ID+":attempt:2", state.EventAttempt, c, state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptFailed, StartedAt: t0, CompletedAt: t0.Add(3 * time.Second),
		Error: &state.Error{Code: state.CodeBudgetExceeded, Message: "1.2k tokens used, over the budget of 1k"},
		Retry: &state.RetryDecision{Gate: state.GateBudget, Decision: state.DecisionStopped}, Usage: used})
	evs[6] = ev(task.ID+":phase:failed", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseFailed, Reason: "budget_exceeded: 1.2k tokens used, over the budget of 1k"})
	total := state.TaskUsage{Usage: used, WallTime: state.Duration(3 * time.Second)}
	evs[7] = ev(task.ID+":complete", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseFailed, Usage: &total})
	if got := statuses(e.send("agent-a", evs...)); strings.Contains(got, "rejected") {
		t.Fatalf("run: %s", got)
	}
	v, err := e.client.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Phase != state.PhaseFailed || v.LastErrorCode != state.CodeBudgetExceeded || v.Attempts[0].Usage != used {
		t.Errorf("task %s %s, attempt usage %+v", v.Phase, v.LastErrorCode, v.Attempts[0].Usage)
	}
	if v.Result == nil || v.Result.Usage == nil || *v.Result.Usage != total {
		t.Errorf("result %+v", v.Result)
	}
	if v.Usage != total {
		t.Errorf("the view's usage %+v, want %+v", v.Usage, total)
	}
}
