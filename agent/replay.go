package agent

import (
	"context"
	"log/slog"

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

// ReplayResult counts what a replay did.
type ReplayResult struct {
	Sent    int `json:"sent"`
	Dead    int `json:"dead"`
	Pending int `json:"pending"` // still pending: the control plane failed before the end
}

// Replay delivers the pending records of a stopped agent's outbox by hand,
// as the daemon would. It takes the outbox's lock, so it refuses to run
// beside the agent. On an error the records not delivered stay pending.
func Replay(ctx context.Context, opts ReplayOptions) (ReplayResult, error) {
	layout := Layout{opts.DataDir}
	ob, err := outbox.Open(layout.Outbox(), outbox.Options{})
	if err != nil {
		return ReplayResult{}, err
	}
	defer ob.Close()
	id, err := layout.agentID()
	if err != nil {
		return ReplayResult{}, err
	}
	client, err := layout.agentClient(opts.ControlPlane, opts.Token, opts.Insecure, "replay", id)
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
	s := &sender{outbox: ob, client: client, agentID: id, log: log, leaseOf: func(taskID string) string { return storedLease(store, taskID) }}
	before := ob.Stats()
	done := 0
	for ctx.Err() == nil {
		n, err := s.batch(ctx)
		done += n
		if opts.Progress != nil && n > 0 {
			opts.Progress(done, before.Pending)
		}
		if err != nil || n == 0 {
			after := ob.Stats()
			dead := after.Dead - before.Dead
			return ReplayResult{Sent: before.Pending - after.Pending - dead, Dead: dead, Pending: after.Pending}, err
		}
	}
	return ReplayResult{}, ctx.Err()
}

// storedLease returns the lease id kept with a task's state, or "".
func storedLease(store *state.Store, taskID string) string {
	if t, err := store.Load(taskID); err == nil && t.Lease != nil {
		return t.Lease.ID
	}
	return ""
}
