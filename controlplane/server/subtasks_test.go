package server

// Subtasks (issue 27): the task principal's powers and refusals, its
// token's life, the delegation rules and the cascade of a cancel, each
// over real HTTP on loopback.

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// claimOne claims the oldest queued task as agent ag and returns its
// grant, with its task token.
func (e *env) claimOne(ag string) api.Claimed {
	e.t.Helper()
	got := e.claim(ag, "available", 1)
	if len(got) != 1 {
		e.t.Fatalf("claim: %d tasks, want 1", len(got))
	}
	if !strings.HasPrefix(got[0].TaskToken, api.TaskTokenPrefix) {
		e.t.Fatalf("the grant carries no task token: %q", got[0].TaskToken)
	}
	return got[0]
}

// subtask submits a subtask of parent with tok; it must be accepted.
func (e *env) subtask(tok, parent, prompt string, labels map[string]string) api.TaskView {
	e.t.Helper()
	v, err := e.as(tok).CreateSubtask(context.Background(), parent, api.CreateTaskRequest{Prompt: prompt, Labels: labels})
	if err != nil {
		e.t.Fatalf("subtask of %s: %v", parent, err)
	}
	return v
}

// A task token submits, lists, reads and cancels its own task's subtasks;
// everything else is 403, with a reason naming what it may do.
func TestTaskTokenActsOnItsOwnSubtasksOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.submit("the parent", "any")
	e.clk.advance(time.Second)
	e.submit("another task", "any")
	p := e.claimOne("ag")
	q := e.claimOne("ag")
	pc := e.as(p.TaskToken)

	who, err := pc.WhoAmI(ctx)
	if err != nil || who.Principal != api.PrincipalTask || who.TaskID != p.Task.ID {
		t.Fatalf("whoami with a task token: %+v, %v", who, err)
	}
	c1 := e.subtask(p.TaskToken, p.Task.ID, "child one", nil)
	if c1.Parent != p.Task.ID || c1.Depth != 1 || c1.Phase != state.PhaseQueued {
		t.Fatalf("the child: parent %q depth %d phase %s", c1.Parent, c1.Depth, c1.Phase)
	}
	c2 := e.subtask(p.TaskToken, p.Task.ID, "child two", nil)
	qChild := e.subtask(q.TaskToken, q.Task.ID, "the other's child", nil)

	list, err := pc.Subtasks(ctx, p.Task.ID)
	if err != nil || len(list) != 2 || list[0].ID != c1.ID || list[1].ID != c2.ID {
		t.Fatalf("subtasks: %v, %v", list, err)
	}
	if v, err := pc.Task(ctx, c1.ID); err != nil || v.Prompt != "child one" {
		t.Fatalf("read a child: %v", err)
	}
	if _, err := pc.TaskEvents(ctx, c1.ID); err != nil {
		t.Fatalf("a child's events: %v", err)
	}
	if _, err := pc.Task(ctx, p.Task.ID); err != nil {
		t.Fatalf("read its own task: %v", err)
	}
	if v, err := pc.CancelTask(ctx, c2.ID); err != nil || v.Phase != state.PhaseCancelled {
		t.Fatalf("cancel a queued child: %+v, %v", v.Phase, err)
	}
	if v, err := e.client.Task(ctx, p.Task.ID); err != nil || len(v.Children) != 2 {
		t.Fatalf("the parent as a person sees it: children %v, %v", v.Children, err)
	}

	for _, attack := range []struct {
		name string
		do   func() error
	}{
		{"submit a subtask of another task", func() error {
			_, err := pc.CreateSubtask(ctx, q.Task.ID, api.CreateTaskRequest{Prompt: "x"})
			return err
		}},
		{"list another task's subtasks", func() error { _, err := pc.Subtasks(ctx, q.Task.ID); return err }},
		{"read another task", func() error { _, err := pc.Task(ctx, q.Task.ID); return err }},
		{"read another task's subtask", func() error { _, err := pc.Task(ctx, qChild.ID); return err }},
		{"read another task's events", func() error { _, err := pc.TaskEvents(ctx, q.Task.ID); return err }},
		{"cancel another task's subtask", func() error { _, err := pc.CancelTask(ctx, qChild.ID); return err }},
		{"cancel another task", func() error { _, err := pc.CancelTask(ctx, q.Task.ID); return err }},
		{"cancel its own task", func() error { _, err := pc.CancelTask(ctx, p.Task.ID); return err }},
		{"submit a top-level task", func() error { _, err := pc.CreateTask(ctx, api.CreateTaskRequest{Prompt: "x"}); return err }},
		{"list every task", func() error { _, err := pc.Tasks(ctx); return err }},
		{"retry a task", func() error { _, err := pc.RetryTask(ctx, c2.ID); return err }},
		{"continue a task", func() error { _, err := pc.ContinueTask(ctx, c2.ID); return err }},
		{"answer an approval", func() error { _, err := pc.Reply(ctx, p.Task.ID, "", api.DecisionAccept); return err }},
		{"list the agents", func() error { _, err := pc.Agents(ctx); return err }},
		{"revoke an agent", func() error { _, err := pc.RevokeAgent(ctx, "ag"); return err }},
		{"heartbeat as an agent", func() error {
			return e.call(p.TaskToken, http.MethodPost, "/v1/agents/heartbeat", api.HeartbeatRequest{AgentID: "ag"}, nil)
		}},
		{"claim as an agent", func() error {
			return e.call(p.TaskToken, http.MethodPost, "/v1/tasks/claim", api.ClaimRequest{AgentID: "ag", Max: 1, HealthGrade: "available"}, nil)
		}},
		{"send events as an agent", func() error {
			return e.call(p.TaskToken, http.MethodPost, "/v1/events", api.EventsRequest{AgentID: "ag"}, nil)
		}},
		{"register an agent", func() error {
			return e.call(p.TaskToken, http.MethodPost, "/v1/agents/register", api.RegisterRequest{AgentID: "new"}, nil)
		}},
	} {
		err := attack.do()
		if statusOf(err) != http.StatusForbidden {
			t.Errorf("a task token: %s: %v, want 403", attack.name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "task") || strings.Contains(msg, p.TaskToken) {
			t.Errorf("a task token: %s: the refusal %q should say why, without the token", attack.name, msg)
		}
	}
	// An agent's token is no task token either.
	if _, err := e.as(e.tokenOfAgent("ag")).CreateSubtask(ctx, p.Task.ID, api.CreateTaskRequest{Prompt: "x"}); statusOf(err) != http.StatusForbidden {
		t.Errorf("an agent's token submits a subtask: %v, want 403", err)
	}
}

