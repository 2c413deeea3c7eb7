package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/logformat"
	attemptproc "github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/submission"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// runFlags are the settings of `agent run`.
type runFlags struct {
	controlPlane, tokenFile, dataDir, agentID string
	workDir, commitAuthor                     string
	repos                                     []string // NAME=PATH
	labels                                    []string // KEY=VALUE
	executor                                  executorFlags
	models                                    []string
	maxConcurrent, maxStarts, maxRetries      int
	noRetry, insecure                         bool
	parkKeepsSlot                             bool
	onSideEffect, onBudget                    string
	heartbeat, drainTimeout, retention        time.Duration
	livenessInterval                          time.Duration
	reattachGrace                             time.Duration
	retentionMaxSize, taskLogMaxSize          byteSize
	maxAttemptOutput                          byteSize
	attemptTimeouts, firstEventTimeouts       []time.Duration
	logLevel, logFormat, metricsAddr          string
	isolation                                 string
	isolationDeny, isolationWrite             []string
	egress, taskUser                          string
	egressAllow                               []string
	isolationAllow                            []string

	// The tmux view (issue 27).
	tmux                    bool
	tmuxSocket, tmuxSession string
	tmuxLinger              time.Duration

	// Budgets (issue 27).
	defaultMaxTokens int
	defaultMaxTime   time.Duration
}

