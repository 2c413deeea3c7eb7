package runner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/state"
)

// Executor runs attempts.
type Executor interface {
	// Name names the executor in logs and health reports.
	Name() string
	// Run runs one attempt and returns how it ended. It calls emit, from
	// one goroutine at a time, for each event, and returns only after its
	// last emit has returned. When ctx is done it stops the attempt: the
	// exec executor sends SIGTERM to the process group and SIGKILL after a
	// grace period; an app-server executor interrupts the turn.
	Run(ctx context.Context, spec AttemptSpec, emit func(Event)) Exit
	// Probe reports whether the executor could start now (the binary is
	// there and executable), without running a task.
	Probe(ctx context.Context) error
}

// Resumer is an executor that can continue an earlier attempt's session
// (AttemptSpec.Resume): the CLI takes the conversation up where it was
// cut, instead of starting it again. Its session events say where the
// CLI keeps the session (Event.SessionPath); only such a session is
// continued.
type Resumer interface {
	Executor
	// Resumes reports whether the executor, as configured, can continue
	// sessions.
	Resumes() bool
}

// CanResume reports whether e continues sessions.
func CanResume(e Executor) bool {
	r, ok := e.(Resumer)
	return ok && r.Resumes()
}

// Resume is the session an attempt continues, and what to tell the model.
type Resume struct {
	// SessionID is the CLI's session (Codex thread id, Claude session id)
	// and Path where the CLI keeps it, as the earlier attempt recorded.
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	// Prompt is the follow-up the resumed session is sent instead of the
	// task's prompt: that the turn was cut, why, and to go on.
	Prompt string `json:"prompt"`
}

// AttemptSpec is what an executor needs to run one attempt.
type AttemptSpec struct {
	Task      TaskInput
	AttemptID string
	// Mark tags every process of the attempt (proc.MarkEnv), so that none
	// outlives it. Default: one made from the attempt id.
	Mark string
	// FirstEventLimit is the attempt's first-event limit, for executors
	// that bound their CLI's own waits within it.
	FirstEventLimit time.Duration
	// WorkDir is the task's work directory, when the runner gives tasks
	// one; executors run there.
	WorkDir string
	// TempDir is the attempt's own temporary directory (its TMPDIR), when
	// it is confined.
	TempDir string
	// ServeDir is a directory of the attempt's that the agent writes and
	// the attempt can only read, when it is confined: where the agent
	// serves the attempt what the task must not replace (Claude Code's
	// ask socket and its token). A file the executor puts there for the
	// task to open goes to the task user, if there is one (GiveToTask).
	ServeDir string
	// SessionDir is the task's own directory outside its work directory,
	// kept across its attempts (AGENT_SESSION_DIR): where an exec child
	// keeps a session it can continue.
	SessionDir string
	// Confine, if set, is what the attempt's processes may reach; the
	// executor adds what its CLI keeps of its own (see AttemptSpec.Confinement).
	Confine *landlock.Policy
	// Egress, if set, is where the attempt may connect; the executor adds
	// its model API (see AttemptSpec.EgressPolicy). Nil: the host's
	// network.
	Egress *egress.Policy
	// TaskUser, if set, is who the attempt runs as (a root agent's
	// --task-user); executors pass ProcUser on.
	TaskUser *TaskUser
	// credentials are the person's credentials the attempt is denied,
	// but those its CLI keeps in its own state (see Isolation.Credentials).
	credentials []string
	// Resume, if set, continues an earlier attempt's session: the
	// executor resumes it and sends Resume.Prompt, not the task's prompt.
	// A session it cannot resume (its files gone, the CLI refusing) ends
	// the attempt with an error event of code state.CodeSessionLost, and
	// the executor never starts a new session in its place.
	Resume *Resume
	// Ask asks a person to approve what the executor is about to do (the
	// approval policy ask) and returns the answer: the runner moves the
	// task to awaiting_reply with the question and back when it is
	// answered, records a decline as a denied call, and declines on its
	// own when nobody answers in time. One question at a time: an
	// executor waits for the answer before it asks the next. Nil when
	// nobody can be asked: the executor then declines, and reports the
	// decline as an EventDenied.
	Ask func(ctx context.Context, req state.ApprovalRequest) Approval
	// ApprovalTimeout is how long Ask waits for a person before it
	// declines; 0 when it waits for ever. An executor whose CLI bounds
	// its own wait for an answer makes that bound longer.
	ApprovalTimeout time.Duration
	// Subtasks: TaskEnv are NAME=VALUE variables the task's executor gets
	// over any other of the same name (Runner.Env): its task token and
	// where to use it. Never logged.
	TaskEnv []string
	// Withhold names variables of the agent's environment the executor
	// never gets, whatever else says to pass them (Runner.Withhold): the
	// tokens of the forges the agent opens pull requests on.
	Withhold []string
	// Spool, if set, has the attempt outlive the agent (see Reattacher);
	// Reattach, if set, takes up one a previous life of the agent left.
	Spool    *Spool
	Reattach *Reattach
}