// A task token is good while its task holds the lease it was granted
// with and has not ended: a forged one, one whose task was released and
// granted again, and one whose task ended are 401.
func TestTaskTokenDiesWithItsTaskOrLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.submit("the parent", "any")
	p := e.claimOne("ag")
	forged := p.TaskToken[:len(p.TaskToken)-4] + "0000"
	if forged == p.TaskToken {
		forged = p.TaskToken[:len(p.TaskToken)-4] + "1111"
	}
	if _, err := e.as(forged).WhoAmI(ctx); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("a forged task token: %v, want 401", err)
	}
	if _, err := e.as(api.TaskTokenPrefix + p.Task.ID + "." + "lease-000000000000." + strings.Repeat("0", 64)).WhoAmI(ctx); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("a made-up task token: %v, want 401", err)
	}

	must(t, e.agent("ag").Release(ctx, "ag", []string{p.Task.ID}))
	_, err := e.as(p.TaskToken).Subtasks(ctx, p.Task.ID)
	if statusOf(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "no longer holds the lease") {
		t.Errorf("the token of a released task: %v, want 401 naming the lease", err)
	}
	again := e.claimOne("ag")
	if again.TaskToken == p.TaskToken {
		t.Fatal("a new grant carries the old token")
	}
	if _, err := e.as(p.TaskToken).Subtasks(ctx, p.Task.ID); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("the token of the lease before: %v, want 401", err)
	}
	e.subtask(again.TaskToken, p.Task.ID, "a child", nil)

	if r := statuses(e.send("ag", runToCompletion(again)...)); strings.Contains(r, "rejected") {
		t.Fatalf("completing the parent: %s", r)
	}
	_, err = e.as(again.TaskToken).CreateSubtask(ctx, p.Task.ID, api.CreateTaskRequest{Prompt: "late"})
	if statusOf(err) != http.StatusUnauthorized || !strings.Contains(err.Error(), "has ended") || strings.Contains(err.Error(), again.TaskToken) {
		t.Errorf("the token of an ended task: %v, want 401 saying it ended", err)
	}
}