// bind declares the settings of agent run on fs, stored in f.
func (f *runFlags) bind(fs *pflag.FlagSet) {
	t := agentSettings
	t.bind(fs, "control-plane", &f.controlPlane)
	t.bind(fs, "token-file", &f.tokenFile)
	t.bind(fs, "insecure", &f.insecure)
	t.bind(fs, "data-dir", &f.dataDir)
	t.bind(fs, "agent-id", &f.agentID)
	t.bind(fs, "work-dir", &f.workDir)
	t.bind(fs, "repo", &f.repos)
	t.bind(fs, "commit-author", &f.commitAuthor)
	t.bind(fs, "label", &f.labels)
	f.executor.bind(fs)
	t.bind(fs, "isolation", &f.isolation)
	t.bind(fs, "isolation-deny", &f.isolationDeny)
	t.bind(fs, "isolation-allow", &f.isolationAllow)
	t.bind(fs, "isolation-write", &f.isolationWrite)
	t.bind(fs, "egress", &f.egress)
	t.bind(fs, "egress-allow", &f.egressAllow)
	t.bind(fs, "task-user", &f.taskUser)
	t.bind(fs, "models", &f.models)
	t.bind(fs, "max-concurrent", &f.maxConcurrent)
	t.bind(fs, "max-starts", &f.maxStarts)
	t.bind(fs, "park-keeps-slot", &f.parkKeepsSlot)
	t.bind(fs, "max-retries", &f.maxRetries)
	t.bind(fs, "no-retry", &f.noRetry)
	t.bind(fs, "on-side-effect", &f.onSideEffect)
	t.bind(fs, "on-budget", &f.onBudget)
	t.bind(fs, "liveness-interval", &f.livenessInterval)
	t.bind(fs, "attempt-timeout", &f.attemptTimeouts)
	t.bind(fs, "first-event-timeout", &f.firstEventTimeouts)
	// Budgets (issue 27).
	t.bind(fs, "default-max-tokens", &f.defaultMaxTokens)
	t.bind(fs, "default-max-time", &f.defaultMaxTime)
	t.bind(fs, "heartbeat-interval", &f.heartbeat)
	t.bind(fs, "drain-timeout", &f.drainTimeout)
	t.bind(fs, "reattach-grace", &f.reattachGrace)
	t.bind(fs, "metrics-addr", &f.metricsAddr)
	t.bind(fs, "retention", &f.retention)
	t.bind(fs, "retention-max-size", &f.retentionMaxSize)
	t.bind(fs, "task-log-max-size", &f.taskLogMaxSize)
	t.bind(fs, "max-attempt-output", &f.maxAttemptOutput)
	t.bind(fs, "log-level", &f.logLevel)
	t.bind(fs, "log-format", &f.logFormat)
	// The tmux view (issue 27).
	t.bind(fs, "tmux", &f.tmux)
	t.bind(fs, "tmux-socket", &f.tmuxSocket)
	t.bind(fs, "tmux-session", &f.tmuxSession)
	t.bind(fs, "tmux-linger", &f.tmuxLinger)
	// The name of earlier versions.
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "shutdown-grace" {
			return "drain-timeout"
		}
		return pflag.NormalizedName(name)
	})
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent: claim tasks, run them, report everything through the outbox",
		Long: `run is the daemon. It heartbeats to the control plane, claims tasks while it
has room and its executor is not unavailable, runs each one through the
executor with retries, and reports phases, progress, logs and results. Every
report is written to the outbox in the data directory, durably, before it is
sent, and replayed until the control plane acknowledges it.

Every flag can also be set in the environment (AGENT_ and the flag's name in
capitals: --max-concurrent is AGENT_MAX_CONCURRENT) or in the TOML config
file (--config; agent config print shows every key). Flags win over the
environment, which wins over the file. The token comes from --token-file or
AGENT_TOKEN and is never logged.

The config file is followed: when it changes, or on SIGHUP, the live
settings (models, concurrency, retries, limits, log level) apply to attempts
that start after; an invalid edit keeps the running configuration and says
why. What decides a task's reach (the executor's command, binary, arguments
and variables, approvals, sandbox and permissions, isolation) applies at the
next start only.

Every attempt runs under a keeper that ends all its processes with it, and,
where the kernel has Landlock, confined: it reads what this user can read
but the agent's own files (data directory, config file, token files, a
control plane's state directory beside the token file) and the person's
credentials (~/.ssh, ~/.aws, ~/.config/gh, ~/.netrc, ~/.kube, keyrings,
browser profiles: agent doctor lists them), and writes only its work
directory, its temporary directories, /dev and its CLI's state
(--isolation, --isolation-deny, --isolation-allow, --isolation-write).
Where the kernel lets the agent make network namespaces, each attempt runs
in one of its own and reaches only its executor's model API and the hosts
--egress-allow names, through the agent's proxy; nothing on this machine's
loopback (--egress). An agent running as root runs its tasks without
capabilities, as --task-user when it names one.

SIGTERM or SIGINT stops it: no new claims; running attempts go on without
the agent for --reattach-grace (5m), their keepers spooling what they say,
and the next start within it takes them up where they are, the same
process, nothing cut, nothing said twice. Pending records are flushed for a
few seconds and the rest stay on disk for the next start. With
--reattach-grace 0 (or an executor that cannot), running tasks get
--drain-timeout, then are stopped, and the next start takes them up: one
that had done nothing runs its attempt again, one that had continues its
CLI session where its executor keeps one. A second signal, or SIGQUIT,
stops at once.

A task naming a repository the agent serves (--repo NAME=PATH, [[repo]]
tables in the config file) runs in a clone of its own, on the branch
agent/TASK_ID. At the end of each attempt the agent commits what it left
there (unless the task was submitted --no-commit), brings the branch back
to the repository and reports the diff; when the task completes, it
pushes the branch and opens its pull request if the [[repo]] table says
to (push, pull_request); see agent workspaces, agent tasks diff and agent
tasks push.`,
		Example: `  agent run --control-plane https://cp.example.com --token-file ~/.config/agent/token \
      --executor codex --models gpt-5.5,gpt-5.4 --approval ask
  agent run --control-plane https://cp.example.com --token-file ~/.config/agent/token \
      --executor claude --claude-allowed-tools Bash,Write,Edit
  agent run --control-plane http://127.0.0.1:8080 --token-file token --executor sample`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return startAgent(cmd, f)
		},
	}
	f.bind(useSettings(cmd, agentSettings))
	return cmd
}

