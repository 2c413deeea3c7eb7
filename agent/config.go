// Package agent is the daemon: it heartbeats to the control plane, claims
// tasks, runs each one through the runner, and delivers every report
// through the outbox.
//
// Start: lock the data directory (the outbox's lock), open and recover the
// outbox, load task state, reconcile tasks a crash left running, then start
// the sender (pending records first), the heartbeat, and the claimer.
//
// Every report is appended to the outbox, durably, before it is sent. The
// sender batches pending records, backs off with jitter while the control
// plane is unreachable, and never gives up; each heartbeat also triggers a
// replay.
//
// Stop (the context ends): stop claiming, give running tasks a grace
// period, cancel what still runs, flush the outbox for a bounded time,
// release the lock. Abort skips the waits.
package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/tmuxview"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// Config configures an Agent. ControlPlane, Token, DataDir and Executor are
// required; other zero fields take the defaults their comments give.
type Config struct {
	ControlPlane string
	// Token is the control plane's bearer token. It is never logged.
	Token    string
	Insecure bool // allow http:// to a host that is not loopback

	DataDir string
	// AgentID names the agent. Default: an id kept in DataDir/agent-id.
	AgentID string
	Version string

	Executor runner.Executor
	// Repos are the repositories the agent serves: a task naming one runs
	// in a clone of its own (see package workspace), and, when the
	// repository's Push names a remote, its branch is pushed there when
	// it completes.
	Repos []workspace.Repo
	// PullRequests say, by repository, where the agent opens the pull
	// (merge) request of a completed task's branch, once pushed.
	PullRequests map[string]PullRequest
	// CommitAuthor is who the agent's commits of the tasks' work are by.
	// Default workspace.DefaultAuthor: agent <agent@HOSTNAME>.
	CommitAuthor workspace.Author
	// Labels are what the agent says it is called (team=infra): its
	// heartbeats and claims say them, and agents ls shows them as
	// self-described. A task's label requirement is met only by labels a
	// person grants at the control plane (agent agents label); an agent
	// registered before granted labels adopts these once.
	Labels map[string]string
	// ExecutorKind is what the agent advertises as its executor for
	// routing by capability: the --executor it runs (exec, codex, claude,
	// sample). Empty: it advertises none, and meets no executor= requirement.
	ExecutorKind string
	// Subtasks: SelfBin is the agent's own binary, which executors get
	// (AGENT_BIN, and its directory first on their PATH) to run `agent
	// subtask` with their task token. Empty: executors get the token
	// and the control plane's address only.
	SelfBin string
	// WorkDir holds each task's work directory, WorkDir/TASK_ID. Default
	// DataDir/work.
	WorkDir string
	// Isolation says how attempts are confined. Default: with Landlock
	// where the kernel has it (see the isolation package).
	Isolation isolation.Config
	// ApprovalTimeout bounds a person's answer to an approval request;
	// then it is declined. Zero is runner.DefaultApprovalTimeout;
	// negative waits for ever.
	ApprovalTimeout time.Duration
	Models          []string
	Policy          runner.Policy
	Timeouts        runner.Timeouts
	// Budget is the token and wall-time budget of a task that sets none
	// of its own; each bound a task sets wins. Zero: none.
	Budget runner.Budget

	// MaxConcurrent is how many tasks run at once. Default
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// ParkKeepsSlot: a parked task (phase parked: waiting for a usage
	// limit to reset) keeps its slot of MaxConcurrent. Default: it gives
	// the slot up while it waits, and waits for one to resume.
	ParkKeepsSlot bool
	// OnBudget is what follows an attempt that reached its task's budget:
	// park (the default; a person raises it) or fail.
	OnBudget state.OnBudget
	// LivenessInterval is how often a running attempt's processes are
	// looked at, to tell one at work in silence from a hung one. Default
	// runner.DefaultLiveness.
	LivenessInterval time.Duration
	// MaxStarts is how many attempts start at once, apart from how many
	// run (see runner.Starts). Default runner.DefaultMaxStarts.
	MaxStarts int
	// HeartbeatInterval is the first interval; the control plane's answer
	// may change it. Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// ShutdownGrace is how long running tasks may finish on stop before
	// they are cancelled. Default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// ReattachGrace, if set, has running attempts outlive the agent: on
	// stop (or a crash) they go on, for this long, and the agent's next
	// start takes them up where they are (see runner.Spool), where the
	// executor can and attempts run under a keeper. Zero: a stop stops
	// them (ShutdownGrace) and the next start continues or replays them.
	ReattachGrace time.Duration
	// FlushTimeout bounds the last delivery of pending records on stop.
	// Default 5 s.
	FlushTimeout time.Duration
	// SendBackoffMax caps the wait between delivery attempts while the
	// control plane is unreachable. Default 30 s.
	SendBackoffMax time.Duration

	Outbox outbox.Options
	Logger *slog.Logger
	// Notify, if set, receives service manager notifications: READY=1,
	// STOPPING=1 and WATCHDOG=1 (sd_notify).
	Notify func(state string)
	// WatchdogInterval, if set, is the service manager's watchdog limit;
	// the agent pings at half of it while its loops are alive.
	WatchdogInterval time.Duration

	// Retention is how long a finished task (its state, logs and work
	// directory) and a dead outbox record are kept; the rules are
	// state.Retention's. Default 7 days.
	Retention time.Duration
	// RetentionMaxBytes caps what finished tasks take on disk; past it the
	// ones that ended first are pruned. Default 10 GiB.
	RetentionMaxBytes int64
	// TaskLogMaxBytes caps each attempt's log: the head and the tail are
	// kept, the middle counted. Default 1 MiB; at least 4 KiB.
	TaskLogMaxBytes int64
	// MaxAttemptOutput caps the log output one attempt puts in the outbox
	// while the control plane has not said its own cap (its heartbeat
	// answer does; that one is kept then). Past it, lines are counted,
	// not kept. Default DefaultMaxAttemptOutput (8 MiB, the control
	// plane's default).
	MaxAttemptOutput int64

	// MetricsAddr, if set, is where Run serves Prometheus metrics at
	// /metrics: a port alone ("9464" or ":9464") is on loopback, a host
	// and port ("0.0.0.0:9464") as given. Default "": no metrics.
	MetricsAddr string

	// The tmux view (issue 27).
	// Tmux, if set, shows each running attempt in a window of a tmux
	// session of the agent's (package tmuxview); its Logger defaults to
	// the agent's. Default nil: no view.
	Tmux *tmuxview.Options
}