// The delegation rules: the default's depth and children limits, and
// rules that match on the parent's and the child's labels.
func TestDelegationRules(t *testing.T) {
	t.Parallel()
	t.Run("default depth", func(t *testing.T) {
		e := newEnv(t, t.TempDir(), &clock{now: t0})
		e.submit("depth 0", "any")
		tok := e.claimOne("ag").TaskToken
		for depth := 1; depth <= 2; depth++ {
			parent := e.claimedID(tok)
			e.subtask(tok, parent, "a child", nil)
			tok = e.claimOne("ag").TaskToken
		}
		_, err := e.as(tok).CreateSubtask(context.Background(), e.claimedID(tok), api.CreateTaskRequest{Prompt: "too deep"})
		if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: depth 3 is past max-depth 2") {
			t.Errorf("depth 3: %v", err)
		}
	})
	t.Run("max children", func(t *testing.T) {
		e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{Delegate: []DelegateRule{{MaxChildren: 2}}})
		e.submit("the parent", "any")
		p := e.claimOne("ag")
		e.subtask(p.TaskToken, p.Task.ID, "one", nil)
		e.subtask(p.TaskToken, p.Task.ID, "two", nil)
		_, err := e.as(p.TaskToken).CreateSubtask(context.Background(), p.Task.ID, api.CreateTaskRequest{Prompt: "three"})
		if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "max-children is 2") {
			t.Errorf("a third child: %v", err)
		}
	})
	t.Run("labels", func(t *testing.T) {
		e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{Delegate: []DelegateRule{
			{Parent: map[string]string{"kind": "planner"}, Child: map[string]string{"kind": "coder"}, MaxDepth: 1},
		}})
		ctx := context.Background()
		if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "plan", Labels: map[string]string{"kind": "planner"}}); err != nil {
			t.Fatal(err)
		}
		e.submit("unlabelled", "any")
		got := e.claim("ag", "available", 2)
		if len(got) != 2 {
			t.Fatalf("claimed %d tasks, want 2", len(got))
		}
		planner, other := got[0], got[1]
		if planner.Task.Labels["kind"] != "planner" {
			planner, other = other, planner // submitted at the same instant: either may come first
		}
		if want := []state.DelegateTarget{{Child: map[string]string{"kind": "coder"}, MaxDepth: 1, MaxChildren: 8}}; !reflect.DeepEqual(planner.Task.Delegation.To, want) {
			t.Errorf("the planner may delegate to %+v, want %+v", planner.Task.Delegation, want)
		}
		// No rule lets the unlabelled task delegate: a leaf, offered no
		// subtask command (no token); a person may not delegate for it.
		if other.TaskToken != "" || !other.Task.Delegation.Leaf() {
			t.Errorf("a task no rule lets delegate: token %q, delegation %+v; want none, a leaf", other.TaskToken, other.Task.Delegation)
		}
		e.subtask(planner.TaskToken, planner.Task.ID, "code it", map[string]string{"kind": "coder"})
		for _, c := range []struct {
			name   string
			tok    string
			parent string
			labels map[string]string
		}{
			{"a planner to an unlabelled task", planner.TaskToken, planner.Task.ID, nil},
			{"a planner to a reviewer", planner.TaskToken, planner.Task.ID, map[string]string{"kind": "reviewer"}},
			{"an unlabelled task to a coder, by a person", opToken, other.Task.ID, map[string]string{"kind": "coder"}},
		} {
			_, err := e.as(c.tok).CreateSubtask(ctx, c.parent, api.CreateTaskRequest{Prompt: "x", Labels: c.labels})
			if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: no [[delegate]] rule") {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	})
	// With no [[delegate]] table, the default rules go by the parent's
	// agent type (its type label): a general task (no type) delegates to
	// any task, an explorer to none (a leaf, offered no subtask command),
	// any other type to explorers only; the grant and the task's view
	// list what it may delegate to.
	t.Run("default types", func(t *testing.T) {
		e := newEnv(t, t.TempDir(), &clock{now: t0})
		ctx := context.Background()
		byType := map[string]api.Claimed{}
		for _, typ := range []string{"", "coder", "explorer"} {
			req := api.CreateTaskRequest{Prompt: "a " + typ}
			if typ != "" {
				req.Labels = map[string]string{"type": typ}
			}
			if _, err := e.client.CreateTask(ctx, req); err != nil {
				t.Fatal(err)
			}
			got := e.claim("ag", "available", 1)
			if len(got) != 1 {
				t.Fatalf("claimed %d", len(got))
			}
			byType[typ] = got[0]
		}
		general, coder, explorer := byType[""], byType["coder"], byType["explorer"]
		e.subtask(general.TaskToken, general.Task.ID, "anything", map[string]string{"type": "coder"})
		e.subtask(coder.TaskToken, coder.Task.ID, "look around", map[string]string{"type": "explorer"})
		_, err := e.as(coder.TaskToken).CreateSubtask(ctx, coder.Task.ID, api.CreateTaskRequest{Prompt: "plan", Labels: map[string]string{"type": "planner"}})
		if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: a task of type coder may delegate to type=explorer only") {
			t.Errorf("a coder to a planner: %v", err)
		}
		if explorer.TaskToken != "" || !explorer.Task.Delegation.Leaf() {
			t.Errorf("an explorer's grant: token %q, delegation %+v; want no token, a leaf", explorer.TaskToken, explorer.Task.Delegation)
		}
		_, err = e.as(opToken).CreateSubtask(ctx, explorer.Task.ID, api.CreateTaskRequest{Prompt: "x", Labels: map[string]string{"type": "explorer"}})
		if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "is of type explorer, a leaf: it delegates to nothing") {
			t.Errorf("a subtask of an explorer: %v", err)
		}
		for typ, want := range map[string][]string{
			"":         {"any task  depth 1 of 2, 1 of 8 subtasks submitted"},
			"coder":    {"type=explorer  depth 1 of 2, 1 of 8 subtasks submitted"},
			"explorer": {"nothing: its type, explorer, is a leaf; it is offered no subtask command"},
		} {
			v, err := e.client.Task(ctx, byType[typ].Task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := state.DelegationLines(v.Task()); !slices.Equal(got, want) {
				t.Errorf("the view of a %q task lists %q, want %q", typ, got, want)
			}
		}
	})
	t.Run("bad rules", func(t *testing.T) {
		_, err := New(Options{Store: dirStore(t, t.TempDir(), nil), Token: regToken, OperatorTokens: []string{opToken},
			Delegate: []DelegateRule{{Parent: map[string]string{"bad key!": "x"}}}})
		if err == nil || !strings.Contains(err.Error(), "delegate rule 1") {
			t.Errorf("a rule with a bad label: %v", err)
		}
	})
}

