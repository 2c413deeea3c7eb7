package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// running puts a claimed task in turn_started, as its agent reports it.
func (e *env) running(agent string, c api.Claimed) {
	e.t.Helper()
	evs := runToCompletion(c)[:3] // executor_starting, attempt 1, turn_started
	if r := statuses(e.send(agent, evs...)); strings.Contains(r, "rejected") {
		e.t.Fatalf("starting %s: %s", c.Task.ID, r)
	}
}

// ordersClaim is a claim with no room, held for the orders of the tasks
// agent runs.
func ordersClaim(agent string, running ...string) api.ClaimRequest {
	return api.ClaimRequest{AgentID: agent, HealthGrade: health.Available, WaitMS: time.Hour.Milliseconds(), Running: running}
}

// A claim that lists the tasks its agent runs is held, with no room, for
// their orders alone, and answered as soon as one is to stop: a person's
// cancel, a parent task's, the watchdog's ending, each saying the phase
// the task ends in and who ended it. A task no order concerns keeps it
// waiting.
func TestOrdersComeOnTheClaimHeldOpen(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()

	e.submit("a person cancels it", "any")
	clk.advance(time.Second)
	e.submit("a parent", "any")
	mine := e.claimOne("ag")
	e.running("ag", mine)
	other := e.claimOne("ag") // claimed too, not listed: not the claim's concern
	held := e.claimAsync(ctx, e.agent("ag"), ordersClaim("ag", mine.Task.ID))
	e.untilWaiting(1)
	clk.advance(time.Minute)
	if _, err := e.client.CancelTask(ctx, mine.Task.ID); err != nil {
		t.Fatal(err)
	}
	a := <-held
	want := api.CancelOrder{TaskID: mine.Task.ID, Phase: state.PhaseCancelled, Reason: state.CancelledByPerson, At: t0.Add(time.Minute + time.Second)}
	if a.err != nil || len(a.resp.Tasks) != 0 || len(a.resp.CancelOrders) != 1 || a.resp.CancelOrders[0] != want {
		t.Fatalf("the held claim: %+v %v; want the order %+v", a.resp, a.err, want)
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitOrdered] != 1 {
		t.Errorf("waits ended %v, want one ordered", ends)
	}

	// A parent task's cancel of its subtask says so.
	child := e.subtask(other.TaskToken, other.Task.ID, "a child", nil)
	kid := e.claimOne("ag2")
	if kid.Task.ID != child.ID {
		t.Fatalf("claimed %s, want the child %s", kid.Task.ID, child.ID)
	}
	e.running("ag2", kid)
	held = e.claimAsync(ctx, e.agent("ag2"), ordersClaim("ag2", kid.Task.ID))
	e.untilWaiting(1)
	if _, err := e.as(other.TaskToken).CancelTask(ctx, kid.Task.ID); err != nil {
		t.Fatal(err)
	}
	if a = <-held; len(a.resp.CancelOrders) != 1 || a.resp.CancelOrders[0].Reason != "cancelled by its parent task "+other.Task.ID {
		t.Fatalf("the child's agent heard %+v %v", a.resp, a.err)
	}

	// The watchdog's ending comes with its phase and reason.
	e.submit("it stalls", "any")
	stalled := e.claimOne("ag3")
	e.running("ag3", stalled)
	held = e.claimAsync(ctx, e.agent("ag3"), ordersClaim("ag3", stalled.Task.ID))
	e.untilWaiting(1)
	clk.advance(state.DefaultStallLimit + time.Minute)
	e.srv.watchdog.pass(ctx)
	a = <-held
	v, err := e.client.Task(ctx, stalled.Task.ID)
	if err != nil || v.Phase != state.PhaseTimedOut {
		t.Fatalf("the stalled task: %s %v", v.Phase, err)
	}
	if len(a.resp.CancelOrders) != 1 || a.resp.CancelOrders[0].Phase != state.PhaseTimedOut || a.resp.CancelOrders[0].Reason != v.PhaseReason ||
		!strings.HasPrefix(v.PhaseReason, "the control plane's watchdog: no progress for") {
		t.Fatalf("the stalled task's agent heard %+v %v; the control plane says %q", a.resp, a.err, v.PhaseReason)
	}
}

// A completion that crosses a cancel resolves one way: the agent ended
// the task first, so it stays completed, the cancel is noted (the
// timeline says it came after), and the answer to the reports tells the
// agent, which notes it alike.
func TestACompletionThatCrossesACancelStands(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	e.submit("it finishes", "any")
	c := e.claimOne("ag")
	e.running("ag", c)
	clk.advance(time.Second)
	if _, err := e.client.CancelTask(ctx, c.Task.ID); err != nil {
		t.Fatal(err)
	}
	resp, err := e.agent("ag").PostEvents(ctx, "ag", runToCompletion(c)[3:])
	if err != nil || strings.Contains(statuses(resp.Results), "rejected") {
		t.Fatalf("the completion: %v %+v", err, resp.Results)
	}
	want := api.CancelOrder{TaskID: c.Task.ID, Phase: state.PhaseCancelled, Reason: state.CancelledByPerson, At: t0.Add(time.Second)}
	if len(resp.CancelOrders) != 1 || resp.CancelOrders[0] != want {
		t.Errorf("the answer's orders %+v, want %+v", resp.CancelOrders, want)
	}
	v, err := e.client.Task(ctx, c.Task.ID)
	if err != nil || v.Phase != state.PhaseCompleted || !v.CancelRequested {
		t.Fatalf("the task: %s, cancel %v (%v)", v.Phase, v.CancelRequested, err)
	}
	tl := state.Timeline(v.Task(), t0)
	if last := tl[len(tl)-1]; !strings.HasSuffix(last, "cancel asked at 12:00:01 UTC came after it had ended completed: the ending stands") {
		t.Errorf("the timeline's last line %q", last)
	}
}
