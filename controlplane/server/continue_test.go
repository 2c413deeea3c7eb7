package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// runAndEnd has agent run a new task's first attempt and end it in phase
// end; the attempt says where the CLI keeps its session when session is
// set. It returns the task's id and its claim.
func (e *env) runAndEnd(agent string, end state.Phase, session bool) (string, api.Claimed) {
	e.t.Helper()
	task := e.submit("refactor the parser", "any")
	c := e.claim(agent, "available", 1)[0]
	id := task.ID
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0, SessionID: "sess-1"}
	if session {
		a.SessionPath = "/home/agent/.codex/sessions/rollout-1.jsonl"
	}
	ended := a
	ended.Status, ended.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	ended.Error = &state.Error{Code: state.CodeAgentRestart, Message: "the agent restarted"}
	switch end {
	case state.PhaseCompleted:
		ended.Status, ended.Error = state.AttemptCompleted, nil
	case state.PhaseCancelled:
		ended.Status, ended.Error = state.AttemptCancelled, &state.Error{Code: state.CodeCancelled}
	}
	evs := []api.Event{
		ev(id+":phase:executor_starting", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":attempt:1", state.EventAttempt, c, a),
		ev(id+":phase:turn_started", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
	}
	if end.Terminal() {
		evs = append(evs,
			ev(id+":attempt:2", state.EventAttempt, c, ended),
			ev(id+":phase:"+string(end), state.EventPhase, c, state.PhaseEvent{Phase: end}),
			ev(id+":complete", state.EventComplete, c, state.CompleteEvent{Status: end, Attempts: []state.Attempt{ended}}))
	}
	for _, r := range e.send(agent, evs...) {
		if r.Status != api.StatusAccepted {
			e.t.Fatalf("running task %s to %s: %+v", id, end, r)
		}
	}
	return id, c
}

// A person may continue a task that ended failed, recoverable_failed,
// timed_out or cancelled with a session to resume; anything else is a 409
// that says why, in one line.
func TestContinueOfEachPhase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		end     state.Phase
		session bool
		refused string // "" when allowed
	}{
		{state.PhaseFailed, true, ""},
		{state.PhaseRecoverableFailed, true, ""},
		{state.PhaseTimedOut, true, ""},
		{state.PhaseCancelled, true, ""},
		{state.PhaseCompleted, true, "is completed: it completed; there is nothing to continue"},
		{state.PhaseTurnStarted, true, "is turn_started: it has not ended"},
		{state.PhaseFailed, false, "is failed: no attempt has a session its executor can resume"},
		{state.PhaseQueued, false, "is queued: it has not ended"},
	} {
		t.Run(fmt.Sprintf("%s session %v", c.end, c.session), func(t *testing.T) {
			e := newEnv(t, t.TempDir(), &clock{now: t0})
			ctx := context.Background()
			var id string
			if c.end == state.PhaseQueued {
				id = e.submit("wait", "any").ID
			} else {
				id, _ = e.runAndEnd("agent-1", c.end, c.session)
			}
			before, _ := e.client.Task(ctx, id)
			v, err := e.client.ContinueTask(ctx, id)
			if c.refused != "" {
				if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), c.refused) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("continue: %v, want one line of 409 saying %q", err, c.refused)
				}
				if after, _ := e.client.Task(ctx, id); after.Phase != before.Phase || after.PersonRetry != nil {
					t.Fatalf("a refused continue changed the task: %s, %+v", after.Phase, after.PersonRetry)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := v.PersonRetry
			if v.Phase != state.PhaseQueued || r == nil || !r.Continue || r.Agent != "agent-1" || r.After != 1 || len(v.Attempts) != 1 {
				t.Fatalf("continued: %s %+v", v.Phase, r)
			}
			if _, err := e.client.ContinueTask(ctx, id); statusOf(err) != http.StatusConflict {
				t.Fatalf("continue of a task queued again: %v, want 409", err)
			}
		})
	}
}