// claimedID is the task a task token is for, as whoami says.
func (e *env) claimedID(tok string) string {
	e.t.Helper()
	who, err := e.as(tok).WhoAmI(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return who.TaskID
}

// Cancelling a task cancels every subtask under it that has not ended, in
// the same request: queued ones at once, running ones marked for their
// agents. A parent being cancelled submits no more.
func TestCancelCascadesToSubtasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.submit("the parent", "any")
	p := e.claimOne("ag")
	c1 := e.subtask(p.TaskToken, p.Task.ID, "child one", nil)
	e.clk.advance(time.Second)
	c2 := e.subtask(p.TaskToken, p.Task.ID, "child two", nil)
	running := e.claimOne("ag") // child one
	if running.Task.ID != c1.ID {
		t.Fatalf("claimed %s, want child one %s", running.Task.ID, c1.ID)
	}
	g := e.subtask(running.TaskToken, c1.ID, "grandchild", nil)

	v, err := e.client.CancelTask(ctx, p.Task.ID)
	if err != nil || !v.CancelRequested {
		t.Fatalf("cancel the parent: %+v, %v", v, err)
	}
	for _, c := range []struct {
		id      string
		phase   state.Phase
		request bool
	}{{c1.ID, state.PhaseClaimed, true}, {c2.ID, state.PhaseCancelled, false}, {g.ID, state.PhaseCancelled, false}} {
		got, err := e.client.Task(ctx, c.id)
		if err != nil || got.Phase != c.phase || got.CancelRequested != c.request {
			t.Errorf("task %s after its ancestor's cancel: %s, cancel requested %v (%v); want %s, %v", c.id, got.Phase, got.CancelRequested, err, c.phase, c.request)
		}
		if c.phase == state.PhaseCancelled && !strings.Contains(got.PhaseReason, "cancelled with its parent") {
			t.Errorf("task %s: reason %q", c.id, got.PhaseReason)
		}
	}
	_, err = e.as(p.TaskToken).CreateSubtask(ctx, p.Task.ID, api.CreateTaskRequest{Prompt: "after the cancel"})
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "being cancelled") {
		t.Errorf("a subtask of a task being cancelled: %v, want 409", err)
	}
	if _, err := e.client.CancelTask(ctx, c2.ID); statusOf(err) != http.StatusConflict {
		t.Errorf("cancel a cancelled child: %v, want 409", err)
	}
}

