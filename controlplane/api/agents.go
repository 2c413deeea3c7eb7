package api

import (
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// HeartbeatRequest is POST /v1/agents/heartbeat.
type HeartbeatRequest struct {
	AgentID string `json:"agent_id"`
	// State is what the agent says of itself; empty is AgentRunning.
	State     AgentState    `json:"state,omitempty"`
	Hostname  string        `json:"hostname"`
	Version   string        `json:"version"`
	StartedAt time.Time     `json:"started_at"`
	Health    Health        `json:"health"`
	Capacity  Capacity      `json:"capacity"`
	Running   []RunningTask `json:"running"`
	Outbox    OutboxStats   `json:"outbox"`
	// Repos are the repositories the agent serves, by name (its [[repo]]
	// tables).
	Repos []string `json:"repos,omitempty"`
	// Labels are what the agent says it is called (--label KEY=VALUE):
	// self-described, shown apart from the labels a person granted it,
	// and never what a label requirement is matched against (see
	// AgentView.GrantedLabels).
	Labels map[string]string `json:"labels,omitempty"`
	// Routing by capability: its executor kind, models, OS and arch.
	Capabilities
}

// AgentState is what an agent says of itself in its heartbeats.
type AgentState string

// The agent states.
const (
	// AgentRunning: it claims and runs tasks.
	AgentRunning AgentState = "running"
	// AgentDraining: it is stopping: it claims nothing and finishes what
	// it runs.
	AgentDraining AgentState = "draining"
	// AgentOffline: its last heartbeat; it is gone.
	AgentOffline AgentState = "offline"
)

// AgentStates lists every agent state.
var AgentStates = []AgentState{AgentRunning, AgentDraining, AgentOffline}

// Health is the executor's health as a heartbeat carries it: the health
// tracker's own snapshot (its grade, reason, since when, recent problems,
// and how attempts are confined), not a copy made field by field.
type Health = health.Snapshot

// HealthProblem is one recent problem of the executor.
type HealthProblem = health.Problem

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
	// LastActivityAt is when its attempt's processes were last seen at
	// work in silence, and Liveness says so while they are
	// (state.LivenessSilent): the stall limit counts from it.
	LastActivityAt time.Time `json:"last_activity_at,omitzero"`
	Liveness       string    `json:"liveness,omitempty"`
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
	// Resume lists the agent's parked tasks a person continued early, or
	// whose budget they raised: each resumes now, under the budget its
	// order says. Said again in every answer until the task resumes.
	Resume []ResumeOrder `json:"resume,omitempty"`
	// Replies are people's answers to the agent's approval requests, sent
	// again in every answer until the task leaves awaiting_reply (the agent
	// ignores a reply it already took).
	Replies []ReplyDelivery `json:"replies,omitempty"`
	// MaxAttemptOutputBytes is the cap on the log output the control
	// plane stores per attempt (its --max-attempt-output): an agent puts
	// no more of an attempt's output in its outbox, and counts the rest
	// (LogPayload.Withheld). 0 from a control plane that does not say.
	MaxAttemptOutputBytes int64 `json:"max_attempt_output_bytes,omitempty"`
	// PublicURL is where people reach the control plane's console
	// (--public-url), when it knows: the agent links to a task's page
	// from its pull request.
	PublicURL string `json:"public_url,omitempty"`
	// Stop lists tasks the agent runs whose tree of subtasks passed its
	// root's budget: the agent stops each as over its budget (it ends
	// budget_exceeded). Cancel names them too, for an agent from before
	// tree budgets, which cancels them.
	Stop []StopOrder `json:"stop,omitempty"`
	// CancelOrders say, of the tasks Cancel names, how each ends and why:
	// an agent that reads them ends the task as the control plane has
	// it, so that both views agree (who ended it and why). Cancel names
	// them too, for an agent from before, which cancels them.
	CancelOrders []CancelOrder `json:"cancel_orders,omitempty"`
}

// CancelOrder tells an agent to stop a task it runs (or, for one that
// ended before the order came, to note it; see state.CancelNote): the
// phase the task ends in, and who ended it and why, in a line. The
// phases: cancelled (someone cancelled it, or the control plane took it
// back: its lease went elsewhere, it is queued again, it is unknown), or
// the terminal phase the control plane already has it in (timed_out,
// expired or recoverable_failed by its watchdog).
type CancelOrder struct {
	TaskID string      `json:"task_id"`
	Phase  state.Phase `json:"phase"`
	Reason string      `json:"reason"`
	// At is when the cancel was asked, for a person's (or a parent
	// task's) cancel: the agent keeps it as the task's CancelAt.
	At time.Time `json:"at,omitzero"`
}

// ResumeOrder tells an agent to resume a parked task now: a person
// continued it, or raised its budget to MaxTokens and MaxTime (zero:
// that bound as it was).
type ResumeOrder struct {
	TaskID    string         `json:"task_id"`
	MaxTokens int64          `json:"max_tokens,omitempty"`
	MaxTime   state.Duration `json:"max_time,omitempty"`
}

// StopOrder tells an agent to stop a task it runs as over its budget,
// and why.
type StopOrder struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
}

// ReplyDelivery is a person's answer on its way to the agent.
type ReplyDelivery struct {
	TaskID    string   `json:"task_id"`
	RequestID string   `json:"request_id"`
	Decision  Decision `json:"decision"`
}

// AgentView is an agent as GET /v1/agents shows it.
type AgentView struct {
	AgentID       string    `json:"agent_id"`
	Hostname      string    `json:"hostname"`
	Version       string    `json:"version"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Online        bool      `json:"online"`
	// State is what the agent said in its last heartbeat.
	State    AgentState    `json:"state,omitempty"`
	Health   Health        `json:"health"`
	Capacity Capacity      `json:"capacity"`
	Running  []RunningTask `json:"running"`
	Outbox   OutboxStats   `json:"outbox"`
	// Repos are the repositories the agent said it serves, in its last
	// heartbeat or claim.
	Repos []string `json:"repos,omitempty"`
	// Labels are what its last heartbeat said it is called: the agent's
	// own word, self-described, which routes nothing.
	Labels map[string]string `json:"labels,omitempty"`
	// GrantedLabels are the labels a person granted the agent (agent
	// agents label), the only labels a task's label requirement is
	// matched against: what an agent says of itself never widens them.
	GrantedLabels map[string]string `json:"granted_labels,omitempty"`
	// Routing by capability: what its last heartbeat or claim advertised.
	Capabilities
	// Replica is the control plane replica its last heartbeat reached
	// (agent controlplane serve --replica-name), where there are several.
	Replica string `json:"replica,omitempty"`
}

// LabelsRequest is POST /v1/agents/{id}/labels: an operator grants an
// agent labels (Set, KEY=VALUE each, replacing a label of the same key)
// and takes labels back (Remove, by key).
type LabelsRequest struct {
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
}

// LabelsResponse is the labels an agent holds after a LabelsRequest.
type LabelsResponse struct {
	AgentID string            `json:"agent_id"`
	Labels  map[string]string `json:"labels"`
}
