package server

// Attacks on the trust boundaries between people, agents and the
// registration secret (issue 21), each made over real HTTP on loopback.
// Each of them worked before principals were split.

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// as is a client that sends tok as it is: no registration, no retry.
func (e *env) as(tok string) *controlplane.Client {
	e.t.Helper()
	c, err := controlplane.NewClient(e.http.URL, tok, controlplane.ClientOptions{Tries: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// tokenOfAgent is agent id's own token, registering it if need be.
func (e *env) tokenOfAgent(id string) string {
	e.t.Helper()
	a := e.agent(id)
	if _, err := a.Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: id}); err != nil {
		e.t.Fatalf("agent %s's heartbeat: %v", id, err)
	}
	return e.tokens.get(id)
}

// An agent's own token does not work where a person's does: it lists no
// tasks, reads no other agent's task, prompt or events, submits nothing,
// retries, continues and cancels nothing, lists no agents.
func TestAttackAgentTokenActsAsAPerson(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	victim := e.submit("the victim's secret prompt", "any")
	c := e.claim("victim", "available", 1)[0]
	mallory := e.as(e.tokenOfAgent("mallory"))
	gated := e.submit("stopped by the gate", "any")
	g := e.claim("victim", "available", 1)[0]
	for _, r := range e.send("victim", ev("g1", state.EventPhase, g, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("g2", state.EventPhase, g, state.PhaseEvent{Phase: state.PhaseRecoverableFailed, Reason: "tool_executed"})) {
		if r.Status != api.StatusAccepted {
			t.Fatalf("setting up a gated task: %+v", r)
		}
	}

	for _, attack := range []struct {
		name string
		do   func() error
	}{
		{"list every task", func() error { _, err := mallory.Tasks(ctx); return err }},
		{"read another agent's task", func() error { _, err := mallory.Task(ctx, victim.ID); return err }},
		{"read another agent's events", func() error { _, err := mallory.TaskEvents(ctx, victim.ID); return err }},
		{"submit a task", func() error {
			_, err := mallory.CreateTask(ctx, api.CreateTaskRequest{Prompt: "exfiltrate"})
			return err
		}},
		{"retry a task the gate stopped", func() error { _, err := mallory.RetryTask(ctx, gated.ID); return err }},
		{"continue a task the gate stopped", func() error { _, err := mallory.ContinueTask(ctx, gated.ID); return err }},
		{"cancel another agent's task", func() error { _, err := mallory.CancelTask(ctx, c.Task.ID); return err }},
		{"list the agents", func() error { _, err := mallory.Agents(ctx); return err }},
	} {
		if err := attack.do(); statusOf(err) != http.StatusForbidden {
			t.Errorf("an agent's token: %s: %v, want 403", attack.name, err)
		}
	}
	v, err := e.client.Task(ctx, c.Task.ID)
	if err != nil || v.CancelRequested || v.Phase != state.PhaseClaimed {
		t.Errorf("the victim's task after the attacks: %+v %v", v.Task(), err)
	}
	if v, _ := e.client.Task(ctx, gated.ID); v.Phase != state.PhaseRecoverableFailed {
		t.Errorf("the gated task was retried: %s", v.Phase)
	}
	if all, _ := e.client.Tasks(ctx); len(all) != 2 {
		t.Errorf("%d tasks, want the 2 a person submitted", len(all))
	}
}

// Only a person answers an approval request: neither the agent that asks
// nor any other may answer it.
func TestAttackAgentAnswersAnApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	task := e.submit("escalate", "any")
	c := e.claim("asker", "available", 1)[0]
	req := &state.ApprovalRequest{ID: "call_1", Kind: "command", Command: "rm -rf /", Reason: "clean up"}
	for _, r := range e.send("asker",
		ev("a1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("a2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
		ev("a3", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseAwaitingReply, Request: req})) {
		if r.Status != api.StatusAccepted {
			t.Fatalf("setup: %+v", r)
		}
	}
	for _, id := range []string{"asker", "bystander"} {
		if _, err := e.as(e.tokenOfAgent(id)).Reply(ctx, task.ID, "call_1", "accept"); statusOf(err) != http.StatusForbidden {
			t.Errorf("agent %s answering the approval: %v, want 403", id, err)
		}
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Reply != nil {
		t.Fatalf("an agent's answer was recorded: %+v", v.Reply)
	}
	hb, err := e.agent("asker").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "asker", Running: []api.RunningTask{{TaskID: task.ID}}})
	if err != nil || len(hb.Replies) != 0 {
		t.Fatalf("the asker got a reply nobody gave: %+v %v", hb.Replies, err)
	}
	if _, err := e.client.Reply(ctx, task.ID, "call_1", "decline"); err != nil {
		t.Fatalf("a person's answer: %v", err)
	}
}