// isolationOf is how the settings confine attempts. The agent's files
// outside its data directory are out of every task's reach too: the
// config file and every token file the agent learns of (its own, the one
// its config file or environment names if the command line chose
// another, a control plane's in the environment, from the shell that
// started one), the data directories and token files of the other agents
// installed as services on this machine, and a control plane's state
// directory the environment names, or its default in the working
// directory.
func (f *runFlags) isolationOf(configFile string) isolation.Config {
	iso := isolation.Config{Mode: isolation.Mode(f.isolation), Deny: f.isolationDeny, Allow: f.isolationAllow, Write: f.isolationWrite,
		Egress: isolation.EgressMode(f.egress), EgressAllow: f.egressAllow, TaskUser: f.taskUser}
	protect := []string{configFile, f.tokenFile, os.Getenv("AGENT_TOKEN_FILE"), os.Getenv("AGENT_OPERATOR_TOKEN_FILE")}
	if configFile != "" {
		if c, err := settings.ReadFile(configFile, agentSettings.Table); err == nil {
			for _, key := range []string{"token-file", "operator-token-file"} {
				if v, ok := c.Lookup(key); ok {
					p, _ := v.V.(string)
					protect = append(protect, p)
				}
			}
		}
	}
	for _, name := range []string{"token-file", "operator-token-file", "notify-secret-file", "tls-key"} {
		protect = append(protect, os.Getenv(controlPlaneSettings.Lookup(name).EnvName(controlPlaneSettings.EnvPrefix)))
	}
	protect = append(protect, service.Secrets(service.HostManager(), servicesOnMachine())...)
	for _, p := range protect {
		if p != "" && !slices.Contains(iso.Protect, p) {
			iso.Protect = append(iso.Protect, p)
		}
	}
	dataDir := controlPlaneSettings.Lookup("data-dir")
	iso.ControlPlaneDirs = []string{os.Getenv(dataDir.EnvName(controlPlaneSettings.EnvPrefix)), dataDir.Default.(string)}
	return iso
}

// checkAsks refuses an approval setting under which the executor would
// never ask, attempts confined as the settings say on this kernel.
func (f *runFlags) checkAsks(configFile string) error {
	conf, err := isolation.Resolve(f.isolationOf(configFile), f.dataDir, f.workDir)
	if err != nil {
		return nil // the agent says why it cannot start
	}
	return f.executor.settings().CheckAsks(conf.Runner != nil)
}

// repoList is the repositories the settings name, NAME=PATH each (the
// settings' check has refused any other form). A path given on the command
// line or in the environment may start with ~/; relative, it is relative
// to the working directory.
func (f *runFlags) repoList() []workspace.Repo {
	s := agentSettings.Lookup("repo")
	var repos []workspace.Repo
	for _, v := range f.repos {
		name, path, _ := s.SplitPair(v)
		repos = append(repos, workspace.Repo{Name: name, Path: settings.FilePath(path, ".")})
	}
	return repos
}

// labelMap reads --label KEY=VALUE values; a bad one is a usage error.
func labelMap(values []string) (map[string]string, error) {
	labels, err := submission.Labels(values)
	if err != nil {
		return nil, usageError{err}
	}
	return labels, nil
}

// configFileOf is the config file the settings were read from, "" for
// none.
func configFileOf(cmd *cobra.Command) string {
	if r := resolvedOf(cmd); r != nil {
		return r.File
	}
	return ""
}

// budget is the budget of a task that sets none of its own.
func (f *runFlags) budget() runner.Budget {
	return runner.Budget{MaxTokens: int64(f.defaultMaxTokens), MaxTime: f.defaultMaxTime}
}

// policy is the retry policy the settings ask for.
func (f *runFlags) policy() runner.Policy {
	p := runner.Policy{OnSideEffect: state.OnSideEffect(f.onSideEffect)}
	if f.noRetry {
		return p.WithMaxRetries(0)
	}
	return p.WithMaxRetries(f.maxRetries)
}

