// Package executors makes the executor an agent's settings choose (exec,
// codex, claude, opencode, acp or sample) and checks the settings that
// only make sense together. A mistake in the settings is a
// settings.UsageError, so that the agent exits 2 on it and a service
// manager does not restart it in a loop.
package executors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/shellword"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/opencode"
)

// The agent binary's own subcommands an executor runs: the sample
// executor, and the permission prompt tool Claude Code asks through.
const (
	SampleCommand       = "sample-executor"
	ClaudePromptCommand = "claude-approval-mcp"
)

// Settings are the executor's settings (agent run's --executor and the
// flags of its [executor] table).
type Settings struct {
	Kind, Command, Bin string
	Args, Env          []string
	Approval           string
	ApprovalTimeout    time.Duration // 0: wait for ever
	CodexSandbox       string
	CodexProvider      string
	ClaudeTools        []string
	ClaudePermission   string
	ClaudeLimitWait    time.Duration
	KillGrace          time.Duration
}

func usagef(format string, args ...any) error {
	return settings.UsageError{Err: fmt.Errorf(format, args...)}
}

// Build makes the executor the settings ask for.
func (s Settings) Build() (runner.Executor, error) {
	if err := runner.CheckEnvNames(s.Env); err != nil {
		return nil, usagef("--executor-env: %v", err)
	}
	approval := runner.ApprovalPolicy(s.Approval)
	base := cli.Base{Bin: s.Bin, Args: s.Args, EnvPass: s.Env, Grace: s.KillGrace}
	var (
		exe runner.Executor
		err error
	)
	switch s.Kind {
	case "codex", "claude", "opencode", "acp":
	default:
		if s.Bin != "" || len(s.Args) > 0 {
			return nil, usagef("--executor-bin and --executor-arg go with --executor codex, claude, opencode or acp")
		}
	}
	switch s.Kind {
	case "sample":
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the agent's own binary for the sample executor: %w", err)
		}
		return exec.New(exec.Config{Argv: []string{self, SampleCommand}, Grace: s.KillGrace, EnvPass: s.Env, Approval: approval})
	case "exec":
		if strings.TrimSpace(s.Command) == "" {
			return nil, usagef("--executor exec needs --executor-command")
		}
		argv, err := shellword.Split(s.Command)
		if err != nil {
			return nil, usagef("--executor-command: %v", err)
		}
		return exec.New(exec.Config{Argv: argv, Grace: s.KillGrace, EnvPass: s.Env, Approval: approval})
	case "codex":
		exe, err = codex.New(codex.Config{Base: base, Approval: approval, Sandbox: s.CodexSandbox, Provider: s.CodexProvider})
	case "claude":
		cfg := claude.Config{Base: base, AllowedTools: s.ClaudeTools, PermissionMode: s.ClaudePermission, Approval: approval, LimitWait: s.ClaudeLimitWait}
		if cfg.Approval != runner.ApprovalNever && cfg.Approval != "" {
			if err := claude.CanAsk(s.ClaudePermission); err != nil {
				return nil, usagef("--approval %s with --executor claude: %v", s.Approval, err)
			}
			// Claude Code asks through the permission prompt tool this
			// binary serves.
			self, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("find the agent's own binary for Claude Code's permission prompt tool: %w", err)
			}
			cfg.PromptTool = []string{self, ClaudePromptCommand}
		}
		exe, err = claude.New(cfg)
	case "opencode":
		exe, err = opencode.New(opencode.Config{Base: base, Approval: approval})
	case "acp":
		if strings.TrimSpace(s.Bin) == "" {
			return nil, usagef("--executor acp needs --executor-bin: the agent's command (its arguments with --executor-arg), e.g. --executor-bin gemini, or --executor-bin opencode --executor-arg acp")
		}
		agent, args, aerr := acpAgent(s.Bin, s.Args, approval)
		if aerr != nil {
			return nil, usagef("%v", aerr)
		}
		base.Args = args
		exe, err = acp.New(acp.Config{Base: base, Agent: &agent, Approval: approval})
	default:
		return nil, usagef("--executor %q: want exec, codex, claude, opencode, acp or sample", s.Kind)
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	return exe, nil
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

// CheckAsks refuses an approval setting under which the executor would
// never ask, with one line saying which combination does: Codex without
// the agent's confinement and without a sandbox of its own has nothing to
// ask about. confined says whether attempts run confined.
func (s Settings) CheckAsks(confined bool) error {
	if s.Kind == "codex" && s.Approval == string(runner.ApprovalAsk) {
		if err := codex.CanAsk(s.CodexSandbox, confined); err != nil {
			return usagef("--approval ask: %v", err)
		}
	}
	return nil
}

// RunnerApprovalTimeout is --approval-timeout as the runner takes it: 0,
// waiting for ever, is negative there (its zero is the default).
func (s Settings) RunnerApprovalTimeout() time.Duration {
	if s.ApprovalTimeout == 0 {
		return -1
	}
	return s.ApprovalTimeout
}
