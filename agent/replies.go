package agent

import (
	"context"
	"sync"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// replies brings people's answers to approval requests from the heartbeat
// answers to the attempts waiting for them (runner.Replies). While any
// attempt waits, the agent heartbeats fast (replyBeat) so the answer comes
// soon after it is given.
type replies struct {
	mu      sync.Mutex
	waiting map[replyKey]chan runner.Approval
	// wake tells the heartbeat loop that an attempt began to wait, so the
	// fast beat starts now rather than after the current interval.
	wake chan struct{}
}

type replyKey struct{ taskID, requestID string }

func newReplies() *replies {
	return &replies{waiting: map[replyKey]chan runner.Approval{}, wake: make(chan struct{}, 1)}
}

// Await implements runner.Replies: it blocks until the answer arrives or
// ctx ends (the reply timeout, a cancel).
func (r *replies) Await(ctx context.Context, taskID string, req state.ApprovalRequest) (runner.Approval, error) {
	k := replyKey{taskID, req.ID}
	ch := make(chan runner.Approval, 1)
	r.mu.Lock()
	r.waiting[k] = ch
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	defer func() {
		r.mu.Lock()
		delete(r.waiting, k)
		r.mu.Unlock()
	}()
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// deliver hands answers to their waiting attempts. An answer nobody waits
// for (already taken, or the attempt ended) is dropped: the control plane
// repeats it until the task moves on.
func (r *replies) deliver(list []api.ReplyDelivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range list {
		ch := r.waiting[replyKey{d.TaskID, d.RequestID}]
		if ch == nil {
			continue
		}
		a := runner.ApprovalDecline
		if d.Decision == api.DecisionAccept {
			a = runner.ApprovalAccept
		}
		select {
		case ch <- a:
		default: // already answered
		}
	}
}

// any reports whether an attempt waits for an answer.
func (r *replies) any() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiting) > 0
}