// A parent that ended while its subtasks run: cancelling it cancels them
// (fire and forget leaves no one else to); with none left running, the
// cancel is 409 as for any ended task.
func TestCancelAnEndedParentCancelsItsRunningSubtasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.submit("the parent", "any")
	p := e.claimOne("ag")
	c := e.subtask(p.TaskToken, p.Task.ID, "a child left running", nil)
	e.endAttempt("ag", p, state.PhaseCompleted, "", state.GateAllowed)
	if v, err := e.client.Task(ctx, p.Task.ID); err != nil || v.Phase != state.PhaseCompleted {
		t.Fatalf("the parent: %s, %v; want completed", v.Phase, err)
	}
	v, err := e.client.CancelTask(ctx, p.Task.ID)
	if err != nil || v.Phase != state.PhaseCompleted {
		t.Fatalf("cancel the ended parent: %s, %v; want its subtask cancelled and the parent as it was", v.Phase, err)
	}
	if got, err := e.client.Task(ctx, c.ID); err != nil || got.Phase != state.PhaseCancelled || !strings.Contains(got.PhaseReason, "cancelled with its parent") {
		t.Errorf("the child: %s (%s), %v; want cancelled with its parent", got.Phase, got.PhaseReason, err)
	}
	if _, err := e.client.CancelTask(ctx, p.Task.ID); statusOf(err) != http.StatusConflict {
		t.Errorf("cancel again, nothing left running: %v, want 409", err)
	}
}

// A task's token does not reach past its task: a subtask works on the
// parent's repository (another, or a repo= requirement naming another, is
// refused), and takes at most the parent's attempts and budgets.
func TestSubtasksStayWithinTheirParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.heartbeatWith("ag", "site", "secrets")
	if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "the parent", Repo: "site", MaxAttempts: 2,
		MaxTokens: 1000, MaxTime: state.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p := e.claimWith("ag", "site", "secrets")
	if len(p) != 1 {
		t.Fatalf("claimed %d", len(p))
	}
	pc := e.as(p[0].TaskToken)
	for _, req := range []api.CreateTaskRequest{
		{Prompt: "another repo", Repo: "secrets"},
		{Prompt: "another repo by requirement", Requires: []state.Requirement{"repo=secrets"}},
	} {
		_, err := pc.CreateSubtask(ctx, p[0].Task.ID, req)
		if statusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "delegation refused: a subtask works on its parent's repository") {
			t.Errorf("%s: %v, want 403 delegation refused", req.Prompt, err)
		}
	}
	c, err := pc.CreateSubtask(ctx, p[0].Task.ID, api.CreateTaskRequest{Prompt: "asks for more", MaxAttempts: 9, MaxTokens: 50000})
	if err != nil {
		t.Fatal(err)
	}
	if c.Repo != "site" || c.MaxAttempts != 2 || c.MaxTokens != 1000 || c.MaxTime.D() != time.Hour {
		t.Errorf("the subtask: repo %q, attempts %d, tokens %d, time %s; want site, 2, 1000, 1h", c.Repo, c.MaxAttempts, c.MaxTokens, c.MaxTime.D())
	}
	small, err := pc.CreateSubtask(ctx, p[0].Task.ID, api.CreateTaskRequest{Prompt: "asks for less", MaxTokens: 10})
	if err != nil || small.MaxTokens != 10 {
		t.Errorf("a subtask asking less than its parent has: %d tokens, %v; want 10", small.MaxTokens, err)
	}
}
