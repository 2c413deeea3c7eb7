package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/runner"
)

// executorFlags choose and configure the executor, for run and demo.
type executorFlags struct {
	kind, command, bin string
	args, env          []string
	approval           string
	replyTimeout       time.Duration
	codexSandbox       string
	codexProvider      string
	claudeTools        []string
	claudePermission   string
	killGrace          time.Duration
}

// register declares the executor flags; demo takes only --executor.
func (f *executorFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.kind, "executor", "exec", "exec (runs --executor-command), codex (codex app-server), claude (Claude Code in print mode), or sample (built in)")
	fl.StringVar(&f.command, "executor-command", "", `with --executor exec: the command to run per attempt, split into argv like a shell would but never run by one, e.g. "my-cli --json"`)
	fl.StringVar(&f.bin, "executor-bin", "", "the codex or claude binary (default: codex or claude on PATH)")
	fl.StringArrayVar(&f.args, "executor-arg", nil, `an argument added to the codex or claude command line, repeatable (e.g. --executor-arg=-c --executor-arg='model_reasoning_effort="high"')`)
	fl.StringSliceVar(&f.env, "executor-env", nil, "names of more environment variables to pass to the executor (NAME or PREFIX*); the agent's token is never passed")
	fl.StringVar(&f.approval, "approval", "never", "codex approval requests: never (Codex runs without asking, in its sandbox), accept, decline, or ask (a person answers)")
	fl.DurationVar(&f.replyTimeout, "reply-timeout", runner.DefaultReplyTimeout, "with --approval ask: how long a person has to answer before the request is declined")
	fl.StringVar(&f.codexSandbox, "codex-sandbox", "workspace-write", "codex sandbox mode: read-only, workspace-write or danger-full-access")
	fl.StringVar(&f.codexProvider, "codex-provider", "", "a model provider defined in your Codex config whose own retries are capped at one, so the agent owns retrying (not for the built-in openai)")
	fl.StringSliceVar(&f.claudeTools, "claude-allowed-tools", nil, "tools Claude Code may use without asking (--allowedTools), e.g. Bash,Write,Edit")
	fl.StringVar(&f.claudePermission, "claude-permission-mode", "", "Claude Code --permission-mode: default, acceptEdits, dontAsk, plan or bypassPermissions")
	fl.DurationVar(&f.killGrace, "kill-grace", 5*time.Second, "each step of stopping an attempt (interrupt, SIGTERM, SIGKILL) waits this long")
}

// build makes the executor the flags ask for.
func (f *executorFlags) build() (runner.Executor, error) {
	if err := runner.CheckEnvNames(f.env); err != nil {
		return nil, usagef("--executor-env: %v", err)
	}
	if f.kind != "codex" && f.kind != "claude" && (f.bin != "" || len(f.args) > 0) {
		return nil, usagef("--executor-bin and --executor-arg go with --executor codex or claude")
	}
	switch f.kind {
	case "sample":
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the agent's own binary for the sample executor: %w", err)
		}
		return runner.NewExec(runner.ExecConfig{Argv: []string{self, "sample-executor"}, Grace: f.killGrace, EnvPass: f.env})
	case "exec":
		if strings.TrimSpace(f.command) == "" {
			return nil, usagef("--executor exec needs --executor-command")
		}
		argv, err := splitArgs(f.command)
		if err != nil {
			return nil, usagef("--executor-command: %v", err)
		}
		return runner.NewExec(runner.ExecConfig{Argv: argv, Grace: f.killGrace, EnvPass: f.env})
	case "codex":
		exe, err := runner.NewCodex(runner.CodexConfig{Bin: f.bin, Args: f.args, EnvPass: f.env, Approval: runner.ApprovalPolicy(f.approval),
			Sandbox: f.codexSandbox, Provider: f.codexProvider, Grace: f.killGrace})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	case "claude":
		if f.approval != "never" && f.approval != "" {
			return nil, usagef("--approval %s: Claude Code in print mode never asks; choose --claude-allowed-tools or --claude-permission-mode instead", f.approval)
		}
		exe, err := runner.NewClaude(runner.ClaudeConfig{Bin: f.bin, Args: f.args, EnvPass: f.env, AllowedTools: f.claudeTools,
			PermissionMode: f.claudePermission, Grace: f.killGrace})
		if err != nil {
			return nil, usagef("%v", err)
		}
		return exe, nil
	}
	return nil, usagef("--executor %q: want exec, codex, claude or sample", f.kind)
}