// Defaults of the settings agent run takes, used by Config and by the
// command line's settings table alike.
const (
	DefaultMaxConcurrent     = 2
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultShutdownGrace     = 10 * time.Second
	DefaultReattachGrace     = 5 * time.Minute
)

// ErrConfig marks a configuration error.
var ErrConfig = errors.New("invalid configuration")

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.ControlPlane == "":
		return c, fmt.Errorf("%w: no control plane URL (--control-plane)", ErrConfig)
	case c.DataDir == "":
		return c, fmt.Errorf("%w: no data directory (--data-dir)", ErrConfig)
	case c.Executor == nil:
		return c, fmt.Errorf("%w: no executor", ErrConfig)
	}
	if _, err := controlplane.CheckURLs(c.ControlPlane, c.Insecure); err != nil {
		return c, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxStarts <= 0 {
		c.MaxStarts = runner.DefaultMaxStarts
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.FlushTimeout <= 0 {
		c.FlushTimeout = 5 * time.Second
	}
	if c.SendBackoffMax <= 0 {
		c.SendBackoffMax = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Notify == nil {
		c.Notify = func(string) {}
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Retention <= 0 {
		c.Retention = state.DefaultRetention
	}
	if c.RetentionMaxBytes <= 0 {
		c.RetentionMaxBytes = state.DefaultRetentionMaxBytes
	}
	if c.TaskLogMaxBytes <= 0 {
		c.TaskLogMaxBytes = DefaultTaskLogMaxBytes
	}
	return c, nil
}
