package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A person's retry puts a recoverable_failed task back in the queue with
// its attempts; the agent that claims it reports attempt 2, and a late
// report of attempt 1 is refused as from a terminal task. Any other phase
// is a 409 saying why, in one line.
func TestRetryRequeuesARecoverableFailedTask(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	status := func(err error) int {
		var ae *controlplane.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}

	task := e.submit("rotate the key", "any")
	if _, err := e.client.RetryTask(ctx, task.ID); status(err) != http.StatusConflict || !strings.Contains(err.Error(), "is queued: it has not ended") {
		t.Fatalf("retry of a queued task: %v, want 409 saying it has not ended", err)
	}
	c := e.claim("agent-1", "available", 1)[0]
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}
	failed := a
	failed.Status, failed.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	failed.Error = &state.Error{Code: state.CodeNetwork, Message: "reset"}
	failed.Retry = &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	id := task.ID
	if got := statuses(e.send("agent-1",
		ev(id+":phase:executor_starting", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":attempt:1", state.EventAttempt, c, a),
		ev(id+":attempt:2", state.EventAttempt, c, failed),
		ev(id+":phase:recoverable_failed", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseRecoverableFailed, Reason: "gate"}),
	)); got != "accepted accepted accepted accepted" {
		t.Fatalf("run of attempt 1: %s", got)
	}

	// Two hours later a person decides.
	clk.advance(2 * time.Hour)
	v, err := e.client.RetryTask(ctx, id)
	if err != nil || v.Phase != state.PhaseQueued || len(v.Attempts) != 1 || v.PersonRetry == nil || v.PersonRetry.After != 1 {
		t.Fatalf("retry: %v %+v", err, v)
	}
	if _, err := e.client.RetryTask(ctx, id); status(err) != http.StatusConflict {
		t.Fatalf("retry of a task already queued again: %v, want 409", err)
	}
	// The completion of attempt 1, late: made before the retry.
	late := ev(id+":complete", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseRecoverableFailed, Attempts: []state.Attempt{failed}})
	if r := e.send("agent-1", late)[0]; r.Status != api.StatusRejected || r.Reason != api.ReasonTerminal {
		t.Fatalf("a late report of attempt 1: %+v, want rejected terminal", r)
	}
	// Queued two hours after it was made, it is claimed, not expired.
	c2 := e.claim("agent-2", "available", 1)
	if len(c2) != 1 || c2[0].Task.ID != id || len(c2[0].Task.Attempts) != 1 || !c2[0].Task.PersonRetryDue() {
		t.Fatalf("claim after the retry: %+v", c2)
	}
	a2 := state.Attempt{AttemptID: "a2", Number: 2, Status: state.AttemptRunning, StartedAt: clk.Now(), RetriedByPerson: true}
	done := a2
	done.Status, done.CompletedAt = state.AttemptCompleted, clk.Now()
	at2 := func(key string, kind state.EventKind, payload any) api.Event {
		e := ev(key, kind, c2[0], payload)
		e.Attempt = 2
		return e
	}
	if got := statuses(e.send("agent-2",
		at2(id+":2:phase:executor_starting", state.EventPhase, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		at2(id+":2:attempt:1", state.EventAttempt, a2),
		at2(id+":2:attempt:2", state.EventAttempt, done),
		at2(id+":2:phase:completed", state.EventPhase, state.PhaseEvent{Phase: state.PhaseCompleted}),
		at2(id+":2:complete", state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "rotated", Attempts: []state.Attempt{failed, done}}),
	)); got != "accepted accepted accepted accepted accepted" {
		t.Fatalf("run of attempt 2: %s", got)
	}
	v, err = e.client.Task(ctx, id)
	if err != nil || v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || !v.Attempts[1].RetriedByPerson || v.Result == nil || v.Result.Summary != "rotated" {
		t.Fatalf("after attempt 2: %v %+v", err, v)
	}
	_, err = e.client.RetryTask(ctx, id)
	if status(err) != http.StatusConflict || !strings.Contains(err.Error(), "is completed: only a recoverable_failed task can be retried") {
		t.Fatalf("retry of a completed task: %v", err)
	}
	if _, err := e.client.RetryTask(ctx, "t-nope"); status(err) != http.StatusNotFound {
		t.Fatalf("retry of an unknown task: %v, want 404", err)
	}

	// The retry is kept across a restart.
	e2 := e.restart(clk)
	v, err = e2.client.Task(ctx, id)
	if err != nil || len(v.Attempts) != 2 || v.PersonRetry == nil {
		b, _ := json.Marshal(v)
		t.Fatalf("after a restart: %v %s", err, b)
	}
}
