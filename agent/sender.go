package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

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

// batch delivers one batch of pending records and records what became of
// each: sent (accepted or duplicate), dead (rejected for good), or one more
// failed try. It returns how many records it took.
func (s *sender) batch(ctx context.Context) (int, error) {
	recs, err := s.outbox.Pending(sendBatchRecords, sendBatchBytes)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	return len(recs), s.send(ctx, recs)
}

// send delivers recs. A batch the control plane refuses as a whole (a 4xx
// other than an auth or rate problem: one record it cannot even parse) is
// split in halves, again and again, until the record that poisons it is
// alone; that one is marked dead with the reason, and the others go
// through. One bad record never blocks those behind it.
func (s *sender) send(ctx context.Context, recs []outbox.Record) error {
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
	var sent []uint64
	for i, res := range results {
		r := recs[i]
		switch res.Status {
		case controlplane.StatusAccepted, controlplane.StatusDuplicate:
			sent = append(sent, r.Seq)
		default:
			s.log.Warn("record rejected for good; marked dead", "seq", r.Seq, "task", r.TaskID, "kind", r.Kind, "reason", res.Reason)
			if err := s.outbox.MarkDead(res.Reason, r.Seq); err != nil {
				return err
			}
		}
	}
	if err := s.outbox.MarkSent(sent...); err != nil {
		return err
	}
	if sendErr == nil {
		return nil
	}
	rest := recs[len(results):]
	if poisoned(sendErr) {
		if len(rest) == 1 {
			r := rest[0]
			s.log.Warn("record refused by the control plane; marked dead", "seq", r.Seq, "task", r.TaskID, "kind", r.Kind, "err", sendErr)
			return s.outbox.MarkDead("refused: "+sendErr.Error(), r.Seq)
		}
		half := len(rest) / 2
		if err := s.send(ctx, rest[:half]); err != nil {
			return err
		}
		return s.send(ctx, rest[half:])
	}
	seqs := make([]uint64, len(rest))
	for i, r := range rest {
		seqs[i] = r.Seq
	}
	if err := s.outbox.MarkFailed(sendErr.Error(), seqs...); err != nil {
		return err
	}
	return sendErr
}

// poisoned reports whether the control plane refused a batch for what is
// in it (400, 413, 422). Other answers (401, 404, 429, 5xx, …) say nothing
// about the records: they stay pending.
func poisoned(err error) bool {
	var ae *controlplane.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}
