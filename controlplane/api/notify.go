package api

import (
	"time"

	"github.com/edgeagent/agent/state"
)

// Notification is what the control plane tells a person's notification
// target (a webhook, Slack, ntfy): a task that awaits a person, completed,
// failed or is blocked, or an agent that went offline or unhealthy. It is
// the body a generic webhook receives, as JSON. Each is delivered at least
// once: a receiver may get one twice, with the same ID, and should keep
// the IDs it handled to drop the second.
type Notification struct {
	// ID is the notification's own: the same on every retry and to every
	// target.
	ID    string      `json:"id"`
	Event NotifyEvent `json:"event"`
	// At is when the change that caused it was made.
	At time.Time `json:"at"`
	// Text says it in one line, for a person.
	Text string `json:"text"`
	// Link is the console's page of the task or agent, when the control
	// plane knows its public address (--public-url).
	Link  string         `json:"link,omitempty"`
	Task  *NotifiedTask  `json:"task,omitempty"`
	Agent *NotifiedAgent `json:"agent,omitempty"`
}

// NotifyEvent is what a notification tells.
type NotifyEvent string

// The events.
const (
	// NotifyAwaitingReply: a task asks a person's approval.
	NotifyAwaitingReply NotifyEvent = "task.awaiting_reply"
	// NotifyCompleted: a task completed.
	NotifyCompleted NotifyEvent = "task.completed"
	// NotifyFailed: a task ended failed, timed out or expired.
	NotifyFailed NotifyEvent = "task.failed"
	// NotifyBlocked: a task ended because the safety gate would not run
	// again an attempt that had side effects; a person may continue it.
	NotifyBlocked NotifyEvent = "task.blocked"
	// NotifyAgentOffline: an agent went offline (it said so, or fell
	// silent).
	NotifyAgentOffline NotifyEvent = "agent.offline"
	// NotifyAgentUnhealthy: an agent's executor became unavailable.
	NotifyAgentUnhealthy NotifyEvent = "agent.unhealthy"
	// NotifyTest: agent controlplane notify test.
	NotifyTest NotifyEvent = "test"
)

// NotifyEvents lists every notification event.
var NotifyEvents = []NotifyEvent{NotifyAwaitingReply, NotifyCompleted, NotifyFailed, NotifyBlocked,
	NotifyAgentOffline, NotifyAgentUnhealthy, NotifyTest}

// NotifiedTask is the task a notification is about, as it was then.
type NotifiedTask struct {
	ID          string      `json:"id"`
	Title       string      `json:"title,omitempty"`
	Phase       state.Phase `json:"phase"`
	Reason      string      `json:"reason,omitempty"`
	Agent       string      `json:"agent,omitempty"`
	Repo        string      `json:"repo,omitempty"`
	Attempt     int         `json:"attempt,omitempty"`
	MaxAttempts int         `json:"max_attempts,omitempty"`
	// ErrorCode and Gate are the last attempt's error class and the
	// safety gate's decision, for a task that ended failed or blocked.
	ErrorCode state.ErrorCode  `json:"error_code,omitempty"`
	Gate      state.GateReason `json:"gate,omitempty"`
	// Question is what the task asks, for NotifyAwaitingReply.
	Question *state.ApprovalRequest `json:"question,omitempty"`
	// PullRequest is the address of the pull request the agent opened
	// for the task's branch, for NotifyCompleted.
	PullRequest string `json:"pull_request,omitempty"`
}

// NotifiedAgent is the agent a notification is about, as it was then.
type NotifiedAgent struct {
	ID            string    `json:"id"`
	Hostname      string    `json:"hostname,omitempty"`
	Grade         string    `json:"grade,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}
