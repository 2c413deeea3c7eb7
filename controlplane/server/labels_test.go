package server

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Issue 34: any host holding the registration secret enrolled an agent
// that advertised tier=secure, executor=codex and a model in its claims,
// and was granted the task a person routed to --require label=tier=secure,
// prompt included. Labels route only when a person granted them: the
// rogue is granted nothing, the agent an operator labelled is, and each
// is listed with what it says of itself apart from what it was granted.
func TestAttackRogueAgentAdvertisesALabelItWasNotGranted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	secure := offering{api.Capabilities{Executor: "codex", Models: []string{"gpt-5"}, OS: "linux", Arch: "amd64"}, map[string]string{"tier": "secure"}}

	// The rogue enrols with the registration secret, advertising all of
	// it, in its heartbeats, its claims, and a field of its own making.
	rogue := e.agent("rogue")
	if _, err := rogue.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "rogue", Capabilities: secure.caps, Labels: secure.labels}); err != nil {
		t.Fatal(err)
	}
	forged := map[string]any{"agent_id": "rogue", "labels": secure.labels, "granted_labels": secure.labels, "executor": "codex", "models": []string{"gpt-5"}}
	if err := e.call(e.tokens.get("rogue"), http.MethodPost, "/v1/agents/heartbeat", forged, nil); err != nil {
		t.Fatal(err)
	}
	task := e.submitRequiring("deploy with the production keys", "label=tier=secure", "executor=codex")
	if task.Unroutable != "no agent with label=tier=secure" {
		t.Errorf("with only the rogue online: unroutable %q", task.Unroutable)
	}
	if got := e.claimOffering("rogue", secure, 10); len(got) != 0 {
		t.Fatalf("the rogue, granted no label, was granted %v", ids(got))
	}

	// The agent an operator labelled is granted the task.
	if _, err := e.agent("vault").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "vault", Capabilities: secure.caps}); err != nil {
		t.Fatal(err)
	}
	e.grant("vault", map[string]string{"tier": "secure"})
	if got := e.claimOffering("rogue", secure, 10); len(got) != 0 {
		t.Fatalf("the rogue was granted %v once another agent was labelled", ids(got))
	}
	got := e.claimOffering("vault", secure, 10)
	if len(got) != 1 || got[0].Task.ID != task.ID {
		t.Fatalf("the labelled agent's claim: %v, want %s", ids(got), task.ID)
	}

	agents, err := e.client.Agents(ctx)
	if err != nil || len(agents) != 2 {
		t.Fatalf("agents: %+v %v", agents, err)
	}
	byID := map[string]api.AgentView{agents[0].AgentID: agents[0], agents[1].AgentID: agents[1]}
	if r := byID["rogue"]; r.GrantedLabels != nil || r.Labels["tier"] != "secure" {
		t.Errorf("the rogue as listed: granted %v, self-described %v", r.GrantedLabels, r.Labels)
	}
	if v := byID["vault"]; !maps.Equal(v.GrantedLabels, map[string]string{"tier": "secure"}) || v.Labels["tier"] != "secure" {
		t.Errorf("the labelled agent as listed: granted %v, self-described %v", v.GrantedLabels, v.Labels)
	}
}

