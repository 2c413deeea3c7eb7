package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// One record the control plane refuses with the whole batch (a payload
// nested deeper than its JSON decoder goes) is isolated by halving the
// batch: it alone ends dead, every other record is delivered.
func TestPoisonRecordIsIsolated(t *testing.T) {
	t.Parallel()
	cp := servertest.Start(t, servertest.Options{})
	client := cp.Operator
	ctx := context.Background()
	task, _ := client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "x"})
	agentA := cp.Agent(t, "a")
	claimed, err := agentA.Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, HealthGrade: "available"})
	if err != nil || len(claimed.Tasks) != 1 {
		t.Fatal(err)
	}
	o, err := outbox.Open(t.TempDir(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	deep := strings.Repeat(`{"a":`, 9_998) + "1" + strings.Repeat("}", 9_998)
	var poison uint64
	for i := range 40 {
		payload := json.RawMessage(`{"message":"step","percent":1}`)
		if i == 23 {
			payload = json.RawMessage(`{"message":` + deep + `}`)
		}
		seq, err := o.Append(outbox.Record{Kind: outbox.KindProgress, TaskID: task.ID, Attempt: 1, CreatedAt: time.Now(), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		if i == 23 {
			poison = seq
		}
	}
	s := &sender{outbox: o, client: agentA, agentID: "a", log: quiet(), obs: noObserver{},
		leaseOf: func(string) string { return claimed.Tasks[0].Lease.ID }}
	if err := s.drain(ctx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	st := o.Stats()
	if st.Pending != 0 || st.Dead != 1 {
		t.Fatalf("pending %d, dead %d; want 0 and 1", st.Pending, st.Dead)
	}
	snap, _ := outbox.Inspect(o.Dir())
	for _, it := range snap.Items {
		if it.State == outbox.StateDead && (it.Seq != poison || !strings.Contains(it.Reason, "400")) {
			t.Errorf("dead record %d (%s), want only %d refused with 400", it.Seq, it.Reason, poison)
		}
	}
	evs, _ := client.TaskEvents(ctx, task.ID)
	if len(evs) != 39 {
		t.Errorf("the control plane holds %d events, want the 39 good ones", len(evs))
	}

}

// The report that takes a tree of subtasks past its root's budget is
// answered with an order to stop its task: the sender hands it on at
// once, not a heartbeat later.
func TestSenderHandsOnTheStopOfATaskOverItsTreesBudget(t *testing.T) {
	t.Parallel()
	cp := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	root, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "plan", MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	agentA := cp.Agent(t, "a")
	claim := func() api.Claimed {
		t.Helper()
		resp, err := agentA.Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, HealthGrade: "available"})
		if err != nil || len(resp.Tasks) != 1 {
			t.Fatalf("claim: %v, %d tasks", err, len(resp.Tasks))
		}
		return resp.Tasks[0]
	}
	r := claim()
	tasks, err := controlplane.NewClient(cp.URL, r.TaskToken, controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.CreateSubtask(ctx, root.ID, api.CreateTaskRequest{Prompt: "spend"}); err != nil {
		t.Fatal(err)
	}
	kid := claim()
	o, err := outbox.Open(t.TempDir(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for i, tokens := range []int64{60, 120} {
		a, _ := json.Marshal(state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: time.Now(),
			Usage: state.Usage{InputTokens: tokens, TotalTokens: tokens}})
		if _, err := o.Append(outbox.Record{Kind: outbox.KindAttempt, TaskID: kid.Task.ID, Attempt: 1, Key: fmt.Sprintf("%s:attempt:%d", kid.Task.ID, i),
			CreatedAt: time.Now(), Payload: a}); err != nil {
			t.Fatal(err)
		}
	}
	var orders []api.StopOrder
	s := &sender{outbox: o, client: agentA, agentID: "a", log: quiet(), obs: noObserver{},
		leaseOf: func(string) string { return kid.Lease.ID }, stop: func(o api.StopOrder) { orders = append(orders, o) }}
	if err := s.drain(ctx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if len(orders) != 1 || orders[0].TaskID != kid.Task.ID || !strings.Contains(orders[0].Reason, "the tree of "+root.ID+" used 120 tokens, over its budget of 100") {
		t.Errorf("stop orders %+v, want one for %s", orders, kid.Task.ID)
	}
}
