package agentsettings

import (
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/executors"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// Run is agent run's settings but where the agent is and what it serves
// (control plane, token, data and work directories, repositories, the
// tmux view), which the commands that act on an agent's data bind too.
type Run struct {
	AgentID, CommitAuthor                string
	Labels                               []string // KEY=VALUE
	Executor                             executors.Settings
	Models                               []string
	MaxConcurrent, MaxStarts, MaxRetries int
	NoRetry, ParkKeepsSlot               bool
	OnSideEffect, OnBudget               string
	Heartbeat, DrainTimeout, Retention   time.Duration
	LivenessInterval, ReattachGrace      time.Duration
	RetentionMaxSize, TaskLogMaxSize     settings.ByteSize
	MaxAttemptOutput                     settings.ByteSize
	AttemptTimeouts, FirstEventTimeouts  []time.Duration
	LogLevel, LogFormat, MetricsAddr     string
	Isolation, Egress, TaskUser          string
	IsolationDeny, IsolationWrite        []string
	IsolationAllow, EgressAllow          []string
	DefaultMaxTokens                     int
	DefaultMaxTime                       time.Duration
}

// Bind declares r's settings on fs, stored in r.
func (r *Run) Bind(fs *pflag.FlagSet) {
	t := Agent
	t.Bind(fs, "agent-id", &r.AgentID)
	t.Bind(fs, "commit-author", &r.CommitAuthor)
	t.Bind(fs, "label", &r.Labels)
	BindExecutor(fs, &r.Executor)
	t.Bind(fs, "isolation", &r.Isolation)
	t.Bind(fs, "isolation-deny", &r.IsolationDeny)
	t.Bind(fs, "isolation-allow", &r.IsolationAllow)
	t.Bind(fs, "isolation-write", &r.IsolationWrite)
	t.Bind(fs, "egress", &r.Egress)
	t.Bind(fs, "egress-allow", &r.EgressAllow)
	t.Bind(fs, "task-user", &r.TaskUser)
	t.Bind(fs, "models", &r.Models)
	t.Bind(fs, "max-concurrent", &r.MaxConcurrent)
	t.Bind(fs, "max-starts", &r.MaxStarts)
	t.Bind(fs, "park-keeps-slot", &r.ParkKeepsSlot)
	t.Bind(fs, "max-retries", &r.MaxRetries)
	t.Bind(fs, "no-retry", &r.NoRetry)
	t.Bind(fs, "on-side-effect", &r.OnSideEffect)
	t.Bind(fs, "on-budget", &r.OnBudget)
	t.Bind(fs, "liveness-interval", &r.LivenessInterval)
	t.Bind(fs, "attempt-timeout", &r.AttemptTimeouts)
	t.Bind(fs, "first-event-timeout", &r.FirstEventTimeouts)
	t.Bind(fs, "default-max-tokens", &r.DefaultMaxTokens)
	t.Bind(fs, "default-max-time", &r.DefaultMaxTime)
	t.Bind(fs, "heartbeat-interval", &r.Heartbeat)
	t.Bind(fs, "drain-timeout", &r.DrainTimeout)
	t.Bind(fs, "reattach-grace", &r.ReattachGrace)
	t.Bind(fs, "metrics-addr", &r.MetricsAddr)
	t.Bind(fs, "retention", &r.Retention)
	t.Bind(fs, "retention-max-size", &r.RetentionMaxSize)
	t.Bind(fs, "task-log-max-size", &r.TaskLogMaxSize)
	t.Bind(fs, "max-attempt-output", &r.MaxAttemptOutput)
	t.Bind(fs, "log-level", &r.LogLevel)
	t.Bind(fs, "log-format", &r.LogFormat)
	// The name of earlier versions.
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "shutdown-grace" {
			return "drain-timeout"
		}
		return pflag.NormalizedName(name)
	})
}

// BindExecutor declares the executor's settings on fs, stored in s.
func BindExecutor(fs *pflag.FlagSet, s *executors.Settings) {
	t := Agent
	t.Bind(fs, "executor", &s.Kind)
	t.Bind(fs, "executor-command", &s.Command)
	t.Bind(fs, "executor-bin", &s.Bin)
	t.Bind(fs, "executor-arg", &s.Args)
	t.Bind(fs, "executor-env", &s.Env)
	t.Bind(fs, "approval", &s.Approval)
	t.Bind(fs, "approval-timeout", &s.ApprovalTimeout)
	t.Bind(fs, "codex-sandbox", &s.CodexSandbox)
	t.Bind(fs, "codex-provider", &s.CodexProvider)
	t.Bind(fs, "claude-allowed-tools", &s.ClaudeTools)
	t.Bind(fs, "claude-permission-mode", &s.ClaudePermission)
	t.Bind(fs, "claude-limit-wait", &s.ClaudeLimitWait)
	t.Bind(fs, "kill-grace", &s.KillGrace)
}

// Budget is the budget of a task that sets none of its own.
func (r *Run) Budget() runner.Budget {
	return runner.Budget{MaxTokens: int64(r.DefaultMaxTokens), MaxTime: r.DefaultMaxTime}
}

// Policy is the retry policy the settings ask for.
func (r *Run) Policy() runner.Policy {
	p := runner.Policy{OnSideEffect: state.OnSideEffect(r.OnSideEffect)}
	if r.NoRetry {
		return p.WithMaxRetries(0)
	}
	return p.WithMaxRetries(r.MaxRetries)
}

