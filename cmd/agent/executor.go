package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/shellword"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/opencode"
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

// build makes the executor the flags ask for.
func (f *executorFlags) build() (runner.Executor, error) {
	if err := runner.CheckEnvNames(f.env); err != nil {
		return nil, usagef("--executor-env: %v", err)
	}
	switch f.kind {
	case "codex", "claude", "opencode", "acp":
	default:
		if f.bin != "" || len(f.args) > 0 {
			return nil, usagef("--executor-bin and --executor-arg go with --executor codex, claude, opencode or acp")
		}
	}
	switch f.kind {
	case "sample":
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the agent's own binary for the sample executor: %w", err)
		}
		return exec.New(exec.Config{Argv: []string{self, "sample-executor"}, Grace: f.killGrace, EnvPass: f.env, Approval: runner.ApprovalPolicy(f.approval)})
	case "exec":
		if strings.TrimSpace(f.command) == "" {
			return nil, usagef("--executor exec needs --executor-command")
		}
		argv, err := shellword.Split(f.command)
		if err != nil {
			return nil, usagef("--executor-command: %v", err)
		}
		return exec.New(exec.Config{Argv: argv, Grace: f.killGrace, EnvPass: f.env, Approval: runner.ApprovalPolicy(f.approval)})
	case "codex":
		exe, err := codex.New(codex.Config{Base: cli.Base{Bin: f.bin, Args: f.args, EnvPass: f.env, Grace: f.killGrace}, Approval: runner.ApprovalPolicy(f.approval),
			Sandbox: f.codexSandbox, Provider: f.codexProvider})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	case "claude":
		cfg := claude.Config{Base: cli.Base{Bin: f.bin, Args: f.args, EnvPass: f.env, Grace: f.killGrace},
			AllowedTools: f.claudeTools, PermissionMode: f.claudePermission, Approval: runner.ApprovalPolicy(f.approval),
			LimitWait: f.claudeLimitWait}
		if cfg.Approval != runner.ApprovalNever && cfg.Approval != "" {
			if err := claude.CanAsk(f.claudePermission); err != nil {
				return nil, usagef("--approval %s with --executor claude: %v", f.approval, err)
			}
			// Claude Code asks through the permission prompt tool this
			// binary serves.
			self, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("find the agent's own binary for Claude Code's permission prompt tool: %w", err)
			}
			cfg.PromptTool = []string{self, "claude-approval-mcp"}
		}
		exe, err := claude.New(cfg)
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	case "opencode":
		exe, err := opencode.New(opencode.Config{Base: cli.Base{Bin: f.bin, Args: f.args, EnvPass: f.env, Grace: f.killGrace}, Approval: runner.ApprovalPolicy(f.approval)})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	case "acp":
		if strings.TrimSpace(f.bin) == "" {
			return nil, usagef("--executor acp needs --executor-bin: the agent's command (its arguments with --executor-arg), e.g. --executor-bin gemini, or --executor-bin opencode --executor-arg acp")
		}
		agent, args, err := acpAgent(f.bin, f.args, runner.ApprovalPolicy(f.approval))
		if err != nil {
			return nil, usagef("%v", err)
		}
		exe, err := acp.New(acp.Config{Base: cli.Base{Bin: f.bin, Args: args, EnvPass: f.env, Grace: f.killGrace}, Agent: &agent, Approval: runner.ApprovalPolicy(f.approval)})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	}
	return nil, usagef("--executor %q: want exec, codex, claude, opencode, acp or sample", f.kind)
}

// acpAgent is what --executor acp knows of the agent bin runs: OpenCode's
// profile for opencode (its "acp" subcommand is the profile's, so not
// repeated from args), else what package acp knows (acp.Known).
func acpAgent(bin string, args []string, approval runner.ApprovalPolicy) (acp.Agent, []string, error) {
	if filepath.Base(bin) != "opencode" {
		return acp.Known(bin, args), args, nil
	}
	agent, err := opencode.Agent(approval)
	if i := slices.Index(args, "acp"); i >= 0 {
		args = slices.Delete(slices.Clone(args), i, i+1)
	}
	return agent, args, err
}

// checkAsks refuses an approval setting under which the executor would
// never ask, with one line saying which combination does: Codex without
// the agent's confinement and without a sandbox of its own has nothing to
// ask about. confined says whether attempts run confined.
func (f *executorFlags) checkAsks(confined bool) error {
	if f.kind == "codex" && f.approval == string(runner.ApprovalAsk) {
		if err := codex.CanAsk(f.codexSandbox, confined); err != nil {
			return usagef("--approval ask: %v", err)
		}
	}
	return nil
}

// runnerApprovalTimeout is --approval-timeout as the runner takes it: 0,
// waiting for ever, is negative there (its zero is the default).
func (f *executorFlags) runnerApprovalTimeout() time.Duration {
	if f.approvalTimeout == 0 {
		return -1
	}
	return f.approvalTimeout
}
