package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/metrics"
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
	obs     deliveryCounter // counts deliveries (metrics, replay's report); nil: none
	// stop, if set, stops a task the control plane's answer says is over
	// its tree's budget: the answer to the report that took the tree past
	// it, not a heartbeat later; cancel carries out a cancel order the
	// answer gives (a cancel that crossed the report of the task's end is
	// noted on the task).
	stop   func(api.StopOrder)
	cancel func(api.CancelOrder)
}

// deliveryCounter is told what became of the records a delivery try took.
type deliveryCounter interface {
	Sent(result metrics.SendResult, n int)
}

// drain delivers every pending record, reading the next batch from the
// outbox while the one before is in flight, so that the disk and the
// network work side by side. progress, if set, is told after each batch
// how many records it took. It stops at the first error.
func (s *sender) drain(ctx context.Context, progress func(n int)) error {
	type read struct {
		recs []outbox.Record
		err  error
	}
	recs, err := s.outbox.PendingAfter(0, sendBatchRecords, sendBatchBytes)
	for err == nil && len(recs) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		ahead := make(chan read, 1)
		go func(after uint64) {
			r, err := s.outbox.PendingAfter(after, sendBatchRecords, sendBatchBytes)
			ahead <- read{r, err}
		}(recs[len(recs)-1].Seq)
		sendErr := s.send(ctx, recs)
		next := <-ahead // always awaited: the reader never outlives drain
		if progress != nil {
			progress(len(recs))
		}
		if sendErr != nil {
			return sendErr
		}
		recs, err = next.recs, next.err
	}
	return err
}

// send delivers recs. A batch the control plane refuses as a whole (a 4xx
// other than an auth or rate problem: one record it cannot even parse) is
// split in halves, again and again, until the record that poisons it is
// alone; that one is marked dead with the reason, and the others go
// through. One bad record never blocks those behind it.
func (s *sender) send(ctx context.Context, recs []outbox.Record) error {
	events := make([]api.Event, len(recs))
	leases := map[string]string{}
	for i, r := range recs {
		lease, ok := leases[r.TaskID]
		if !ok {
			lease = s.leaseOf(r.TaskID)
			leases[r.TaskID] = lease
		}
		events[i] = api.Event{Key: r.Key, Kind: state.EventKind(r.Kind), TaskID: r.TaskID, Attempt: r.Attempt,
			LeaseID: lease, CreatedAt: r.CreatedAt, Payload: r.Payload}
	}
	resp, sendErr := s.client.PostEvents(ctx, s.agentID, events)
	results := resp.Results
	s.countResults(results)
	obey(resp.CancelOrders, resp.Stop, nil, s.cancel, s.stop)
	var sent []uint64
	for i, res := range results {
		r := recs[i]
		switch res.Status {
		case api.StatusAccepted, api.StatusDuplicate:
			sent = append(sent, r.Seq)
		default:
			s.log.Warn("record rejected for good; marked dead", "seq", r.Seq, "task", r.TaskID, "kind", r.Kind, "reason", res.Reason)
			if err := s.outbox.MarkDead(string(res.Reason), r.Seq); err != nil {
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
			s.count(metrics.SendDead, 1)
			return s.outbox.MarkDead("refused: "+sendErr.Error(), r.Seq)
		}
		half := len(rest) / 2
		if err := s.send(ctx, rest[:half]); err != nil {
			return err
		}
		return s.send(ctx, rest[half:])
	}
	s.count(metrics.SendFailed, len(rest))
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
