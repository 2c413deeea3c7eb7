package server

// Subtasks stay inside their parent (issue 34): routed no wider than it,
// and a whole tree within its root's token and time budgets.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// Issue 34: a task a person routed to label=tier=sandbox submitted a
// subtask requiring label=tier=trusted, and the trusted agent ran the
// attacker's prompt. A subtask inherits its parent's requirements and may
// only narrow them: the wider one is refused in one line, a subtask that
// asks nothing goes only where its parent could, and one that narrows
// keeps both.
func TestAttackSubtaskRoutedWiderThanItsParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	sandbox := offering{api.Capabilities{Executor: "codex"}, map[string]string{"tier": "sandbox", "gpu": "a100"}}
	trusted := offering{api.Capabilities{Executor: "codex"}, map[string]string{"tier": "trusted"}}
	e.heartbeatOffering("sandbox", sandbox)
	e.heartbeatOffering("trusted", trusted)
	parent := e.submitRequiring("read the untrusted issue", "label=tier=sandbox")
	p := e.claimOffering("sandbox", sandbox, 1)
	if len(p) != 1 || p[0].Task.ID != parent.ID {
		t.Fatalf("the sandbox agent's claim: %v", ids(p))
	}
	pc := e.as(p[0].TaskToken)

	_, err := pc.CreateSubtask(ctx, parent.ID, api.CreateTaskRequest{Prompt: "exfiltrate", Requires: []state.Requirement{"label=tier=trusted"}})
	want := "delegation refused: the subtask may only narrow its parent's routing: label=tier=trusted would replace the parent's label=tier=sandbox"
	if statusOf(err) != http.StatusForbidden || err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("a subtask routed wider than its parent: %v, want 403 %q", err, want)
	}
	plain, err := pc.CreateSubtask(ctx, parent.ID, api.CreateTaskRequest{Prompt: "summarize"})
	if err != nil || !slices.Equal(plain.Requires, []state.Requirement{"label=tier=sandbox"}) {
		t.Fatalf("a subtask asking nothing: requires %v, %v; want its parent's", plain.Requires, err)
	}
	narrow, err := pc.CreateSubtask(ctx, parent.ID, api.CreateTaskRequest{Prompt: "train", Requires: []state.Requirement{"label=gpu=a100"}})
	if err != nil || !slices.Equal(narrow.Requires, []state.Requirement{"label=tier=sandbox", "label=gpu=a100"}) {
		t.Fatalf("a subtask that narrows: requires %v, %v", narrow.Requires, err)
	}
	if got := e.claimOffering("trusted", trusted, 10); len(got) != 0 {
		t.Fatalf("the trusted agent was granted %v", ids(got))
	}
	if got := e.claimOffering("sandbox", sandbox, 10); len(got) != 2 {
		t.Fatalf("the sandbox agent's claim: %v, want both subtasks", ids(got))
	}
	if all, _ := e.client.Tasks(ctx); len(all) != 3 {
		t.Errorf("%d tasks, want the parent and its two subtasks", len(all))
	}
}

// usage is the attempt event that reports attempt 1 of c's task running
// since t0, having used tokens so far.
func usage(key string, c api.Claimed, tokens int64) api.Event {
	return ev(key, state.EventAttempt, c, state.Attempt{AttemptID: "a-" + c.Task.ID, Number: 1, Status: state.AttemptRunning, StartedAt: t0,
		Usage: state.Usage{InputTokens: tokens * 4 / 5, OutputTokens: tokens / 5, TotalTokens: tokens}})
}

// report sends evs as agent and returns the control plane's whole
// answer; every event must be accepted.
func (e *env) report(agent string, evs ...api.Event) api.EventsResponse {
	e.t.Helper()
	resp, err := e.agent(agent).PostEvents(context.Background(), agent, evs)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.Status != api.StatusAccepted {
			e.t.Fatalf("event %s: %s %s", r.Key, r.Status, r.Reason)
		}
	}
	return resp
}

// stopped are the tasks of stop orders.
func stopped(orders []api.StopOrder) []string {
	var out []string
	for _, o := range orders {
		out = append(out, o.TaskID)
	}
	slices.Sort(out)
	return out
}