// An operator grants labels and takes them back; a mistake is one line,
// an id nobody enrolled is 404, and a revoke forgets the labels with the
// token, so that whoever registers the id next holds none.
func TestOperatorGrantsAndRemovesLabels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.heartbeatOffering("gpu", codexGPU) // granted gpu=a100
	task := e.submitRequiring("train", "label=zone=eu")
	label := func(req api.LabelsRequest) map[string]string {
		t.Helper()
		resp, err := e.client.LabelAgent(ctx, "gpu", req)
		if err != nil || resp.AgentID != "gpu" {
			t.Fatalf("LabelAgent(%+v): %+v %v", req, resp, err)
		}
		return resp.Labels
	}
	if got := label(api.LabelsRequest{Set: map[string]string{"zone": "eu"}, Remove: []string{"gpu"}}); !maps.Equal(got, map[string]string{"zone": "eu"}) {
		t.Errorf("after setting zone and removing gpu: %v", got)
	}
	if got := e.claimOffering("gpu", codexGPU, 10); len(got) != 1 || got[0].Task.ID != task.ID {
		t.Errorf("the claim once zone=eu was granted: %v", ids(got))
	}
	for _, c := range []struct {
		id   string
		req  api.LabelsRequest
		code int
		says string
	}{
		{"gpu", api.LabelsRequest{}, http.StatusBadRequest, "no label to set or remove"},
		{"gpu", api.LabelsRequest{Set: map[string]string{"a b": "c"}}, http.StatusBadRequest, `set: label key "a b"`},
		{"gpu", api.LabelsRequest{Remove: []string{"-x"}}, http.StatusBadRequest, `remove: label key "-x"`},
		{"gpu", api.LabelsRequest{Set: map[string]string{"x": "1"}, Remove: []string{"x"}}, http.StatusBadRequest, "both set and removed"},
		{"nobody", api.LabelsRequest{Set: map[string]string{"tier": "secure"}}, http.StatusNotFound, "agent nobody is not registered"},
	} {
		_, err := e.client.LabelAgent(ctx, c.id, c.req)
		if statusOf(err) != c.code || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("LabelAgent(%s, %+v): %v, want %d saying %q", c.id, c.req, err, c.code, c.says)
		}
	}
	if _, err := e.client.RevokeAgent(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	e.tokens.save("gpu")("")
	delete(e.agents, "gpu")
	e.heartbeatOffering("gpu", offering{caps: codexGPU.caps}) // registered anew
	if agents, _ := e.client.Agents(ctx); len(agents) != 1 || agents[0].GrantedLabels != nil {
		t.Errorf("the id registered anew after a revoke: %+v", agents)
	}
}

// An installation from before granted labels, where nobody set labels by
// hand, routes as before: an agent enrolled then adopts the labels it
// advertises, once, at its first heartbeat; what it advertises later is
// self-described, and an agent enrolled since adopts nothing.
func TestAgentsFromBeforeGrantedLabelsAdoptTheirOwnOnce(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // pgstore's migration test covers PostgreSQL's
	dir := t.TempDir()
	const tok = "agt_0123456789abcdef0123456789abcdef0123456789abcdef"
	// The registry as a control plane from before left it.
	if err := os.WriteFile(filepath.Join(dir, "agents.json"), []byte(`{"old": "`+hashToken(tok)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, dir, &clock{now: t0})
	e.tokens.save("old")(tok)
	gpu := e.submitRequiring("train", "label=gpu=a100")
	secure := e.submitRequiring("deploy", "label=tier=secure")
	if _, err := e.agent("old").Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "old", Labels: map[string]string{"gpu": "a100"}}); err != nil {
		t.Fatal(err)
	}
	// Later it says more of itself: not adopted.
	withTier := offering{api.Capabilities{Executor: "codex"}, map[string]string{"gpu": "a100", "tier": "secure"}}
	got := e.claimOffering("old", withTier, 10)
	if len(got) != 1 || got[0].Task.ID != gpu.ID {
		t.Fatalf("the agent from before: %v, want only %s", ids(got), gpu.ID)
	}
	if _, err := e.agent("new").Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "new", Labels: withTier.labels}); err != nil {
		t.Fatal(err)
	}
	if got := e.claimOffering("new", withTier, 10); len(got) != 0 {
		t.Fatalf("an agent enrolled since adopted its labels: granted %v", ids(got))
	}
	if v, _ := e.client.Task(context.Background(), secure.ID); v.Phase != state.PhaseQueued {
		t.Errorf("the secure task: %s", v.Phase)
	}
}
