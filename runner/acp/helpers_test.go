package acp_test

import (
	"context"
	"sync"
	"testing"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// replies is a person answering approval requests, as the agent's control
// plane round trip would: it records each request and answers by a fixed
// decision, or never.
type replies struct {
	mu       sync.Mutex
	requests []state.ApprovalRequest
	answer   runner.Approval
}

func (r *replies) Await(ctx context.Context, taskID string, req state.ApprovalRequest) (runner.Approval, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	if r.answer == "" {
		<-ctx.Done() // nobody answers
		return "", ctx.Err()
	}
	return r.answer, nil
}

// checkDenied fails unless the task was refused exactly one call, for
// why, or none when why is "".
func checkDenied(t *testing.T, task *state.Task, why string) {
	t.Helper()
	d := task.Attempts[0].Denied
	if why == "" {
		if d.Count != 0 || task.Denied != 0 {
			t.Errorf("denied %+v (task %d), want none", d, task.Denied)
		}
		return
	}
	if d.Count != 1 || len(d.Calls) != 1 || d.Calls[0].Why != why || d.Calls[0].Tool == "" || d.Calls[0].Input == "" || task.Denied != 1 {
		t.Errorf("denied %+v (task %d), want one call, %s", d, task.Denied, why)
	}
}
