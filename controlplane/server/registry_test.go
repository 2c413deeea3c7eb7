package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Each agent acts with its own token and only for itself: an operator
// token serves people's tools, never the agent endpoints; another
// agent's token cannot heartbeat as it, and cannot post events on its
// lease.
func TestAgentsActOnlyForThemselves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEnv(t, dir, &clock{now: t0})
	ctx := context.Background()
	task := e.submit("x", "any")
	c := e.claim("a", "available", 1)[0]

	if _, err := e.client.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); statusOf(err) != http.StatusForbidden {
		t.Fatalf("heartbeat with an operator token: %v, want 403", err)
	}
	mallory := e.agent("mallory")
	if _, err := mallory.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); statusOf(err) != http.StatusForbidden {
		t.Fatalf("mallory heartbeating as a: %v, want 403", err)
	}
	res, err := mallory.SendEvents(ctx, "mallory", []api.Event{ev("m1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting})})
	if err != nil || res[0].Status != api.StatusRejected || res[0].Reason != api.ReasonLease {
		t.Fatalf("mallory's events on a's lease: %+v %v, want rejected (lease)", res, err)
	}
	if r := e.send("a", ev("a1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting})); r[0].Status != api.StatusAccepted {
		t.Fatalf("a's own event: %+v", r)
	}
	if err := e.call(e.tokenOfAgent("mallory"), http.MethodPost, "/v1/agents/register", api.RegisterRequest{AgentID: "c"}, &api.RegisterResponse{}); statusOf(err) != http.StatusForbidden {
		t.Fatalf("registering another id with an agent's token: %v, want 403", err)
	}

	// The tokens outlive a restart (no new registration is needed);
	// renewing one (with itself as the bearer) replaces it.
	oldTok := e.tokens.get("a")
	e = e.restart(&clock{now: t0})
	a, err := controlplane.NewClient(e.http.URL, regToken, controlplane.ClientOptions{Tries: 1, AgentID: "a", AgentToken: oldTok,
		SaveAgentToken: func(string) error { t.Error("registered again: the token did not outlive the restart"); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a", Running: []api.RunningTask{{TaskID: task.ID}}}); err != nil {
		t.Fatalf("a's token after a restart: %v", err)
	}
	if err := e.call(oldTok, http.MethodPost, "/v1/agents/register", api.RegisterRequest{AgentID: "a"}, &api.RegisterResponse{}); err != nil {
		t.Fatalf("a renewing its own token: %v", err)
	}
	if err := e.call(oldTok, http.MethodGet, "/v1/tasks", nil, &[]api.TaskView{}); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("a replaced token: %v, want 401", err)
	}
}
