package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A task its agent parks at a usage limit is task.parked, saying when it
// resumes, with no retry reminder; a person's continue of it is handed to
// its agent in its heartbeats until it resumes, which is task.resumed;
// the watchdog leaves a parked task alone, however long it waits; a
// parked phase that says nothing of its park is refused.
func TestAParkedTaskIsNotifiedContinuedAndLeftAlone(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: t0}
	e := newNotifyEnv(t, t.TempDir(), clk)
	_, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "rotate", Title: "rotate the key"})
	must(t, err)
	c := e.claim("ws-1", "available", 1)[0]
	id := c.Task.ID
	a1 := state.Attempt{AttemptID: "a1", Number: 1, MaxAttempts: 3, Status: state.AttemptRunning, StartedAt: t0, SessionID: "s1", SessionPath: "/s1"}
	failed := a1
	failed.Status, failed.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	failed.Error = &state.Error{Code: state.CodeUsageLimit, Message: "You've hit your usage limit"}
	failed.Retry = &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionContinued, Delay: state.Duration(time.Hour)}
	resets := t0.Add(time.Hour)
	a2 := state.Attempt{AttemptID: "a2", Number: 2, MaxAttempts: 4, Status: state.AttemptPending, NotBefore: resets.Add(time.Second), Continues: 1}
	e.send("ws-1",
		ev(id+":p1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":a1", state.EventAttempt, c, a1),
		ev(id+":p2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}))
	e.noNotes("a task running")

	bad := e.send("ws-1", ev(id+":bad", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseParked, Reason: "no park"}))
	if bad[0].Status != api.StatusRejected || !strings.Contains(string(bad[0].Reason), "parked.reason") {
		t.Errorf("a parked phase with no park: %+v", bad[0])
	}
	park := &state.Park{Reason: state.ParkUsageLimit, ResumesAt: resets, Since: t0.Add(time.Second), ContinueAsked: t0}
	e.send("ws-1", ev(id+":a1f", state.EventAttempt, c, failed),
		ev(id+":p3", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseParked, Reason: "usage_limit: You've hit your usage limit; parked until the limit resets", Parked: park}),
		ev(id+":a2", state.EventAttempt, c, a2))
	n := e.oneNote(api.NotifyParked, "all")
	if want := `Task "rotate the key" parked (agent ws-1) at its usage limit; it continues on its own when the limit resets, at ` + resets.Format(time.RFC3339); !strings.HasPrefix(n.Text, want) {
		t.Errorf("text %q, want it to begin %q", n.Text, want)
	}
	v, err := e.client.Task(ctx, id)
	must(t, err)
	if v.Phase != state.PhaseParked || v.Parked == nil || !v.Parked.ResumesAt.Equal(resets) || !v.Parked.ContinueAsked.IsZero() {
		t.Fatalf("the task: %s, parked %+v (a continue asked is a person's, never the agent's)", v.Phase, v.Parked)
	}

	// Long past the stall limit, with no progress: not stalled.
	clk.advance(3 * time.Hour)
	hb := e.heartbeat("ws-1", api.RunningTask{TaskID: id, Attempt: 2, Phase: state.PhaseParked})
	if len(hb.Resume) != 0 || len(hb.Cancel) != 0 {
		t.Errorf("a heartbeat before any continue: resume %v, cancel %v", hb.Resume, hb.Cancel)
	}
	e.srv.watchdog.pass(ctx)
	if v, err = e.client.Task(ctx, id); err != nil || v.Phase != state.PhaseParked {
		t.Fatalf("after the watchdog: %s, %v", v.Phase, err)
	}

	// A person continues it early: its agent hears so until it resumes.
	e.clearNotes()
	v, err = e.client.ContinueTask(ctx, id)
	must(t, err)
	if v.Phase != state.PhaseParked || v.Parked == nil || v.Parked.ContinueAsked.IsZero() {
		t.Fatalf("continued: %s, %+v", v.Phase, v.Parked)
	}
	for range 2 {
		if hb := e.heartbeat("ws-1", api.RunningTask{TaskID: id, Attempt: 2, Phase: state.PhaseParked}); len(hb.Resume) != 1 || hb.Resume[0].TaskID != id {
			t.Fatalf("a heartbeat after the continue: resume %v", hb.Resume)
		}
	}
	e.send("ws-1", ev(id+":p4", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting, Reason: "resumed: a person continued it early; attempt 2/4 continues"}))
	e.oneNote(api.NotifyResumed, "all")
	if hb := e.heartbeat("ws-1", api.RunningTask{TaskID: id, Attempt: 2, Phase: state.PhaseExecutorStarting}); len(hb.Resume) != 0 {
		t.Errorf("a heartbeat after it resumed: resume %v", hb.Resume)
	}
	if v, err = e.client.Task(ctx, id); err != nil || v.Parked != nil {
		t.Errorf("resumed, the task keeps its park: %+v, %v", v.Parked, err)
	}
}

// heartbeat has agent heartbeat, saying it runs running, and returns the
// answer.
func (e *env) heartbeat(agent string, running ...api.RunningTask) api.HeartbeatResponse {
	e.t.Helper()
	resp, err := e.agent(agent).Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: agent, Running: running})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// A task parked at its budget is task.parked, saying the budget it
