package agent

import (
	"context"
	"log/slog"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// sender delivers pending outbox records to the control plane, a batch at
// a time. The daemon's send loop and `agent outbox replay` both use it.
type sender struct {
	outbox  *outbox.Outbox
	client  *controlplane.Client
	agentID string
	// leaseOf returns the lease id a task's records are sent with.
	leaseOf func(taskID string) string
	log     *slog.Logger
}

// sendBatch delivers one batch of pending records and records what became
// of each: sent (accepted or duplicate), dead (rejected for good), or one
// more failed try. It returns how many records it took.
func (s *sender) batch(ctx context.Context) (int, error) {
	recs, err := s.outbox.Pending(sendBatchRecords, sendBatchBytes)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	events := make([]controlplane.Event, len(recs))
	leases := map[string]string{}
	for i, r := range recs {
		lease, ok := leases[r.TaskID]
		if !ok {
			lease = s.leaseOf(r.TaskID)
			leases[r.TaskID] = lease
		}
		events[i] = controlplane.Event{Key: r.Key, Kind: state.EventKind(r.Kind), TaskID: r.TaskID, Attempt: r.Attempt,
			LeaseID: lease, CreatedAt: r.CreatedAt, Payload: r.Payload}
	}
	results, sendErr := s.client.SendEvents(ctx, s.agentID, events)
	var sent, failed []uint64
	for i, r := range recs {
		if i >= len(results) {
			failed = append(failed, r.Seq)
			continue
		}
		switch res := results[i]; res.Status {
		case controlplane.StatusAccepted, controlplane.StatusDuplicate:
			sent = append(sent, r.Seq)
		default:
			s.log.Warn("record rejected for good; marked dead", "seq", r.Seq, "task", r.TaskID, "kind", r.Kind, "reason", res.Reason)
			if err := s.outbox.MarkDead(res.Reason, r.Seq); err != nil {
				return 0, err
			}
		}
	}
	if err := s.outbox.MarkSent(sent...); err != nil {
		return 0, err
	}
	if sendErr != nil {
		if err := s.outbox.MarkFailed(sendErr.Error(), failed...); err != nil {
			return 0, err
		}
		return len(recs), sendErr
	}
	return len(recs), nil
}