// Approval is the answer to an approval request.
type Approval string

// The answers. Cancel also ends the turn.
const (
	ApprovalAccept  Approval = "accept"
	ApprovalDecline Approval = "decline"
	ApprovalCancel  Approval = "cancel"
)

// ApprovalPolicy says how an executor answers approval requests.
type ApprovalPolicy string

// The policies: never ask (the CLI runs without asking, within its
// sandbox), accept or decline every request, or ask a person.
const (
	ApprovalNever      ApprovalPolicy = "never"
	ApprovalAcceptAll  ApprovalPolicy = "accept"
	ApprovalDeclineAll ApprovalPolicy = "decline"
	ApprovalAsk        ApprovalPolicy = "ask"
)

// Clip shortens s to at most n bytes, marking the cut: for a CLI's text
// in a log line or a reason.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ProcessMark returns the attempt's process mark (Mark, or one made from
// the attempt id).
func (s AttemptSpec) ProcessMark() string {
	if s.Mark != "" {
		return s.Mark
	}
	return proc.NewMark("", s.AttemptID)
}

// TaskInput is the task as the executor sees it: the JSON line the exec
// executor writes to the child's stdin.
type TaskInput struct {
	ID        string `json:"id"`
	Title     string `json:"title,omitempty"`
	Prompt    string `json:"prompt"`
	Attempt   int    `json:"attempt"`
	AttemptID string `json:"attempt_id"`
	Model     string `json:"model,omitempty"`
	// Resume, on a continue, is the session to resume and the follow-up
	// to send instead of the prompt: AttemptSpec.Resume, for the exec
	// child.
	Resume *Resume `json:"resume,omitempty"`
}

// EventType names what an executor event reports.
type EventType string

// The event types. The first nine are what an exec child writes on stdout
// as JSON objects ({"type": …}); Session and Lines are made by executors.
const (
	EventPhase      EventType = "phase"
	EventProgress   EventType = "progress"
	EventOutput     EventType = "output"
	EventTool       EventType = "tool"
	EventSideEffect EventType = "side_effect"
	EventLog        EventType = "log"
	EventResult     EventType = "result"
	EventError      EventType = "error"
	// EventUsage reports the tokens the attempt used so far: each one
	// replaces the last (input_tokens, output_tokens, total_tokens; a
	// total of zero is input and output together).
	EventUsage EventType = "usage"
	// EventDenied reports a tool call the executor was refused, by its
	// approval policy or the CLI's own permissions (name: the tool;
	// description: what it asked; message: why). A question a person
	// declined, or that expired, the runner records itself.
	EventDenied EventType = "denied"
	// EventSession binds the executor's session id to the attempt.
	EventSession EventType = "session"
	// EventLines carries raw lines of stdout or stderr that are not events.
	EventLines EventType = "lines"
)

// ToolStage is how far a tool event has come.
type ToolStage string

// The stages. Input: the model is writing the tool's input; call: the
// tool is called; result: its result is in. Input does not count as a
// tool executed (the safety gate); the others do.
const (
	StageInput  ToolStage = "input"
	StageCall   ToolStage = "call"
	StageResult ToolStage = "result"
)

// LogLevel is how much a log event matters. An exec child may write
// another level: it is passed on as written.
type LogLevel string

// The levels executors use.
const (
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
)

// Stream names where a lines event's lines came from: the log stream the
// runner reports them in.
type Stream = state.LogStream

// The streams a lines event comes from.
const (
	StreamStdout  = state.LogStdout
	StreamStderr  = state.LogStderr
	StreamCommand = state.LogCommand
)

// Event is one thing an executor reported.
type Event struct {
	Type EventType `json:"type"`
	// SessionID is the executor session the event came from; the runner
	// resolves it to its attempt before applying the event.
	SessionID string `json:"-"`
	// SessionPath, on a session event, is where the CLI keeps the
	// session; set only by executors that can resume it.
	SessionPath string `json:"-"`

	Phase        state.Phase     `json:"phase,omitempty"`          // phase
	Message      string          `json:"message,omitempty"`        // progress, log, error, denied
	Percent      int             `json:"percent,omitempty"`        // progress
	Step         string          `json:"step,omitempty"`           // progress
	Text         string          `json:"text,omitempty"`           // output
	Name         string          `json:"name,omitempty"`           // tool, denied
	Stage        ToolStage       `json:"stage,omitempty"`          // tool
	Description  string          `json:"description,omitempty"`    // side_effect, denied
	Level        LogLevel        `json:"level,omitempty"`          // log
	Summary      string          `json:"summary,omitempty"`        // result
	Data         json.RawMessage `json:"data,omitempty"`           // result
	Code         state.ErrorCode `json:"code,omitempty"`           // error
	RetryAfterMS int64           `json:"retry_after_ms,omitempty"` // error
	// ResetsAt and RetryAfterS, on an error of code usage_limit, say when
	// the limit resets: the task parks until then and continues its
	// session (RetryAfterMS says it too).
	ResetsAt     time.Time `json:"resets_at,omitzero"`      // error
	RetryAfterS  float64   `json:"retry_after_s,omitempty"` // error
	InputTokens  int64     `json:"input_tokens,omitempty"`  // usage
	OutputTokens int64     `json:"output_tokens,omitempty"` // usage
	TotalTokens  int64     `json:"total_tokens,omitempty"`  // usage

	Stream Stream   `json:"-"` // lines
	Lines  []string `json:"-"` // lines

	// Notice marks an event that shows the executor alive but not the
	// model answering (a CLI's own retry notice, a status line): it does
	// not satisfy the first-event limit.
	Notice bool `json:"-"`

	// State is a checkpoint's (EventCheckpoint): the executor's own.
	State json.RawMessage `json:"-"`
}

