package server

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A person's answer to an approval request reaches the agent holding the
// task in every heartbeat answer until the task leaves awaiting_reply.
func TestReplyToAnApprovalRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	task := e.submit("escalate", "any")
	c := e.claim("agent-1", "available", 1)[0]
	status := func(err error) int {
		var ae *controlplane.APIError
		if errors.As(err, &ae) {
			return ae.Status
		}
		return 0
	}
	if _, err := e.client.Reply(ctx, task.ID, "", "accept"); status(err) != http.StatusConflict {
		t.Fatalf("reply to a task that awaits nothing: %v, want 409", err)
	}
	req := &state.ApprovalRequest{ID: "call_1", Kind: "command", Command: "rm -rf build", Reason: "clean the build", Cwd: "/work"}
	for _, r := range e.send("agent-1",
		ev("k1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev("k2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
		ev("k3", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseAwaitingReply, Request: req})) {
		if r.Status != api.StatusAccepted {
			t.Fatalf("event %s: %s %s", r.Key, r.Status, r.Reason)
		}
	}
	v, err := e.client.Task(ctx, task.ID)
	if err != nil || v.AwaitingReply == nil || v.AwaitingReply.Command != "rm -rf build" {
		t.Fatalf("task view: %v %+v", err, v.AwaitingReply)
	}
	for _, bad := range []struct {
		id, request string
		decision    api.Decision
		want        int
	}{
		{task.ID, "", "maybe", http.StatusBadRequest},
		{"t-nope", "", "accept", http.StatusNotFound},
		{task.ID, "call_2", "accept", http.StatusConflict},
	} {
		if _, err := e.client.Reply(ctx, bad.id, bad.request, bad.decision); status(err) != bad.want {
			t.Errorf("reply %+v: %v, want %d", bad, err, bad.want)
		}
	}
	beat := func() api.HeartbeatResponse {
		resp, err := e.agent("agent-1").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "agent-1", Running: []api.RunningTask{{TaskID: task.ID, Attempt: 1, Phase: state.PhaseAwaitingReply}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := beat().Replies; len(got) != 0 {
		t.Fatalf("replies before anyone answered: %+v", got)
	}
	if _, err := e.client.Reply(ctx, task.ID, "", "accept"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Reply(ctx, task.ID, "call_1", "accept"); err != nil {
		t.Fatalf("the same answer again is fine: %v", err)
	}
	if _, err := e.client.Reply(ctx, task.ID, "", "decline"); status(err) != http.StatusConflict {
		t.Fatalf("a different answer after the first: %v, want 409", err)
	}
	want := api.ReplyDelivery{TaskID: task.ID, RequestID: "call_1", Decision: "accept"}
	for i := range 2 { // repeated until the task moves on: a lost answer is not lost
		if got := beat().Replies; len(got) != 1 || got[0] != want {
			t.Fatalf("heartbeat %d replies %+v, want %+v", i, got, want)
		}
	}
	if _, err := e.agent("agent-2").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "agent-2"}); err != nil {
		t.Fatal(err)
	}
	e.send("agent-1", ev("k4", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}))
	if got := beat().Replies; len(got) != 0 {
		t.Fatalf("replies after the task moved on: %+v", got)
	}
	if v, _ := e.client.Task(ctx, task.ID); v.AwaitingReply != nil || v.Reply != nil {
		t.Fatalf("pending request kept after the task moved on: %+v %+v", v.AwaitingReply, v.Reply)
	}
}
