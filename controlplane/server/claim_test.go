package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A claim asked again with the same id (its answer was lost) gets the same
// grant; a new id gets a new one.
func TestClaimIsIdempotentByRequestID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	e.submit("one", "any")
	e.submit("two", "any")
	ctx := context.Background()
	claim := func(id string) []api.Claimed {
		resp, err := e.agent("a").Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, HealthGrade: "available", RequestID: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Tasks
	}
	first := claim("claim-1")
	again := claim("claim-1")
	if len(first) != 1 || len(again) != 1 || again[0].Task.ID != first[0].Task.ID || again[0].Lease.ID != first[0].Lease.ID {
		t.Fatalf("the same claim twice: %v then %v", ids(first), ids(again))
	}
	other := claim("claim-2")
	if len(other) != 1 || other[0].Task.ID == first[0].Task.ID {
		t.Fatalf("a new claim got %v, want the other task", ids(other))
	}
}

// A claim's answer sends each task's lease once, beside the task, in the
// shape every agent reads: tasks[].lease{id, expires_at}, and no lease in
// tasks[].task.
func TestClaimSendsTheLeaseOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	e.submit("one", "any")
	body := strings.NewReader(`{"agent_id":"a","max":1,"health_grade":"available"}`)
	req, err := http.NewRequest(http.MethodPost, e.http.URL+"/v1/tasks/claim", body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+e.tokenOfAgent("a"))
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var got struct {
		Tasks []struct {
			Task  map[string]json.RawMessage `json:"task"`
			Lease struct {
				ID        string    `json:"id"`
				ExpiresAt time.Time `json:"expires_at"`
			} `json:"lease"`
		} `json:"tasks"`
	}
	must(t, json.NewDecoder(resp.Body).Decode(&got))
	if len(got.Tasks) != 1 {
		t.Fatalf("%d tasks granted, want 1", len(got.Tasks))
	}
	c := got.Tasks[0]
	if c.Lease.ID == "" || !c.Lease.ExpiresAt.After(t0) {
		t.Errorf("lease %+v: want an id and an expiry", c.Lease)
	}
	if _, twice := c.Task["lease"]; twice {
		t.Errorf("the task carries the lease too: %s", c.Task["lease"])
	}
	var id string
	must(t, json.Unmarshal(c.Task["id"], &id))
	if v, err := e.client.Task(context.Background(), id); err != nil || v.Lease == nil || v.Lease.ID != c.Lease.ID {
		t.Errorf("the task as people see it: %v, lease %+v; want lease %s", err, v.Lease, c.Lease.ID)
	}
}

func ids(cs []api.Claimed) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Task.ID+"/"+c.Lease.ID)
	}
	return out
}

// The control plane reconciles each heartbeat: a task it granted that the
// agent leaves out of two heartbeats goes back to the queue without an
// attempt; one the agent lists that it does not know, or that is not the
// agent's, is in the cancel list.
func TestHeartbeatReconcilesClaimsBothWays(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	lost := e.submit("its claim answer is lost", "any")
	kept := e.submit("this one runs", "any")
	granted := e.claim("a", "available", 2)
	if len(granted) != 2 {
		t.Fatalf("granted %v", ids(granted))
	}
	beat := func(running ...string) api.HeartbeatResponse {
		var rs []api.RunningTask
		for _, id := range running {
			rs = append(rs, api.RunningTask{TaskID: id, Phase: state.PhaseClaimed})
		}
		resp, err := e.agent("a").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a", Running: rs})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	phase := func(id string) state.Phase {
		v, err := e.client.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v.Phase
	}
	beat(kept.ID) // a heartbeat that may have raced the claim: nothing happens yet
	if phase(lost.ID) != state.PhaseClaimed {
		t.Fatalf("requeued after one heartbeat: %s", phase(lost.ID))
	}
	clk.advance(25 * time.Second)
	beat(kept.ID) // two heartbeats, but its answer may still be on its way
	if phase(lost.ID) != state.PhaseClaimed {
		t.Fatalf("requeued %s after the grant, within the window its answer may take: %s", 25*time.Second, phase(lost.ID))
	}
	clk.advance(api.ClaimAnswerWindow)
	beat(kept.ID)
	if phase(lost.ID) != state.PhaseQueued || phase(kept.ID) != state.PhaseClaimed {
		t.Fatalf("after two heartbeats without it: lost %s, kept %s", phase(lost.ID), phase(kept.ID))
	}
	v, _ := e.client.Task(ctx, lost.ID)
	if len(v.Attempts) != 0 || v.Lease != nil {
		t.Errorf("requeued task spent an attempt or kept its lease: %+v %+v", v.Attempts, v.Lease)
	}
	// Someone else claims it; the first agent, still listing it, is told to
	// cancel it; and a task nobody knows is cancelled too.
	if got := e.claim("b", "available", 1); len(got) != 1 || got[0].Task.ID != lost.ID {
		t.Fatalf("b claimed %v", ids(got))
	}
	resp := beat(kept.ID, lost.ID, "t-unknown")
	if !contains(resp.Cancel, lost.ID) || !contains(resp.Cancel, "t-unknown") || contains(resp.Cancel, kept.ID) {
		t.Fatalf("cancel list %v, want %s and t-unknown, not %s", resp.Cancel, lost.ID, kept.ID)
	}
}

// Tasks an agent will not run go back to the queue.
func TestReleaseRequeues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	task := e.submit("x", "any")
	e.claim("a", "available", 1)
	if err := e.agent("b").Release(context.Background(), "b", []string{task.ID}); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.client.Task(context.Background(), task.ID); v.Phase != state.PhaseClaimed {
		t.Fatalf("another agent released it: %s", v.Phase)
	}
	if err := e.agent("a").Release(context.Background(), "a", []string{task.ID}); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.client.Task(context.Background(), task.ID); v.Phase != state.PhaseQueued || v.Lease != nil {
		t.Fatalf("released: %s %+v", v.Phase, v.Lease)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Ids and keys are capped: a huge key is rejected on its own, not stored
// for good (it used to break the next start).
func TestOverlongKeysAndIdsAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newEnv(t, dir, &clock{now: t0})
	e.submit("x", "any")
	c := e.claim("a", "available", 1)[0]
	huge := strings.Repeat("k", 2<<20)
	res := e.send("a", ev(huge[:api.MaxKeyBytes+1], state.EventProgress, c, state.ProgressEvent{Message: "x"}),
		ev("ok", state.EventProgress, c, state.ProgressEvent{Message: "y"}))
	if res[0].Status != api.StatusRejected || res[1].Status != api.StatusAccepted {
		t.Fatalf("results %+v", res)
	}
	if _, err := e.agent(strings.Repeat("a", api.MaxIDBytes+1)).Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: strings.Repeat("a", api.MaxIDBytes+1)}); err == nil {
		t.Fatal("an overlong agent id was taken")
	}
	// And a second control plane on the same directory is refused.
	if !onPostgres() {
		if _, err := openDirStore(t, dir, nil); err == nil || !strings.Contains(err.Error(), "another control plane") {
			t.Fatalf("a second control plane on %s: %v", dir, err)
		}
	}
	e.restart(&clock{now: t0}) // starts
}
