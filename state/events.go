package state

import (
	"strings"
	"time"
)

// The payloads of the events an agent reports, as the control plane API
// names them. The outbox stores them, the control plane applies them.

// EventKind is the kind of a reported event; the same names as outbox kinds.
type EventKind string

// The kinds of event.
const (
	EventPhase    EventKind = "phase"
	EventProgress EventKind = "progress"
	EventLog      EventKind = "log"
	EventAttempt  EventKind = "attempt"
	EventComplete EventKind = "complete"
	EventDiff     EventKind = "diff"
	EventPush     EventKind = "push"
)

// Payload is what an event carries: a PhaseEvent, a ProgressEvent, a
// LogEvent, an Attempt, a CompleteEvent, a DiffEvent or a PushEvent, and
// nothing else (the set is sealed: a switch over it is whole).
type Payload interface {
	// EventKind is the kind of event that carries it.
	EventKind() EventKind
	payload()
}

// EventKind implements Payload.
func (PhaseEvent) EventKind() EventKind { return EventPhase }

// EventKind implements Payload.
func (Progress) EventKind() EventKind { return EventProgress }

// EventKind implements Payload.
func (LogEvent) EventKind() EventKind { return EventLog }

// EventKind implements Payload.
func (Attempt) EventKind() EventKind { return EventAttempt }

// EventKind implements Payload.
func (CompleteEvent) EventKind() EventKind { return EventComplete }

// EventKind implements Payload.
func (DiffEvent) EventKind() EventKind { return EventDiff }

// EventKind implements Payload.
func (PushEvent) EventKind() EventKind { return EventPush }

func (PhaseEvent) payload()    {}
func (Progress) payload()      {}
func (LogEvent) payload()      {}
func (Attempt) payload()       {}
func (CompleteEvent) payload() {}
func (DiffEvent) payload()     {}
func (PushEvent) payload()     {}

// PhaseEvent reports a phase change.
type PhaseEvent struct {
	Phase  Phase  `json:"phase"`
	Reason string `json:"reason,omitempty"`
	// Request is the question a person is asked, with phase
	// awaiting_reply.
	Request *ApprovalRequest `json:"request,omitempty"`
	// Expired is the question the task leaves awaiting_reply without an
	// answer: nobody answered it within the agent's approval timeout, and
	// it was declined.
	Expired *ApprovalRequest `json:"expired,omitempty"`
	// Parked, with phase parked, says why the task waits and until when.
	Parked *Park `json:"parked,omitempty"`
}

// ApprovalRequest is an executor's question for a person: may it run this
// command, make these file changes, or use this tool? The answer (accept
// or decline) names the request by ID. What it carries is cut to bounds
// (Bound).
type ApprovalRequest struct {
	ID   string       `json:"id"`
	Kind ApprovalKind `json:"kind"`
	// Tool is the CLI's tool that asks: Codex's shell or apply_patch,
	// Claude Code's Bash, Write, Edit, WebFetch, …
	Tool string `json:"tool,omitempty"`
	// Command and Cwd: the command a command request runs, and where.
	Command string `json:"command,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	// Paths are the files a file change request changes (the first
	// MaxApprovalPaths; PathsMore counts the rest), and Diff the change,
	// as a unified diff (a new file's content as added lines), cut at
	// MaxApprovalDiff at a line's end (DiffCut).
	Paths     []string `json:"paths,omitempty"`
	PathsMore int      `json:"paths_more,omitempty"`
	Diff      string   `json:"diff,omitempty"`
	DiffCut   bool     `json:"diff_cut,omitempty"`
	// Input is a tool request's input as the CLI sent it (JSON), for a
	// tool that neither runs a command nor changes files.
	Input string `json:"input,omitempty"`
	// Asked is when the agent asked, and Deadline when the request is
	// declined if nobody answers it (zero when it waits for ever).
	Asked    time.Time `json:"asked,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// ApprovalKind says what an approval request asks to do.
type ApprovalKind string

// The kinds of request.
const (
	ApprovalCommand    ApprovalKind = "command"     // run a command
	ApprovalFileChange ApprovalKind = "file_change" // change files
	ApprovalTool       ApprovalKind = "tool"        // use another tool (Claude Code's WebFetch, an MCP tool, …)
)

// DiffEvent is what a task's work on its repository comes to, at the end
// of an attempt that ran in a workspace: the unified diff of its branch's
// head (and anything left uncommitted) against the base commit, as git
// diff prints it with binary files named, not carried. The patch is cut
// at a line's end to MaxDiffBytes; Bytes is the whole patch's size.
type DiffEvent struct {
	Repo       string `json:"repo"`
	Branch     string `json:"branch"`
	BaseCommit string `json:"base_commit"`
	Head       string `json:"head"`
	Files      int    `json:"files"`
	Insertions int    `json:"insertions"`
	Deletions  int    `json:"deletions"`
	Patch      string `json:"patch"`
	Bytes      int64  `json:"bytes"`
	Cut        bool   `json:"cut,omitempty"`
}

// MaxDiffBytes bounds the patch a DiffEvent carries: it fits one outbox
// record, and the control plane keeps it with the task's events.
const MaxDiffBytes = 512 << 10

// CutPatch cuts patch to at most max bytes, at the end of a line, and
// says whether it did.
func CutPatch(patch string, max int) (string, bool) {
	if len(patch) <= max {
		return patch, false
	}
	cut := patch[:max]
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 {
		cut = cut[:i+1]
	}
	return cut, true
}

// PushEvent is what a push of a completed task's branch came to, when a
// person tried it again (agent tasks push) after the task had ended: the
// one event a control plane takes of a completed task, from the agent
// holding its lease, changing its changes' push fields alone.
type PushEvent struct {
	Pushed      *Push  `json:"pushed,omitempty"`
	PullRequest string `json:"pull_request,omitempty"`
	PushError   string `json:"push_error,omitempty"`
}

// ProgressEvent reports progress.
type ProgressEvent = Progress

// LogStream names where a log event's lines came from.
type LogStream string

// The streams.
const (
	LogStdout     LogStream = "stdout"      // the executor's raw output
	LogStderr     LogStream = "stderr"      // its raw errors
	LogCommand    LogStream = "command"     // a tool command's output, as the CLI relayed it
	LogOutput     LogStream = "output"      // visible output
	LogTool       LogStream = "tool"        // a tool the executor used
	LogSideEffect LogStream = "side_effect" // a side effect it reported
	LogExecutor   LogStream = "executor"    // its own log messages
	LogAgent      LogStream = "agent"       // the agent's notes
)

// LogEvent carries lines of output.
type LogEvent struct {
	Stream LogStream `json:"stream"`
	Lines  []string  `json:"lines"`
}

// An attempt event's payload is the Attempt record as it stands.

// CompleteEvent reports the end of a task.
type CompleteEvent struct {
	Status   Phase     `json:"status"` // the terminal phase
	Summary  string    `json:"summary,omitempty"`
	Result   any       `json:"result,omitempty"`
	Error    *Error    `json:"error,omitempty"`
	Attempts []Attempt `json:"attempts"`
	// Changes is what the task did to its repository, when it ran in a
	// workspace: the control plane keeps it as the result's changes.
	Changes *Changes `json:"changes,omitempty"`
	// Usage is what the task's attempts spent together: the control
	// plane keeps it as the result's usage.
	Usage *TaskUsage `json:"usage,omitempty"`
}
