package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/logformat"
	attemptproc "github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/submission"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/workspace"
)

// runFlags are the settings of `agent run`: where the agent is and what
// it serves here, the rest in agentsettings.Run.
type runFlags struct {
	controlPlane, tokenFile, dataDir, workDir string
	repos                                     []string // NAME=PATH
	insecure                                  bool
	agentsettings.Run

	// The tmux view (issue 27).
	tmux                    bool
	tmuxSocket, tmuxSession string
	tmuxLinger              time.Duration
}

// bind declares the settings of agent run on fs, stored in f.
func (f *runFlags) bind(fs *pflag.FlagSet) {
	t := agentSettings
	t.Bind(fs, "control-plane", &f.controlPlane)
	t.Bind(fs, "token-file", &f.tokenFile)
	t.Bind(fs, "insecure", &f.insecure)
	t.Bind(fs, "data-dir", &f.dataDir)
	t.Bind(fs, "work-dir", &f.workDir)
	t.Bind(fs, "repo", &f.repos)
	f.Run.Bind(fs)
	t.Bind(fs, "tmux", &f.tmux)
	t.Bind(fs, "tmux-socket", &f.tmuxSocket)
	t.Bind(fs, "tmux-session", &f.tmuxSession)
	t.Bind(fs, "tmux-linger", &f.tmuxLinger)
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

// isolationOf is how the settings confine attempts, the agent's files
// (those of the agents installed as services on this machine too) out of
// every task's reach.
func (f *runFlags) isolationOf(configFile string) isolation.Config {
	return f.IsolationOf(configFile, f.tokenFile, service.Secrets(service.HostManager(), servicesOnMachine()))
}

// repoList is the repositories the settings name.
func (f *runFlags) repoList() []workspace.Repo { return agentsettings.Repos(f.repos) }

// configFileOf is the config file the settings were read from, "" for
// none.
func configFileOf(cmd *cobra.Command) string {
	if r := resolvedOf(cmd); r != nil {
		return r.File
	}
	return ""
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
	labels, err := submission.Labels(f.Labels)
	if err != nil {
		return usageError{err}
	}
	exe, err := f.Executor.Build()
	if err != nil {
		return err
	}
	iso := f.isolationOf(configFileOf(cmd))
	if err := f.CheckAsks(iso, f.dataDir, f.workDir); err != nil {
		return err
	}
	repos, pulls, err := repoDeliveries(resolvedOf(cmd), f.repoList())
	if err != nil {
		return err
	}
	if err := checkTokenEnvs(f.Executor.Env, pulls); err != nil {
		return err
	}
	author, err := commitAuthor(f.CommitAuthor)
	if err != nil {
		return err
	}
	level := logformat.Level(f.LogLevel)
	log := logformat.New(cmd.ErrOrStderr(), level, f.LogFormat)
	cfg := f.Config(agent.Config{ControlPlane: f.controlPlane, Token: token, Insecure: f.insecure, DataDir: f.dataDir, WorkDir: f.workDir,
		Version: agentVersion(), Executor: exe, Logger: log, Repos: repos, PullRequests: pulls, CommitAuthor: author, Labels: labels}, iso)
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