// reached and how to raise it; a person's raise adds to that budget (its
// agent's default here, the task having none of its own), and its agent
// hears the new bounds in its heartbeats until it resumes. A raise of a
// budget it has not, of nothing, or below zero is refused, as is one of a
// task not parked at its budget.
func TestABudgetRaiseReachesTheAgent(t *testing.T) {
	ctx := context.Background()
	e := newNotifyEnv(t, t.TempDir(), &clock{now: t0})
	_, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "count", Title: "count the words"})
	must(t, err)
	c := e.claim("ws-1", "available", 1)[0]
	id := c.Task.ID
	if _, err := e.client.BudgetTask(ctx, id, api.BudgetRequest{AddTokens: 10}); err == nil || !strings.Contains(err.Error(), "only a task parked at its budget can have it raised") {
		t.Errorf("a raise of a claimed task: %v", err)
	}
	a1 := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}
	failed := a1
	failed.Status, failed.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	failed.Error = &state.Error{Code: state.CodeBudgetExceeded, Message: "600 tokens used, over the budget of 500"}
	failed.Retry = &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateAllowed, Decision: state.DecisionRetried}
	e.send("ws-1",
		ev(id+":p1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":a1", state.EventAttempt, c, a1),
		ev(id+":a1f", state.EventAttempt, c, failed),
		ev(id+":p2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseParked, Reason: "budget_exceeded: …",
			Parked: &state.Park{Reason: state.ParkBudget, Since: t0, MaxTokens: 500}}),
		ev(id+":a2", state.EventAttempt, c, state.Attempt{AttemptID: "a2", Number: 2, Status: state.AttemptPending, NotBefore: t0.Add(time.Second)}))
	n := e.oneNote(api.NotifyParked, "all")
	if want := `Task "count the words" parked (agent ws-1) at its budget (500 tokens reached); a person decides: agent tasks budget ` + id + ` --add-tokens N or --add-time D continues it`; !strings.HasPrefix(n.Text, want) {
		t.Errorf("text %q, want it to begin %q", n.Text, want)
	}
	for _, c := range []struct {
		req  api.BudgetRequest
		want string
	}{
		{api.BudgetRequest{AddTime: state.Duration(time.Minute)}, "has no time budget to raise"},
		{api.BudgetRequest{}, "say how much to add"},
		{api.BudgetRequest{AddTokens: -1}, "cannot be below zero"},
	} {
		if _, err := e.client.BudgetTask(ctx, id, c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("raise %+v: %v, want %q", c.req, err, c.want)
		}
	}
	if hb := e.heartbeat("ws-1", api.RunningTask{TaskID: id, Attempt: 2, Phase: state.PhaseParked}); len(hb.Resume) != 0 {
		t.Errorf("a heartbeat before the raise: %+v", hb.Resume)
	}
	v, err := e.client.BudgetTask(ctx, id, api.BudgetRequest{AddTokens: 1000})
	must(t, err)
	if v.MaxTokens != 1500 || v.Parked == nil || v.Parked.MaxTokens != 1500 || v.Parked.ContinueAsked.IsZero() {
		t.Fatalf("raised: %d, %+v", v.MaxTokens, v.Parked)
	}
	if hb := e.heartbeat("ws-1", api.RunningTask{TaskID: id, Attempt: 2, Phase: state.PhaseParked}); len(hb.Resume) != 1 || hb.Resume[0] != (api.ResumeOrder{TaskID: id, MaxTokens: 1500}) {
		t.Errorf("a heartbeat after the raise: %+v", hb.Resume)
	}
}

// A parked task outlives the control plane's restart: parked still, with
// its park, left alone by the watchdog, and continued early through the
// new one.
func TestAParkedTaskOutlivesAControlPlaneRestart(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	task := e.submit("rotate", "any")
	c := e.claim("ws-1", "available", 1)[0]
	resets := t0.Add(time.Hour)
	e.send("ws-1",
		ev(task.ID+":p1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(task.ID+":p2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseParked, Reason: "usage_limit",
			Parked: &state.Park{Reason: state.ParkUsageLimit, ResumesAt: resets, Since: t0}}))
	e = e.restart(clk)
	clk.advance(4 * time.Second) // past three heartbeat intervals: leases may lapse again
	e.heartbeat("ws-1", api.RunningTask{TaskID: task.ID, Phase: state.PhaseParked})
	clk.advance(30 * time.Minute)
	e.heartbeat("ws-1", api.RunningTask{TaskID: task.ID, Phase: state.PhaseParked})
	e.srv.watchdog.pass(ctx)
	v, err := e.client.Task(ctx, task.ID)
	must(t, err)
	if v.Phase != state.PhaseParked || v.Parked == nil || !v.Parked.ResumesAt.Equal(resets) {
		t.Fatalf("after the restart: %s, %+v", v.Phase, v.Parked)
	}
	_, err = e.client.ContinueTask(ctx, task.ID)
	must(t, err)
	if hb := e.heartbeat("ws-1", api.RunningTask{TaskID: task.ID, Phase: state.PhaseParked}); len(hb.Resume) != 1 {
		t.Errorf("resume orders after the restart: %+v", hb.Resume)
	}
}
