package api

import (
	"encoding/json"
	"time"

	"github.com/edgeagent/agent/state"
)

// EventsRequest is POST /v1/events: at most MaxEventsPerBatch events.
type EventsRequest struct {
	AgentID string  `json:"agent_id"`
	Events  []Event `json:"events"`
}

// Event is one outbox record on the wire.
type Event struct {
	Key       string          `json:"key"`
	Kind      state.EventKind `json:"kind"`
	TaskID    string          `json:"task_id"`
	Attempt   int             `json:"attempt"`
	LeaseID   string          `json:"lease_id"`
	CreatedAt time.Time       `json:"created_at"`
	Payload   json.RawMessage `json:"payload"`
}

// EventsResponse has one result per event, in order.
type EventsResponse struct {
	Results []EventResult `json:"results"`
	// Stop lists the batch's tasks whose tree of subtasks passed its
	// root's budget, as HeartbeatResponse.Stop does: the agent hears of
	// it in the answer to the report that passed it, not a heartbeat
	// later.
	Stop []StopOrder `json:"stop,omitempty"`
	// CancelOrders are for the batch's tasks whose cancel was asked: the
	// agent stops one it still runs, and notes the cancel on one that
	// ended before it came (state.CancelNote), as the control plane does.
	CancelOrders []CancelOrder `json:"cancel_orders,omitempty"`
}

// EventResult is the fate of one event.
type EventResult struct {
	Key    string       `json:"key"`
	Status EventStatus  `json:"status"`
	Reason RejectReason `json:"reason,omitempty"`
}

// EventStatus is what the control plane made of an event.
type EventStatus string

// The statuses of an event result.
const (
	// StatusAccepted: applied and stored.
	StatusAccepted EventStatus = "accepted"
	// StatusDuplicate: its key was accepted before; nothing changed.
	StatusDuplicate EventStatus = "duplicate"
	// StatusRejected: refused for good, for the result's Reason.
	StatusRejected EventStatus = "rejected"
)

// EventStatuses lists every status.
var EventStatuses = []EventStatus{StatusAccepted, StatusDuplicate, StatusRejected}

// RejectReason says why an event was rejected: one of the reasons below;
// ReasonInvalid is followed by ": " and what was wrong (see Invalid).
type RejectReason string

// Reasons for a rejection.
const (
	// ReasonTerminal: the task has ended; a late event changes nothing.
	ReasonTerminal RejectReason = "terminal"
	// ReasonUnknown: no such task.
	ReasonUnknown RejectReason = "unknown_task"
	// ReasonLease: the event's agent or lease is not the task's.
	ReasonLease RejectReason = "lease_mismatch"
	// ReasonInvalid: the event cannot be applied as it is.
	ReasonInvalid RejectReason = "invalid"
)

// Invalid is ReasonInvalid with what was wrong.
func Invalid(what string) RejectReason { return ReasonInvalid + ": " + RejectReason(what) }

// StoredEvent is an accepted event as GET /v1/tasks/{id}/events lists it.
type StoredEvent struct {
	Event
	AgentID    string    `json:"agent_id"`
	ReceivedAt time.Time `json:"received_at"`
	// Seq is the event's number among the task's, from 1: a page's
	// cursor. Answers carry it; the events file does not.
	Seq int `json:"seq,omitempty"`
}

// LogPayload is a log event's payload as the control plane stores and
// lists it: the agent's stream and lines and, on the event where it cut
// the attempt's output, its mark. The mark is the control plane's: an
// agent's log event that carries one is rejected (invalid).
//
// An agent says with Withheld what it cut of the attempt's output before
// its outbox (past the cap, the control plane's as its heartbeat answer
// says): lines it counted and did not send. The control plane counts them
// as cut, and marks its cut at that event when it had not cut yet; it
// never stores Withheld itself.
type LogPayload struct {
	state.LogEvent
	Cut      *OutputCut `json:"output_cut,omitempty"`
	Withheld *OutputCut `json:"output_withheld,omitempty"`
}

// OutputCut marks the log event where the control plane cut an attempt's
// output: its cap, and what it cut from this event. What it cut after this
// event it counts on the task (output_cut_lines, output_cut_bytes, and
// per attempt in output[]). As an agent's LogPayload.Withheld, it is the
// agent's cap and what it withheld since it last said so.
type OutputCut struct {
	CapBytes int64 `json:"cap_bytes"`
	Lines    int64 `json:"lines"`
	Bytes    int64 `json:"bytes"`
}

// Diff is a task's last diff as GET /v1/tasks/{id}/diff answers it: what
// its agent reported at the end of the attempt numbered Attempt, at At.
type Diff struct {
	TaskID  string    `json:"task_id"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	state.DiffEvent
}
