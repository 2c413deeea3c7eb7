package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/executors"
)

// executorFlags choose and configure the executor, for run and demo.
type executorFlags struct {
	kind, command, bin string
	args, env          []string
	approval           string
	approvalTimeout    time.Duration
	codexSandbox       string
	codexProvider      string
	claudeTools        []string
	claudePermission   string
	claudeLimitWait    time.Duration
	killGrace          time.Duration
}

// bind declares the executor's settings on fs, stored in f.
func (f *executorFlags) bind(fs *pflag.FlagSet) {
	t := agentSettings
	t.bind(fs, "executor", &f.kind)
	t.bind(fs, "executor-command", &f.command)
	t.bind(fs, "executor-bin", &f.bin)
	t.bind(fs, "executor-arg", &f.args)
	t.bind(fs, "executor-env", &f.env)
	t.bind(fs, "approval", &f.approval)
	t.bind(fs, "approval-timeout", &f.approvalTimeout)
	t.bind(fs, "codex-sandbox", &f.codexSandbox)
	t.bind(fs, "codex-provider", &f.codexProvider)
	t.bind(fs, "claude-allowed-tools", &f.claudeTools)
	t.bind(fs, "claude-permission-mode", &f.claudePermission)
	t.bind(fs, "claude-limit-wait", &f.claudeLimitWait)
	t.bind(fs, "kill-grace", &f.killGrace)
}

// settings are the flags as package executors takes them.
func (f *executorFlags) settings() executors.Settings {
	return executors.Settings{Kind: f.kind, Command: f.command, Bin: f.bin, Args: f.args, Env: f.env, Approval: f.approval,
		ApprovalTimeout: f.approvalTimeout, CodexSandbox: f.codexSandbox, CodexProvider: f.codexProvider, ClaudeTools: f.claudeTools,
		ClaudePermission: f.claudePermission, ClaudeLimitWait: f.claudeLimitWait, KillGrace: f.killGrace}
}

// build makes the executor the flags ask for.
func (f *executorFlags) build() (runner.Executor, error) { return f.settings().Build() }
