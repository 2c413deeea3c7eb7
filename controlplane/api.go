// Package controlplane is the agent's side of the control plane API (v1,
// JSON over HTTP), its client, and the reference control plane server
// (`agent controlplane serve`).
//
// Every request carries Authorization: Bearer <token>. Events are
// idempotent by key: the second arrival of a key is a duplicate and changes
// nothing, so an agent can replay its outbox freely. A terminal task is
// final: a late completion is rejected with reason "terminal", and the
// agent marks that record dead.
//
// The reference server is bounded against one task or client: titles and
// prompts are capped (MaxTitleRunes, MaxPromptBytes), the log output it
// stores per attempt too (ServerOptions.MaxAttemptOutput; past it lines are
// counted and one event marks the cut), the lists come in pages written a
// piece at a time (MaxTasksPage, MaxEventsPage, NextAfterHeader), events
// stay on disk, and the idempotency keys of ended tasks leave memory.
package controlplane

import (
	"encoding/json"
	"time"

	"github.com/edgeagent/agent/state"
)

// Limits of one events request.
const (
	MaxEventsPerBatch = 500
	MaxBatchBytes     = 1 << 20
)

// HeartbeatRequest is POST /v1/agents/heartbeat.
type HeartbeatRequest struct {
	AgentID string `json:"agent_id"`
	// State is running (or empty), draining (stopping: it claims nothing
	// and finishes what it runs), or offline (its last heartbeat: gone).
	State     string        `json:"state,omitempty"`
	Hostname  string        `json:"hostname"`
	Version   string        `json:"version"`
	StartedAt time.Time     `json:"started_at"`
	Health    Health        `json:"health"`
	Capacity  Capacity      `json:"capacity"`
	Running   []RunningTask `json:"running"`
	Outbox    OutboxStats   `json:"outbox"`
}

// Health is the executor's health as a heartbeat carries it.
type Health struct {
	Grade        string          `json:"grade"` // available, degraded, unavailable
	Reason       string          `json:"reason,omitempty"`
	Since        time.Time       `json:"since"`
	RecentErrors []HealthProblem `json:"recent_errors"`
	// Isolation says how the agent confines its attempts, in a line.
	Isolation string `json:"isolation,omitempty"`
}

// HealthProblem is one recent problem of the executor.
type HealthProblem struct {
	At     time.Time `json:"at"`
	Signal string    `json:"signal"`
	Detail string    `json:"detail,omitempty"`
}

// Capacity is how many tasks the agent runs at most and now.
type Capacity struct {
	Max     int `json:"max"`
	Running int `json:"running"`
}

// RunningTask is a task the agent is running.
type RunningTask struct {
	TaskID         string      `json:"task_id"`
	Attempt        int         `json:"attempt"`
	Phase          state.Phase `json:"phase"`
	LastProgressAt time.Time   `json:"last_progress_at"`
}

// OutboxStats summarize the agent's outbox.
type OutboxStats struct {
	Pending           int     `json:"pending"`
	OldestPendingAgeS float64 `json:"oldest_pending_age_s"`
	Dead              int     `json:"dead"`
	Bytes             int64   `json:"bytes"`
	// WriteFailing says why the agent's writes fail (disk_full: …), and
	// Held how many reports it holds in memory meanwhile.
	WriteFailing string `json:"write_failing,omitempty"`
	Held         int    `json:"held,omitempty"`
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	ServerTime         time.Time `json:"server_time"`
	HeartbeatIntervalS float64   `json:"heartbeat_interval_s"`
	// Cancel lists tasks the agent must cancel.
	Cancel []string `json:"cancel"`
	// Replies are people's answers to the agent's approval requests, sent
	// again in every answer until the task leaves awaiting_reply (the agent
	// ignores a reply it already took).
	Replies []ReplyDelivery `json:"replies,omitempty"`
}

// ReplyDelivery is a person's answer on its way to the agent.
type ReplyDelivery struct {
	TaskID    string `json:"task_id"`
	RequestID string `json:"request_id"`
	Decision  string `json:"decision"`
}

// ReplyRequest is POST /v1/tasks/{id}/reply: a person's answer to the
// task's approval request.
type ReplyRequest struct {
	RequestID string `json:"request_id"`
	Decision  string `json:"decision"` // accept or decline
}