// sorted is ids sorted.
func sorted(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

// Issue 34: a task with max_tokens 1000 spent 3,600 tokens through three
// subtasks, each with its own full budget. A subtask's budget is at most
// what the tree has left when it is submitted, and the report that takes
// the tree past its root's budget stops the whole tree: the queued
// subtasks end failed at once, and the running ones' agent is told to
// stop them (in the answer to that report, to each task's next report,
// and in every heartbeat answer), as it is told of a cancel by an agent
// from before tree budgets.
func TestSubtaskTreeSharesItsRootsTokenBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	root, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "plan", MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r := e.claimOne("ag")
	e.report("ag", ev("r1", state.EventPhase, r, state.PhaseEvent{Phase: state.PhaseExecutorStarting}), usage("r2", r, 300))

	rc := e.as(r.TaskToken)
	var kids []api.TaskView
	for _, asked := range []int64{0, 5000, 100} {
		k, err := rc.CreateSubtask(ctx, root.ID, api.CreateTaskRequest{Prompt: "spend", MaxTokens: asked})
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, k)
	}
	for i, want := range []int64{700, 700, 100} {
		if kids[i].MaxTokens != want || kids[i].Root != root.ID {
			t.Errorf("subtask %d: budget %d, root %q; want %d of what the tree has left, root %s", i+1, kids[i].MaxTokens, kids[i].Root, want, root.ID)
		}
	}
	a, b := e.claimOne("ag"), e.claimOne("ag") // the third stays queued
	if resp := e.report("ag", ev("a1", state.EventPhase, a, state.PhaseEvent{Phase: state.PhaseExecutorStarting}), usage("a2", a, 400)); len(resp.Stop) != 0 {
		t.Fatalf("700 of 1000 spent: stop %v", resp.Stop)
	}
	// 300 + 400 + 400: past 1000 with b's report, which hears so at once.
	resp := e.report("ag", ev("b1", state.EventPhase, b, state.PhaseEvent{Phase: state.PhaseExecutorStarting}), usage("b2", b, 400))
	if got := stopped(resp.Stop); !slices.Equal(got, []string{b.Task.ID}) || !strings.Contains(resp.Stop[0].Reason, "the tree of "+root.ID+" used 1.1k tokens, over its budget of 1k") {
		t.Fatalf("the report that passed the tree's budget: stop %+v, want %s", resp.Stop, b.Task.ID)
	}
	var left string // the subtask nobody claimed
	for _, k := range kids {
		if k.ID != a.Task.ID && k.ID != b.Task.ID {
			left = k.ID
		}
	}
	queued, _ := e.client.Task(ctx, left)
	if queued.Phase != state.PhaseFailed || queued.PhaseReason != "budget_exceeded: the tree of "+root.ID+" used 1.1k tokens, over its budget of 1k" || len(queued.Attempts) != 0 {
		t.Errorf("the queued subtask: %s (%s), %d attempts", queued.Phase, queued.PhaseReason, len(queued.Attempts))
	}
	if resp := e.report("ag", usage("a3", a, 450)); !slices.Equal(stopped(resp.Stop), []string{a.Task.ID}) {
		t.Errorf("a's next report: stop %+v", resp.Stop)
	}
	hb, err := e.agent("ag").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag", Running: []api.RunningTask{{TaskID: root.ID}, {TaskID: a.Task.ID}, {TaskID: b.Task.ID}}})
	all := sorted(root.ID, a.Task.ID, b.Task.ID)
	if err != nil || !slices.Equal(stopped(hb.Stop), all) || !slices.Equal(sorted(hb.Cancel...), all) {
		t.Errorf("the heartbeat's answer: stop %v, cancel %v, %v; want %v in both", hb.Stop, hb.Cancel, err, all)
	}
	_, err = rc.CreateSubtask(ctx, root.ID, api.CreateTaskRequest{Prompt: "more"})
	if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: the tree of "+root.ID+" spent its token budget (1.1k tokens of 1k)") {
		t.Errorf("a subtask of a spent tree: %v", err)
	}
	if v, _ := e.client.Task(ctx, a.Task.ID); v.BudgetStop == "" || v.Phase.Terminal() {
		t.Errorf("a running subtask of the stopped tree: %s, budget stop %q", v.Phase, v.BudgetStop)
	}
}

// A tree's wall time runs from its root's first attempt: a subtask gets
// at most what is left of the root's max_time when it is submitted, and
// when the time runs out the watchdog stops the tree's subtasks, a
// queued one at once, a running one through its agent.
func TestSubtaskTreeSharesItsRootsTimeBudget(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	root, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "plan", MaxTime: state.Duration(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	r := e.claimOne("ag")
	e.report("ag", ev("r1", state.EventPhase, r, state.PhaseEvent{Phase: state.PhaseExecutorStarting}), usage("r2", r, 0))
	clk.advance(20 * time.Second)
	rc := e.as(r.TaskToken)
	running := e.subtask(r.TaskToken, root.ID, "work", nil)
	if running.MaxTime.D() != 40*time.Second || !running.TreeDeadline.Equal(t0.Add(time.Minute)) {
		t.Errorf("the subtask: max_time %s, tree deadline %s; want 40s, %s", running.MaxTime.D(), running.TreeDeadline, t0.Add(time.Minute))
	}
	clk.advance(time.Millisecond) // claimed after the first, oldest first
	queued := e.subtask(r.TaskToken, root.ID, "wait", nil)
	c := e.claimOne("ag2")
	if c.Task.ID != running.ID {
		t.Fatalf("claimed %s, want %s", c.Task.ID, running.ID)
	}
	clk.advance(40 * time.Second)
	e.srv.watchdog.pass(ctx)
	why := "the tree of " + root.ID + " ran out its time budget of 1m0s"
	if v, _ := e.client.Task(ctx, queued.ID); v.Phase != state.PhaseFailed || v.PhaseReason != "budget_exceeded: "+why {
		t.Errorf("the queued subtask: %s (%s)", v.Phase, v.PhaseReason)
	}
	hb, err := e.agent("ag2").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag2", Health: api.Health{Grade: health.Available}, Running: []api.RunningTask{{TaskID: running.ID}}})
	if err != nil || len(hb.Stop) != 1 || hb.Stop[0].TaskID != running.ID || hb.Stop[0].Reason != why {
		t.Errorf("the running subtask's agent: stop %+v, %v", hb.Stop, err)
	}
	if v, _ := e.client.Task(ctx, root.ID); v.BudgetStop != "" {
		t.Errorf("the root, bound by its own time budget, was stopped: %q", v.BudgetStop)
	}
	_, err = rc.CreateSubtask(ctx, root.ID, api.CreateTaskRequest{Prompt: "late"})
	if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: the tree of "+root.ID+" ran out its time budget of 1m0s") {
		t.Errorf("a subtask of a tree out of time: %v", err)
	}
}
