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
	// Said is what an agent or a task chose to say in it (an agent's
	// health reason, a task's question, a failure's reason), apart from
	// the control plane's own words: Text quotes it and says whose it is.
	Said *NotifySaid `json:"said,omitempty"`
	// Actions, on a question's notification (task.awaiting_reply), are
	// links that answer it without a sign-in: each opens a page that
	// shows the question and answers it with one tap; once, until
	// Expires. Set only where the control plane knows its public
	// address (--public-url).
	Actions *NotifyActions `json:"actions,omitempty"`
	// Folded, when set, says that this notification stands for several a
	// rate limit held back and folded into one: Text and the rest are the
	// latest of them's.
	Folded *NotifyFolded `json:"folded,omitempty"`
}

// NotifyActions are the links that answer a question from its
// notification.
type NotifyActions struct {
	Accept  string    `json:"accept"`
	Decline string    `json:"decline"`
	Expires time.Time `json:"expires"`
}

// NotifySaid is text an agent or a task chose, as a notification shows it:
// on one line, cut to MaxSaidRunes, every control or formatting character
// written out as an escape (\x1b, \u202e), never sent as it is.
type NotifySaid struct {
	// By is whose words they are: "agent a1", "task t-42".
	By   string `json:"by"`
	Text string `json:"text"`
}

// MaxSaidRunes bounds NotifySaid.Text.
const MaxSaidRunes = 200

// NotifyFolded counts the notifications one stands for.
type NotifyFolded struct {
	// Count is how many notifications it stands for, Events how many of
	// each event.
	Count  int                 `json:"count"`
	Events map[NotifyEvent]int `json:"events"`
	// First and Last are when the first and the last of them happened.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Limit is the limit that held them back: "repeat" (an agent's or a
	// task's repeats of an event), "agent" or "task" (the notifications
	// about one), or "target" (all of a target's); WindowS, the window
	// the limits count in, in seconds.
	Limit   string  `json:"limit"`
	WindowS float64 `json:"window_s"`
	// Latest is the latest one's own text (Text adds the count).
	Latest string `json:"latest"`
}

// NotifyEvent is what a notification tells.
type NotifyEvent string

// The events.
const (
	// NotifyAwaitingReply: a task asks a person's approval.
	NotifyAwaitingReply NotifyEvent = "task.awaiting_reply"
	// NotifyApprovalExpired: nobody answered a task's question within its
	// agent's approval timeout, and the agent declined it; the task goes
	// on without what it asked.
	NotifyApprovalExpired NotifyEvent = "task.approval_expired"
	// NotifyCompleted: a task completed.
	NotifyCompleted NotifyEvent = "task.completed"
	// NotifyFailed: a task ended failed, timed out or expired.
	NotifyFailed NotifyEvent = "task.failed"
	// NotifyBlocked: a task ended because the safety gate would not run
	// again an attempt that had side effects; a person may continue it.
	NotifyBlocked NotifyEvent = "task.blocked"
	// NotifyRetrying: a task's attempt failed and its agent scheduled the
	// next (a replay or a continue) after a backoff: the retry reminder.
	// Repeats for one task fold into one per window (the repeat gate).
	NotifyRetrying NotifyEvent = "task.retrying"
	// NotifyParked: a task parked at a usage limit: it continues its
	// session on its own when the limit resets (resumes_at).
	NotifyParked NotifyEvent = "task.parked"
	// NotifyResumed: a parked task resumed, its limit reset (or a person
	// continued it early).
	NotifyResumed NotifyEvent = "task.resumed"
	// NotifyAgentOffline: an agent fell silent for three heartbeat
	// intervals without saying it stops: a crash, a lost network, a
	// machine gone.
	NotifyAgentOffline NotifyEvent = "agent.offline"
	// NotifyAgentStopped: an agent said it stops, in its last heartbeat:
	// a planned stop (agent stop, SIGTERM, its service stopped or
	// restarted, the machine shutting down). No alarm: only the targets
	// that name it in their events get it (ByDefault).
	NotifyAgentStopped NotifyEvent = "agent.stopped"
	// NotifyAgentUnhealthy: an agent's executor became unavailable.
	NotifyAgentUnhealthy NotifyEvent = "agent.unhealthy"
	// NotifyTest: agent controlplane notify test.
	NotifyTest NotifyEvent = "test"
	// NotifyDigest: notifications of several events that a rate limit
	// held back, folded into one (Folded counts them). Every target gets
	// it, of the events it wants.
	NotifyDigest NotifyEvent = "digest"
)

// NotifyEvents lists every notification event.
var NotifyEvents = []NotifyEvent{NotifyAwaitingReply, NotifyApprovalExpired, NotifyCompleted, NotifyFailed, NotifyBlocked, NotifyRetrying,
	NotifyParked, NotifyResumed,
	NotifyAgentOffline, NotifyAgentStopped, NotifyAgentUnhealthy, NotifyTest}

// ByDefault reports whether a target that names no events gets e: every
// event but agent.stopped, which a target gets only by naming it, for a
// planned restart is no news to the person who made it, and an alarm at
// every one teaches people to ignore agent.offline.
func (e NotifyEvent) ByDefault() bool { return e != NotifyAgentStopped }

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
	// Question is what the task asks, for NotifyAwaitingReply, or what it
	// asked and nobody answered, for NotifyApprovalExpired.
	Question *state.ApprovalRequest `json:"question,omitempty"`
	// Denied counts the tool calls the task's attempts were refused.
	Denied int `json:"denied,omitempty"`
	// PullRequest is the address of the pull request the agent opened
	// for the task's branch, for NotifyCompleted.
	PullRequest string `json:"pull_request,omitempty"`
	// Summary is what the task said of its result, for NotifyCompleted:
	// its words, Inert, cut to MaxNotifiedSummaryRunes (Text quotes them
	// and Said says whose they are).
	Summary string `json:"summary,omitempty"`
	// Changes is what the task changed in its repository, for
	// NotifyCompleted of a task that ran on one.
	Changes *NotifiedChanges `json:"changes,omitempty"`
}

// NotifiedChanges is what a completed task changed in its repository, as
// its notification says it.
type NotifiedChanges struct {
	// Branch is the task's branch; Base the ref it was made from.
	Branch string `json:"branch"`
	Base   string `json:"base,omitempty"`
	// Commits are the first MaxNotifiedCommits commits on the branch
	// since the base, oldest first, their subjects the task's words,
	// Inert; CommitsMore counts the others.
	Commits     []state.Commit `json:"commits"`
	CommitsMore int            `json:"commits_more,omitempty"`
	// Files, Insertions and Deletions are the diff stat of the task's
	// work against the base; Uncommitted says some of it is in no
	// commit (the task was submitted --no-commit).
	Files       int  `json:"files"`
	Insertions  int  `json:"insertions"`
	Deletions   int  `json:"deletions"`
	Uncommitted bool `json:"uncommitted,omitempty"`
}

// Bounds of a completion's notification.
const (
	MaxNotifiedSummaryRunes = 1000
	MaxNotifiedCommits      = 10
)

// NotifiedAgent is the agent a notification is about, as it was then.
type NotifiedAgent struct {
	ID            string    `json:"id"`
	Hostname      string    `json:"hostname,omitempty"`
	Grade         string    `json:"grade,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}