// The registration secret, which every agent host holds, does not take
// over a registered agent id: the owner keeps its token, and no one else
// gets one to forge the owner's completion with.
func TestAttackRegistrationSecretTakesOverAnAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	task := e.submit("important", "any")
	c := e.claim("owner", "available", 1)[0]
	e.send("owner", ev("o1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}))

	var stolen api.RegisterResponse
	err := e.call(regToken, http.MethodPost, "/v1/agents/register", api.RegisterRequest{AgentID: "owner"}, &stolen)
	if statusOf(err) != http.StatusConflict || !strings.Contains(err.Error(), "revoke") {
		t.Errorf("re-registering a held id with the registration secret: %v, want 409 naming the fix", err)
	}
	if stolen.Token != "" {
		forged := ev("forged", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "forged"})
		res, _ := e.as(stolen.Token).SendEvents(ctx, "owner", []api.Event{forged})
		t.Fatalf("the registration secret got the owner's id; a forged completion on its lease: %+v", res)
	}
	if _, err := e.agent("owner").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "owner", Running: []api.RunningTask{{TaskID: task.ID}}}); err != nil {
		t.Fatalf("the owner's token after the attempt: %v", err)
	}
	// The registration secret reads and does nothing else either.
	if _, err := e.as(regToken).Tasks(ctx); statusOf(err) != http.StatusForbidden {
		t.Errorf("the registration secret listing tasks: %v, want 403", err)
	}
	if _, err := e.as(regToken).CreateTask(ctx, api.CreateTaskRequest{Prompt: "x"}); statusOf(err) != http.StatusForbidden ||
		!strings.Contains(err.Error(), "operator token") {
		t.Errorf("the registration secret submitting: %v, want 403 naming the operator token", err)
	}
}

// A lease that lapsed (its agent silent, the task running) stays its
// agent's: another agent cannot complete the task with a made-up lease
// id, nor with the real one; the agent that held it takes it back, also
// after a restart of the control plane.
func TestAttackLapsedLeaseIsCompletedByAnother(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	ctx := context.Background()
	task := e.submit("long", "any")
	c := e.claim("holder", "available", 1)[0]
	e.send("holder", ev("h1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("h2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}))
	e.tokenOfAgent("thief")
	clk.advance(2 * time.Minute) // the holder is silent: offline, its lease lapses
	if _, err := e.agent("thief").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "thief"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Phase != state.PhaseTurnStarted {
		t.Fatalf("after the lapse: %s, want turn_started", v.Phase)
	}
	madeUp := c
	madeUp.Lease.ID = "lease-madeup"
	for name, claimed := range map[string]api.Claimed{"a made-up lease id": madeUp, "the holder's lease id": c} {
		res := e.send("thief", ev("thief-"+name, state.EventComplete, claimed, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "forged"}))
		if res[0].Status != api.StatusRejected || res[0].Reason != api.ReasonLease {
			t.Fatalf("another agent completing a lapsed lease with %s: %+v, want rejected (%s)", name, res[0], api.ReasonLease)
		}
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Phase.Terminal() || v.Result != nil {
		t.Fatalf("the task after the thief's events: %s %+v", v.Phase, v.Result)
	}
	e = e.restart(clk)
	v, _ := e.client.Task(ctx, task.ID)
	if v.Lease == nil || v.Lease.ID != c.Lease.ID || v.Lease.AgentID != "holder" {
		t.Fatalf("the lapsed lease after a restart: %+v, want %s of holder kept", v.Lease, c.Lease.ID)
	}
	// The holder comes back: its event under its lease takes it back.
	if r := e.send("holder", ev("h3", state.EventProgress, c, state.ProgressEvent{Message: "back"})); r[0].Status != api.StatusAccepted {
		t.Fatalf("the holder's own event on its lapsed lease: %+v", r[0])
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Lease == nil || v.Lease.AgentID != "holder" || v.Lease.Lapsed {
		t.Fatalf("the holder's lease after it came back: %+v", v.Lease)
	}
}

