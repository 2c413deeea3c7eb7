package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	ControlPlane string
	Token        string
	Insecure     bool
	DataDir      string
	// Progress, if set, is called after each batch with the records
	// handled so far and how many were pending at the start.
	Progress func(done, total int)
	Logger   *slog.Logger
}

// ReplayResult counts what a replay did, from the control plane's answers.
type ReplayResult struct {
	// Sent is every record the control plane acknowledged: Accepted (new to
	// it) plus Duplicate (it had them already, say from a delivery whose
	// answer was lost).
	Sent      int `json:"sent"`
	Accepted  int `json:"accepted"`
	Duplicate int `json:"duplicate"`
	Dead      int `json:"dead"`    // rejected for good, kept with the reason
	Pending   int `json:"pending"` // still pending: the control plane failed before the end
}

// Line says what a replay delivered (outbox replay): what the control
// plane took as new, what it had already, what it refused for good, what
// is left.
func (r ReplayResult) Line() string {
	return fmt.Sprintf("%d delivered (%d new to the control plane, %d it had already), %d dead, %d still pending",
		r.Sent, r.Accepted, r.Duplicate, r.Dead, r.Pending)
}

// tally counts a replay's deliveries by result.
type tally map[metrics.SendResult]int

func (t tally) Sent(result metrics.SendResult, n int) { t[result] += n }

// Replay delivers the pending records of a stopped agent's outbox by hand,
// as the daemon would. It takes the outbox's lock, so it refuses to run
// beside the agent. On an error the records not delivered stay pending.
func Replay(ctx context.Context, opts ReplayOptions) (ReplayResult, error) {
	layout := datadir.Layout{Dir: opts.DataDir}
	ob, err := outbox.Open(layout.Outbox(), outbox.Options{})
	if err != nil {
		return ReplayResult{}, err
	}
	defer ob.Close()
	id, err := layout.LoadAgentID()
	if err != nil {
		return ReplayResult{}, err
	}
	client, err := agentClient(layout, opts.ControlPlane, opts.Token, opts.Insecure, "replay", id, nil)
	if err != nil {
		return ReplayResult{}, err
	}
	store, err := state.OpenStore(layout.Tasks())
	if err != nil {
		return ReplayResult{}, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	counts := tally{}
	s := &sender{outbox: ob, client: client, agentID: id, log: log, obs: counts, leaseOf: func(taskID string) string { return storedLease(store, taskID) }}
	before := ob.Stats()
	done := 0
	err = s.drain(ctx, func(n int) {
		done += n
		if opts.Progress != nil {
			opts.Progress(done, before.Pending)
		}
	})
	accepted, duplicate := counts[metrics.SendSent], counts[metrics.SendDuplicate]
	return ReplayResult{Sent: accepted + duplicate, Accepted: accepted, Duplicate: duplicate, Dead: counts[metrics.SendDead],
		Pending: ob.Stats().Pending}, err
}

// storedLease returns the lease id kept with a task's state, or "".
func storedLease(store *state.Store, taskID string) string {
	if t, err := store.Load(taskID); err == nil && t.Lease != nil {
		return t.Lease.ID
	}
	return ""
}
