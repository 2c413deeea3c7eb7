package state

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
)

// Payload is what an event carries: a PhaseEvent, a ProgressEvent, a
// LogEvent, an Attempt or a CompleteEvent, and nothing else (the set is
// sealed: a switch over it is whole).
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

func (PhaseEvent) payload()    {}
func (Progress) payload()      {}
func (LogEvent) payload()      {}
func (Attempt) payload()       {}
func (CompleteEvent) payload() {}

// PhaseEvent reports a phase change.
type PhaseEvent struct {
	Phase  Phase  `json:"phase"`
	Reason string `json:"reason,omitempty"`
	// Request is the question a person is asked, with phase
	// awaiting_reply.
	Request *ApprovalRequest `json:"request,omitempty"`
}

// ApprovalRequest is an executor's question for a person: may it run this
// command, or make these file changes? The answer (accept or decline)
// names the request by ID.
type ApprovalRequest struct {
	ID      string       `json:"id"`
	Kind    ApprovalKind `json:"kind"`
	Command string       `json:"command,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	Cwd     string       `json:"cwd,omitempty"`
	Paths   []string     `json:"paths,omitempty"`
}

// ApprovalKind says what an approval request asks to do.
type ApprovalKind string

// The kinds of request.
const (
	ApprovalCommand    ApprovalKind = "command"     // run a command
	ApprovalFileChange ApprovalKind = "file_change" // change files
)

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