// Failed authentication is throttled per address: after the limit, the
// address's wrong guesses get 429 with Retry-After; a valid token from it
// still works, another address is not throttled, and the log names the
// address and path, never the token.
func TestAttackGuessTokensFast(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	var mu sync.Mutex
	var logs bytes.Buffer
	e.srv.log = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	guess := func(client *http.Client, tok string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.http.URL+"/v1/tasks", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	local := &http.Client{}
	codes := map[int]int{}
	var last *http.Response
	for i := range 610 {
		last = guess(local, "guess-"+strings.Repeat("x", i%7))
		codes[last.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusUnauthorized] > 100 {
		t.Fatalf("610 wrong guesses: %v, want most of them 429", codes)
	}
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
		t.Fatalf("a throttled guess: %d Retry-After %q", last.StatusCode, last.Header.Get("Retry-After"))
	}
	if r := guess(local, opToken); r.StatusCode != http.StatusOK {
		t.Errorf("a person's valid token from the throttled address: %d, want 200", r.StatusCode)
	}
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer other.CloseIdleConnections()
	if r := guess(other, "wrong"); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token from another address: %d, want 401 (not throttled)", r.StatusCode)
	}
	clk.advance(time.Minute + time.Second)
	if r := guess(local, "wrong"); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token a minute later: %d, want 401", r.StatusCode)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "127.0.0.1") || !strings.Contains(out, "/v1/tasks") || strings.Contains(out, "guess-") {
		t.Errorf("the log should name the address and path and never a token:\n%s", tail(out, 2000))
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// A task that ended without its result (the watchdog timed it out, its
// agent's completion still on the way) takes one late completion: its
// agent's, under its lease. Another agent cannot write its result.
func TestAttackAnotherAgentWritesATerminalTasksResult(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	ctx := context.Background()
	task := e.submit("short", "any")
	c := e.claim("holder", "available", 1)[0]
	e.send("holder", ev("h1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseFailed, Reason: "boom"}))
	e.tokenOfAgent("thief")
	madeUp := c
	madeUp.Lease.ID = "lease-madeup"
	for name, claimed := range map[string]api.Claimed{"a made-up lease id": madeUp, "the holder's lease id": c} {
		res := e.send("thief", ev("thief-"+name, state.EventComplete, claimed, state.CompleteEvent{Status: state.PhaseFailed, Summary: "forged"}))
		if res[0].Status != api.StatusRejected || res[0].Reason != api.ReasonLease {
			t.Fatalf("another agent's late completion with %s: %+v, want rejected (%s)", name, res[0], api.ReasonLease)
		}
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Result != nil {
		t.Fatalf("the thief wrote the result: %+v", v.Result)
	}
	if r := e.send("holder", ev("h2", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseFailed, Summary: "real"})); r[0].Status != api.StatusAccepted {
		t.Fatalf("the holder's own late completion: %+v", r[0])
	}
	if v, _ := e.client.Task(ctx, task.ID); v.Result == nil || v.Result.Summary != "real" {
		t.Fatalf("the result after the holder's completion: %+v", v.Result)
	}
}