// A continued task goes only to the agent that keeps its session: another
// agent's claim skips it, the keeper's gets it, and a late report of the
// attempt before the continue is refused as from a terminal task. The
// continue is kept across a restart.
func TestOnlyTheKeepingAgentClaimsAContinuedTask(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	id, c := e.runAndEnd("agent-1", state.PhaseFailed, true)
	clk.advance(time.Minute)
	if _, err := e.client.ContinueTask(ctx, id); err != nil {
		t.Fatal(err)
	}
	e = e.restart(clk)
	late := ev(id+":log:late", state.EventLog, c, state.LogEvent{Stream: state.LogStdout, Lines: []string{"late"}})
	if r := e.send("agent-1", late)[0]; r.Status != api.StatusRejected || r.Reason != api.ReasonTerminal {
		t.Fatalf("a late report of attempt 1: %+v, want rejected terminal", r)
	}
	if got := e.claim("agent-2", "available", 5); len(got) != 0 {
		t.Fatalf("agent-2 claimed %s, continued for agent-1", got[0].Task.ID)
	}
	got := e.claim("agent-1", "available", 5)
	if len(got) != 1 || got[0].Task.ID != id || !got[0].Task.PersonRetryDue() || !got[0].Task.PersonRetry.Continue {
		t.Fatalf("agent-1's claim: %+v", got)
	}
	// The keeper opens attempt 2, continuing attempt 1's session; the task
	// is then any agent's to take up again, should it go back to the queue.
	a2 := state.Attempt{AttemptID: "a2", Number: 2, Status: state.AttemptRunning, StartedAt: clk.Now(), RetriedByPerson: true, Continues: 1, SessionID: "sess-1"}
	e2 := ev(id+":2:attempt:1", state.EventAttempt, got[0], a2)
	e2.Attempt = 2
	if r := e.send("agent-1", e2)[0]; r.Status != api.StatusAccepted {
		t.Fatalf("attempt 2: %+v", r)
	}
	v, _ := e.client.Task(ctx, id)
	if len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 || !v.Task().MayClaim("agent-2") {
		t.Fatalf("after attempt 2 began: %+v", v.Attempts)
	}
}

// A continued task whose agent never comes back waits in the queue like
// any other, and the queued limit, counted from the person's continue,
// expires it; an expired task cannot be continued again.
func TestAContinuedTaskWhoseAgentIsGoneExpires(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	id, _ := e.runAndEnd("agent-1", state.PhaseTimedOut, true)
	clk.advance(3 * time.Hour)
	if _, err := e.client.ContinueTask(ctx, id); err != nil {
		t.Fatal(err)
	}
	clk.advance(30 * time.Minute)
	if got := e.claim("agent-2", "available", 1); len(got) != 0 {
		t.Fatalf("agent-2 claimed it")
	}
	if v, _ := e.client.Task(ctx, id); v.Phase != state.PhaseQueued {
		t.Fatalf("half an hour after the continue: %s, want queued", v.Phase)
	}
	clk.advance(31 * time.Minute)
	v, _ := e.client.Task(ctx, id)
	if v.Phase != state.PhaseExpired {
		t.Fatalf("61 minutes after the continue: %s, want expired", v.Phase)
	}
	if _, err := e.client.ContinueTask(ctx, id); statusOf(err) != http.StatusConflict {
		t.Fatalf("continue of an expired task: %v, want 409", err)
	}
}

// A continued task cancelled before its agent took it up can be continued
// again, for the same agent.
func TestContinueAfterACancelledContinue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	id, _ := e.runAndEnd("agent-1", state.PhaseFailed, true)
	if _, err := e.client.ContinueTask(ctx, id); err != nil {
		t.Fatal(err)
	}
	if v, err := e.client.CancelTask(ctx, id); err != nil || v.Phase != state.PhaseCancelled {
		t.Fatalf("cancel: %v %s", err, v.Phase)
	}
	v, err := e.client.ContinueTask(ctx, id)
	if err != nil || v.PersonRetry == nil || v.PersonRetry.Agent != "agent-1" {
		t.Fatalf("continue again: %v %+v", err, v.PersonRetry)
	}
}

// The agent that keeps a session is the one whose lease the task last
// had; without one, or for a session from before a person's replay (which
// another agent may have run), none is known.
func TestSessionKeeper(t *testing.T) {
	t.Parallel()
	session := func(n int) state.Attempt { return state.Attempt{Number: n, SessionID: "s", SessionPath: "/p"} }
	for _, c := range []struct {
		name string
		task state.Task
		want string // "" for none known
	}{
		{"the last lease's agent", state.Task{Lease: &state.Lease{AgentID: "a"}, Attempts: []state.Attempt{session(1)}}, "a"},
		{"no lease", state.Task{Attempts: []state.Attempt{session(1)}}, ""},
		{"a continue cancelled before it was claimed", state.Task{Attempts: []state.Attempt{session(1)},
			PersonRetry: &state.PersonRetry{After: 1, Continue: true, Agent: "a"}}, "a"},
		{"a session before a replay", state.Task{Lease: &state.Lease{AgentID: "b"}, Attempts: []state.Attempt{session(1), {Number: 2}},
			PersonRetry: &state.PersonRetry{After: 1}}, ""},
		{"a session after a replay", state.Task{Lease: &state.Lease{AgentID: "b"}, Attempts: []state.Attempt{{Number: 1}, session(2)},
			PersonRetry: &state.PersonRetry{After: 1}}, "b"},
		{"a session continued before", state.Task{Lease: &state.Lease{AgentID: "a"}, Attempts: []state.Attempt{session(1), {Number: 2, Continues: 1}},
			PersonRetry: &state.PersonRetry{After: 1, Continue: true, Agent: "a"}}, "a"},
	} {
		got, err := sessionKeeper(&c.task, c.task.SessionAttempt())
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
