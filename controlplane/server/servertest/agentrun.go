package servertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Claim has agent, enrolled as agentID, claim the next queued task, as an
// available agent serving repos; there must be one.
func Claim(t testing.TB, agent *controlplane.Client, agentID string, repos ...string) api.Claimed {
	t.Helper()
	resp, err := agent.Claim(context.Background(), api.ClaimRequest{AgentID: agentID, Max: 1, HealthGrade: "available", Repos: repos})
	if err != nil || len(resp.Tasks) != 1 {
		t.Fatalf("claim: %v %+v", err, resp)
	}
	return resp.Tasks[0]
}

// eventSeq keeps the keys of the events Send makes unique.
var eventSeq atomic.Int64

// Send sends payloads as agent agentID's events of attempt 1 of the task
// c grants, in one batch, made now; the control plane must accept each.
func Send(t testing.TB, agent *controlplane.Client, agentID string, c api.Claimed, payloads ...state.Payload) {
	t.Helper()
	var evs []api.Event
	for _, p := range payloads {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, api.Event{Key: fmt.Sprintf("%s:%d", c.Task.ID, eventSeq.Add(1)), Kind: p.EventKind(), TaskID: c.Task.ID, Attempt: 1,
			LeaseID: c.Lease.ID, CreatedAt: time.Now(), Payload: b})
	}
	res, err := agent.SendEvents(context.Background(), agentID, evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != api.StatusAccepted {
			t.Fatalf("event %s: %+v", r.Key, r)
		}
	}
}