// ClaimRequest is POST /v1/tasks/claim.
type ClaimRequest struct {
	AgentID     string `json:"agent_id"`
	Max         int    `json:"max"`
	HealthGrade string `json:"health_grade"`
	// RequestID is the agent's id for this claim. Asked again (its answer
	// was lost), the same claim gets the same grant rather than a new one.
	RequestID string `json:"request_id,omitempty"`
}

// ReleaseRequest is POST /v1/tasks/release: claimed tasks an agent will not
// run (a grant larger than it asked for) go back to the queue.
type ReleaseRequest struct {
	AgentID string   `json:"agent_id"`
	TaskIDs []string `json:"task_ids"`
}

// ClaimResponse grants tasks, each under a lease; empty when none.
type ClaimResponse struct {
	Tasks []Claimed `json:"tasks"`
}

// Claimed is one task granted to an agent.
type Claimed struct {
	Task  state.Task  `json:"task"`
	Lease state.Lease `json:"lease"`
}

// EventsRequest is POST /v1/events.
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
}

// The statuses of an event result.
const (
	StatusAccepted  = "accepted"
	StatusDuplicate = "duplicate"
	StatusRejected  = "rejected"
)

// Reasons for a rejection.
const (
	ReasonTerminal = "terminal"
	ReasonUnknown  = "unknown_task"
	ReasonLease    = "lease_mismatch"
	ReasonInvalid  = "invalid"
)

// EventResult is the fate of one event.
type EventResult struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// CreateTaskRequest is POST /v1/tasks.
type CreateTaskRequest struct {
	Title       string `json:"title,omitempty"`
	Prompt      string `json:"prompt"`
	Prefer      string `json:"prefer,omitempty"` // gui or any (default)
	MaxAttempts int    `json:"max_attempts,omitempty"`
}

// Caps on what a person's request puts in a task, which every list of
// tasks carries: a longer title is cut to MaxTitleRunes characters, its
// last one an ellipsis; a longer prompt is refused (400).
const (
	MaxTitleRunes  = 200
	MaxPromptBytes = 256 << 10
)

// TaskView is a task as GET /v1/tasks and /v1/tasks/{id} show it.
type TaskView struct {
	state.Task
	ProgressCard []state.Step `json:"progress_card"`
	// OutputCutLines and OutputCutBytes add up what the control plane cut
	// of the task's forwarded output, every attempt's (see Task.Output).
	OutputCutLines int64 `json:"output_cut_lines"`
	OutputCutBytes int64 `json:"output_cut_bytes"`
}

// StoredEvent is an accepted event as GET /v1/tasks/{id}/events lists it.
type StoredEvent struct {
	Event
	AgentID    string    `json:"agent_id"`
	ReceivedAt time.Time `json:"received_at"`
	// Seq is the event's number among the task's, from 1: a page's
	// cursor. Answers carry it; the events file does not.
	Seq int `json:"seq,omitempty"`
}

// The lists GET /v1/tasks and GET /v1/tasks/{id}/events come in pages:
// ?limit=N (at most the maximum; more is taken as the maximum) items after
// ?after=CURSOR, a task's id for tasks (oldest first), an event's seq for
// events. An answer is a JSON array; when more follow, its NextAfterHeader
// holds the cursor to ask for the next page with. A page of events also
// stops before the event that would take it past MaxEventsPageBytes (it
// holds one event at least). A request without ?limit or ?after gets the
// first page.
const (
	DefaultTasksPage   = 100
	MaxTasksPage       = 500
	DefaultEventsPage  = 500
	MaxEventsPage      = 1000
	MaxEventsPageBytes = 1 << 20
	NextAfterHeader    = "Next-After"
)

// AgentView is an agent as GET /v1/agents shows it.
type AgentView struct {
	AgentID       string        `json:"agent_id"`
	Hostname      string        `json:"hostname"`
	Version       string        `json:"version"`
	StartedAt     time.Time     `json:"started_at"`
	LastHeartbeat time.Time     `json:"last_heartbeat"`
	Online        bool          `json:"online"`
	State         string        `json:"state,omitempty"` // running, draining or offline, as the agent said
	Health        Health        `json:"health"`
	Capacity      Capacity      `json:"capacity"`
	Running       []RunningTask `json:"running"`
	Outbox        OutboxStats   `json:"outbox"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}