// Live is the live part of the settings, with exe the executor they make.
func (r *Run) Live(exe runner.Executor) agent.Live {
	return agent.Live{Executor: exe, Models: r.Models, Policy: r.Policy(), MaxConcurrent: r.MaxConcurrent, MaxStarts: r.MaxStarts,
		ApprovalTimeout: r.Executor.RunnerApprovalTimeout(), Timeouts: r.timeouts(), Budget: r.Budget()}
}

func (r *Run) timeouts() runner.Timeouts {
	return runner.Timeouts{Attempt: r.AttemptTimeouts, FirstEvent: r.FirstEventTimeouts}
}

// Config fills in c what the settings say of the agent (c brings what was
// read or made from them besides: where the agent is, its token, executor,
// repositories, logger), with iso how attempts are confined.
func (r *Run) Config(c agent.Config, iso isolation.Config) agent.Config {
	live := r.Live(c.Executor)
	c.AgentID, c.Models, c.Policy, c.ApprovalTimeout, c.Timeouts = r.AgentID, live.Models, live.Policy, live.ApprovalTimeout, live.Timeouts
	c.MaxConcurrent, c.MaxStarts, c.ParkKeepsSlot, c.OnBudget = r.MaxConcurrent, r.MaxStarts, r.ParkKeepsSlot, state.OnBudget(r.OnBudget)
	c.LivenessInterval, c.HeartbeatInterval, c.ShutdownGrace, c.ReattachGrace = r.LivenessInterval, r.Heartbeat, r.DrainTimeout, r.ReattachGrace
	c.MetricsAddr, c.Retention, c.RetentionMaxBytes, c.TaskLogMaxBytes = r.MetricsAddr, r.Retention, int64(r.RetentionMaxSize), int64(r.TaskLogMaxSize)
	c.Isolation, c.Budget, c.ExecutorKind, c.MaxAttemptOutput = iso, live.Budget, r.Executor.Kind, int64(r.MaxAttemptOutput)
	return c
}

// IsolationOf is how the settings confine attempts. The agent's files
// outside its data directory are out of every task's reach too: the
// config file and every token file the agent learns of (tokenFile, the
// one its config file or environment names if the command line chose
// another, a control plane's in the environment, from the shell that
// started one), others (the data directories and token files of the other
// agents installed as services on this machine), and a control plane's
// state directory the environment names, or its default in the working
// directory.
func (r *Run) IsolationOf(configFile, tokenFile string, others []string) isolation.Config {
	iso := isolation.Config{Mode: isolation.Mode(r.Isolation), Deny: r.IsolationDeny, Allow: r.IsolationAllow, Write: r.IsolationWrite,
		Egress: isolation.EgressMode(r.Egress), EgressAllow: r.EgressAllow, TaskUser: r.TaskUser}
	protect := []string{configFile, tokenFile, os.Getenv("AGENT_TOKEN_FILE"), os.Getenv("AGENT_OPERATOR_TOKEN_FILE")}
	if configFile != "" {
		if c, err := settings.ReadFile(configFile, Agent); err == nil {
			for _, key := range []string{"token-file", "operator-token-file"} {
				if v, ok := c.Lookup(key); ok {
					p, _ := v.V.(string)
					protect = append(protect, p)
				}
			}
		}
	}
	for _, name := range []string{"token-file", "operator-token-file", "notify-secret-file", "tls-key"} {
		protect = append(protect, os.Getenv(ControlPlane.Lookup(name).EnvName(ControlPlane.EnvPrefix)))
	}
	protect = append(protect, others...)
	for _, p := range protect {
		if p != "" && !slices.Contains(iso.Protect, p) {
			iso.Protect = append(iso.Protect, p)
		}
	}
	dataDir := ControlPlane.Lookup("data-dir")
	iso.ControlPlaneDirs = []string{os.Getenv(dataDir.EnvName(ControlPlane.EnvPrefix)), dataDir.Default.(string)}
	return iso
}

// CheckAsks refuses an approval setting under which the executor would
// never ask, attempts confined as iso says on this kernel.
func (r *Run) CheckAsks(iso isolation.Config, dataDir, workDir string) error {
	conf, err := isolation.Resolve(iso, dataDir, workDir)
	if err != nil {
		return nil // the agent says why it cannot start
	}
	return r.Executor.CheckAsks(conf.Runner != nil)
}

// Repos is the repositories values name, NAME=PATH each (the settings'
// check has refused any other form). A path given on the command line or
// in the environment may start with ~/; relative, it is relative to the
// working directory.
func Repos(values []string) []workspace.Repo {
	s := Agent.Lookup("repo")
	var repos []workspace.Repo
	for _, v := range values {
		name, path, _ := s.SplitPair(v)
		repos = append(repos, workspace.Repo{Name: name, Path: settings.FilePath(path, ".")})
	}
	return repos
}

// PrintConfig writes r, agent run's settings as fs binds them, as a TOML
// config file, tables last, each value with its origin; where the token
// comes from is said, never the token.
func PrintConfig(w io.Writer, r *settings.Resolved, fs *pflag.FlagSet, tokenFile string) error {
	token := "none (give token-file or AGENT_TOKEN)"
	switch {
	case tokenFile != "":
		token = "read from token-file " + tokenFile
	case strings.TrimSpace(os.Getenv("AGENT_TOKEN")) != "":
		token = "from AGENT_TOKEN (not shown)"
	}
	return r.WriteConfigFile(w, fs, "agent run", token, Redact)
}

// Redact hides a password written into the control plane's URL or a
// repository's forge API URL, for config print.
func Redact(key, value string) string {
	if key == "control-plane" || key == "repo.api_url" {
		return controlplane.RedactURL(value)
	}
	return value
}