func startAgent(cmd *cobra.Command, f runFlags) error {
	// SIGHUP reloads the settings. Caught from here on, so that one sent
	// while the agent opens its data (a large outbox takes seconds) waits
	// for the reloader rather than ending the process (Go's default).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if f.controlPlane == "" {
		return usagef("--control-plane is required")
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	labels, err := labelMap(f.labels)
	if err != nil {
		return err
	}
	exe, err := f.executor.build()
	if err != nil {
		return err
	}
	if err := f.checkAsks(configFileOf(cmd)); err != nil {
		return err
	}
	repos, pulls, err := repoDeliveries(resolvedOf(cmd), f.repoList())
	if err != nil {
		return err
	}
	if err := checkTokenEnvs(f.executor.env, pulls); err != nil {
		return err
	}
	author, err := commitAuthor(f.commitAuthor)
	if err != nil {
		return err
	}
	level := logLevel(f.logLevel)
	log := newLogger(cmd.ErrOrStderr(), level, f.logFormat)
	cfg := agent.Config{ControlPlane: f.controlPlane, Token: token, Insecure: f.insecure, DataDir: f.dataDir, AgentID: f.agentID,
		Version: agentVersion(), Executor: exe, Models: f.models, Policy: f.policy(), WorkDir: f.workDir, ApprovalTimeout: f.executor.settings().RunnerApprovalTimeout(),
		Timeouts:      runner.Timeouts{Attempt: f.attemptTimeouts, FirstEvent: f.firstEventTimeouts},
		MaxConcurrent: f.maxConcurrent, MaxStarts: f.maxStarts, ParkKeepsSlot: f.parkKeepsSlot, OnBudget: state.OnBudget(f.onBudget), LivenessInterval: f.livenessInterval, HeartbeatInterval: f.heartbeat, ShutdownGrace: f.drainTimeout, ReattachGrace: f.reattachGrace, Logger: log,
		MetricsAddr: f.metricsAddr, Retention: f.retention, RetentionMaxBytes: int64(f.retentionMaxSize), TaskLogMaxBytes: int64(f.taskLogMaxSize),
		Isolation: f.isolationOf(configFileOf(cmd)), Repos: repos, PullRequests: pulls, CommitAuthor: author, Labels: labels, Budget: f.budget(),
		ExecutorKind: f.executor.kind, MaxAttemptOutput: int64(f.maxAttemptOutput)} // routing by capability
	if cfg.Tmux, err = f.tmuxView(); err != nil { // the tmux view (issue 27)
		return err
	}
	// Subtasks: executors run `agent subtask` with this binary.
	if self, err := os.Executable(); err == nil {
		cfg.SelfBin = self
	}
	if os.Getenv("NOTIFY_SOCKET") != "" {
		cfg.Notify = func(s string) { daemon.SdNotify(false, s) }
		if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
			cfg.WatchdogInterval = d
		}
	}
	a, err := agent.New(cfg)
	if errors.Is(err, workspace.ErrBadRepo) {
		return usagef("%v", err) // a mistake in the settings: exit 2, not restarted in a loop
	}
	if err != nil {
		return err
	}
	// Tool commands the CLIs start in sessions of their own, orphaned,
	// come back to the agent rather than to init, within its reach.
	if err := attemptproc.BecomeSubreaper(); err != nil {
		log.Warn("cannot become a child subreaper; orphaned executor processes are still found by their mark", "err", err)
	}
	// The first SIGTERM or SIGINT drains (it also ends the command's
	// context: see main); a second one, or SIGQUIT, stops at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// The root command resolved the settings (PersistentPreRunE).
	rl := newReloader(a, level, log, resolvedOf(cmd), cmd.Flags(), exe)
	err = a.RunSignalled(cmd.Context(), sigs, func(ctx context.Context) { rl.Watch(ctx, hup) })
	if errors.Is(err, controlplane.ErrUnauthorized) {
		return fmt.Errorf("control plane at %s refused the token (401 Unauthorized); check --token-file or AGENT_TOKEN", f.controlPlane)
	}
	return err
}

// newLogger and logLevel make the logger of agent run and agent
// controlplane serve from their log settings.
var (
	newLogger = logformat.New
	logLevel  = logformat.Level
)
