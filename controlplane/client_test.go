package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/state"
)

// The client against the reference control plane.

func statusOf(err error) int {
	var ae *controlplane.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// A control plane that lost its registry (a new directory, say): the
// agent's client registers again, once, and goes on.
func TestClientRegistersAgainWhenItsTokenIsUnknown(t *testing.T) {
	dir := t.TempDir()
	cp := servertest.Start(t, servertest.Options{Dir: dir})
	saved := ""
	save := func(tok string) error { saved = tok; return nil }
	c, err := controlplane.NewClient(cp.URL, servertest.RegistrationToken, controlplane.ClientOptions{Tries: 1, AgentID: "a", SaveAgentToken: save})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); err != nil || saved == "" {
		t.Fatalf("first heartbeat: %v (token saved: %v)", err, saved != "")
	}
	first := saved
	cp.Close()
	if err := os.Remove(filepath.Join(dir, "agents.json")); err != nil {
		t.Fatal(err)
	}
	cp = servertest.Start(t, servertest.Options{Dir: dir})
	c2, err := controlplane.NewClient(cp.URL, servertest.RegistrationToken, controlplane.ClientOptions{Tries: 1, AgentID: "a", AgentToken: first, SaveAgentToken: save})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); err != nil {
		t.Fatalf("heartbeat with a token the control plane forgot: %v", err)
	}
	if saved == first {
		t.Fatal("no new token was registered and saved")
	}
}

// An agent whose token the control plane does not know, while another
// token holds its id, is refused with the fix; it does not take the id.
func TestClientWhoseIDIsHeldIsToldTheFix(t *testing.T) {
	cp := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	holder := cp.Agent(t, "a")
	if _, err := holder.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	c, _ := controlplane.NewClient(cp.URL, servertest.RegistrationToken, controlplane.ClientOptions{Tries: 1, AgentID: "a", AgentToken: "agt_" + strings.Repeat("0", 48),
		SaveAgentToken: func(string) error { t.Error("a token was saved"); return nil }})
	_, err := c.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"})
	if statusOf(err) != 409 || !strings.Contains(err.Error(), "agent agents revoke a") || !controlplane.Refused(err) {
		t.Fatalf("heartbeat of an agent whose id another token holds: %v, want 409 naming agent agents revoke, refused for good", err)
	}
	if _, err := holder.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); err != nil {
		t.Fatalf("the holder after the attempt: %v", err)
	}
}

// SendEvents sends one batch and returns one result per event, in order;
// a batch over the API's limit is refused before anything is sent (the
// batches are the caller's to make, once).
func TestSendEventsSendsOneBatch(t *testing.T) {
	cp := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	if _, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix it"}); err != nil {
		t.Fatal(err)
	}
	agent := cp.Agent(t, "ag-1")
	claimed, err := agent.Claim(ctx, api.ClaimRequest{AgentID: "ag-1", Max: 1, HealthGrade: "available"})
	if err != nil || len(claimed.Tasks) != 1 {
		t.Fatalf("claim: %v", err)
	}
	c := claimed.Tasks[0]
	const n = api.MaxEventsPerBatch
	evs := make([]api.Event, n+1)
	for i := range evs {
		evs[i] = api.Event{Key: fmt.Sprint("log-", i), Kind: state.EventLog, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID,
			CreatedAt: time.Now(), Payload: []byte(`{"stream":"stdout","lines":["l"]}`)}
	}
	if res, err := agent.SendEvents(ctx, "ag-1", evs); err == nil || len(res) != 0 || !strings.Contains(err.Error(), "the limit is") {
		t.Fatalf("a batch over the limit: %d results, %v", len(res), err)
	}
	if stored, _ := cp.Operator.TaskEvents(ctx, c.Task.ID); len(stored) != 0 {
		t.Fatalf("a batch over the limit was sent: %d events stored", len(stored))
	}
	evs = evs[:n]
	res, err := agent.SendEvents(ctx, "ag-1", evs)
	if err != nil || len(res) != n {
		t.Fatalf("%d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Status != api.StatusAccepted || r.Key != evs[i].Key {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if stored, _ := cp.Operator.TaskEvents(ctx, c.Task.ID); len(stored) != n {
		t.Errorf("the control plane holds %d events, want %d", len(stored), n)
	}
}