// Exit is how an attempt's run ended.
type Exit struct {
	// StartErr is set when the executor could not start at all. Wrap
	// ErrExecutorNotFound or ErrNotExecutable when that is why.
	StartErr error
	// ExitCode is the process's exit code; -1 when a signal ended it.
	ExitCode int
	// Signal names the signal that ended the process, if one did.
	Signal string
	// StdioClosed: the executor closed its output before a result.
	StdioClosed bool
	// ProtocolErr is set when an app-server broke its protocol.
	ProtocolErr error
	// Killed: the runner had to stop the attempt (cancel or timeout).
	Killed bool
	// Egress is what the attempt's proxy refused, when its network was
	// confined.
	Egress *egress.Denied
	// Turn is how the executor's protocol said its turn ended, for
	// executors whose exit code does not tell (an app server exits 0
	// whatever its turn did). Zero: judge by the exit code.
	Turn TurnEnd
	// Stderr is what the executor wrote last to its stderr (at most
	// StderrTailLines lines, StderrTailBytes in all), for executors
	// that keep it (exec): a plain command that fails says why there,
	// and the runner classifies it as it does an error event's message.
	Stderr string
	// Detached: the agent left the attempt running, for its next life
	// (ErrDetach); nothing else of the Exit holds.
	Detached bool
}

// How much of a failing executor's stderr Exit.Stderr keeps.
const (
	StderrTailLines = 8
	StderrTailBytes = 4 << 10
)

// ResetIn is how long after now the limit an error event reports
// resets: its resets_at, else its retry_after_s, else its retry_after_ms;
// zero when it says none (or a time past).
func (ev Event) ResetIn(now time.Time) time.Duration {
	switch {
	case !ev.ResetsAt.IsZero():
		return max(ev.ResetsAt.Sub(now), 0)
	case ev.RetryAfterS > 0:
		return time.Duration(min(ev.RetryAfterS, MaxParkWait.Seconds()) * float64(time.Second))
	}
	return max(time.Duration(ev.RetryAfterMS)*time.Millisecond, 0)
}

// UsageEvent is a usage event reporting u, the tokens an attempt used so
// far.
func UsageEvent(u state.Usage) Event {
	return Event{Type: EventUsage, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
}

// Usage is what a usage event reports: its total, when it gives none, is
// its input and output together. Negative counts are taken as zero.
func (ev Event) Usage() state.Usage {
	u := state.Usage{InputTokens: max(ev.InputTokens, 0), OutputTokens: max(ev.OutputTokens, 0), TotalTokens: max(ev.TotalTokens, 0)}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	return u
}

// TurnEnd is how an executor's protocol said its turn ended. (How the
// attempt ended, as recorded, is state.Outcome.)
type TurnEnd int

// The ends of a turn.
const (
	TurnByExit    TurnEnd = iota // the exit code tells (exec)
	TurnCompleted                // the turn completed
	TurnFailed                   // the turn failed; the last error event says why
)

// Start errors an executor reports in Exit.StartErr.
var (
	ErrExecutorNotFound = proc.ErrNotFound
	ErrNotExecutable    = proc.ErrNotExecutable
)

// Describe says what an executor runs, for the agent's start banner: its
// kind and the binary it found, e.g. "codex app-server (/usr/local/bin/codex)".
func Describe(e Executor) string {
	if d, ok := e.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return e.Name()
}

// SetStatus fills the exit code and signal from the ended executor
// process, and StartErr when it could not be waited for.
func (e *Exit) SetStatus(p *proc.Process) {
	var err error
	e.ExitCode, e.Signal, err = p.Status()
	if err != nil {
		e.StartErr = err
	}
	e.Egress = p.Egress()
}

// ProcUser is who the attempt's processes run as, for proc.Spec: nil for
// the agent's own user.
func (s AttemptSpec) ProcUser() *keeper.User {
	if s.TaskUser == nil {
		return nil
	}
	return &s.TaskUser.User
}
