package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/runner"
)

// runFlags are the flags of `agent run`.
type runFlags struct {
	controlPlane, tokenFile, dataDir, agentID string
	workDir                                   string
	executor                                  executorFlags
	models                                    []string
	maxConcurrent, maxRetries                 int
	noRetry, insecure                         bool
	heartbeat, shutdownGrace                  time.Duration
	attemptTimeouts, firstEventTimeouts       []time.Duration
	logLevel                                  string
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

Every flag can also be set in the environment: AGENT_ and the flag's name in
capitals, --max-concurrent is AGENT_MAX_CONCURRENT. The token comes from
--token-file or AGENT_TOKEN and is never logged.

SIGTERM or SIGINT stops it: no new claims, running tasks get the shutdown
grace, then are cancelled; pending records are flushed for a few seconds and
the rest stay on disk for the next start. A second signal stops at once.`,
		Example: `  agent run --control-plane https://cp.example.com --token-file ~/.config/agent/token \
      --executor codex --models gpt-5.5,gpt-5.4 --approval ask
  agent run --control-plane https://cp.example.com --token-file ~/.config/agent/token \
      --executor claude --claude-allowed-tools Bash,Write,Edit
  agent run --control-plane http://127.0.0.1:8080 --token-file token --executor sample`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			return startAgent(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.controlPlane, "control-plane", "", "the control plane's URL (https, or http on loopback)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the control plane's bearer token (else AGENT_TOKEN)")
	dataDirFlag(cmd, &f.dataDir)
	fl.StringVar(&f.agentID, "agent-id", "", "this agent's id (default: one kept in the data directory)")
	f.executor.register(fl)
	fl.StringVar(&f.workDir, "work-dir", "", "where each task gets its work directory, TASK_ID below it, kept after the task (default: DATA_DIR/work)")
	fl.StringSliceVar(&f.models, "models", nil, "fallback chain of models: attempt N uses the N-th, the last repeating")
	fl.IntVar(&f.maxConcurrent, "max-concurrent", 2, "tasks run at once")
	fl.IntVar(&f.maxRetries, "max-retries", runner.DefaultMaxAttempts-1, "automatic retries after the first attempt")
	fl.BoolVar(&f.noRetry, "no-retry", false, "never retry automatically (same as --max-retries 0)")
	fl.DurationVar(&f.heartbeat, "heartbeat-interval", 10*time.Second, "time between heartbeats (the control plane may change it)")
	fl.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "on stop, how long running tasks may finish before they are cancelled")
	fl.DurationSliceVar(&f.attemptTimeouts, "attempt-timeout", runner.DefaultAttemptTimeout, "whole-attempt limit per attempt number, the last repeating")
	fl.DurationSliceVar(&f.firstEventTimeouts, "first-event-timeout", runner.DefaultFirstEventTimeout, "first-event limit per attempt number, the last repeating")
	fl.BoolVar(&f.insecure, "insecure", false, "allow http:// to a control plane that is not on loopback")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

func startAgent(cmd *cobra.Command, f runFlags) error {
	if f.controlPlane == "" {
		return usagef("--control-plane is required")
	}
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	exe, err := f.executor.build()
	if err != nil {
		return err
	}
	log, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
	if err != nil {
		return err
	}
	policy := runner.Policy{}.WithMaxRetries(f.maxRetries)
	if f.noRetry {
		policy = policy.WithMaxRetries(0)
	}
	cfg := agent.Config{ControlPlane: f.controlPlane, Token: token, Insecure: f.insecure, DataDir: f.dataDir, AgentID: f.agentID,
		Version: agentVersion(), Executor: exe, Models: f.models, Policy: policy, WorkDir: f.workDir, ReplyTimeout: f.executor.replyTimeout,
		Timeouts:      runner.Timeouts{Attempt: f.attemptTimeouts, FirstEvent: f.firstEventTimeouts},
		MaxConcurrent: f.maxConcurrent, HeartbeatInterval: f.heartbeat, ShutdownGrace: f.shutdownGrace, Logger: log}
	if os.Getenv("NOTIFY_SOCKET") != "" {
		cfg.Notify = func(s string) { daemon.SdNotify(false, s) }
		if d, err := daemon.SdWatchdogEnabled(false); err == nil && d > 0 {
			cfg.WatchdogInterval = d
		}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	// Tool commands the CLIs start in sessions of their own, orphaned,
	// come back to the agent rather than to init, within its reach.
	if err := runner.BecomeSubreaper(); err != nil {
		log.Warn("cannot become a child subreaper; orphaned executor processes are still found by their mark", "err", err)
	}
	// The first signal ends the command's context (see main); a second one
	// makes the stop skip its waits.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		select {
		case <-sigs:
			log.Warn("second signal: stopping at once")
			a.Abort()
		case <-done:
		}
	}()
	err = a.Run(cmd.Context())
	if errors.Is(err, controlplane.ErrUnauthorized) {
		return fmt.Errorf("control plane at %s refused the token (401 Unauthorized); check --token-file or AGENT_TOKEN", f.controlPlane)
	}
	return err
}
