// Package codex is the codex executor: it drives `codex app-server` over
// its JSON-RPC stdio protocol, one app server per attempt, one thread, one
// turn. An attempt that continues an earlier one's session resumes its
// thread (thread/resume, from the rollout file Codex keeps under
// CODEX_HOME) and sends the follow-up as the turn; a thread Codex cannot
// resume ends the attempt with code session_lost, never a new thread. It
// answers the app server's approval requests by its policy or by
// asking a person, maps Codex's errors to the runner's codes, and leaves
// the outcome to the turn's status (runner.Exit.Turn), not the exit code.
package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// Config configures the codex executor. Zero fields take the defaults
// their comments give.
type Config struct {
	// Base: Bin defaults to "codex" on PATH; Args are added after
	// "app-server" (for example -c key=value overrides of the user's
	// configuration, which is never edited); CODEX_HOME and OPENAI_*
	// always pass; Grace is each stop step's wait: for turn/completed after
	// an interrupt, for the exit after stdin is closed, and between SIGTERM
	// and SIGKILL; MaxLine is the longest protocol line read.
	cli.Base
	// Approval answers the app server's approval requests. Default never:
	// the thread runs with approval policy "never" and Codex never asks.
	Approval runner.ApprovalPolicy
	// Sandbox is the thread's sandbox mode: read-only, workspace-write or
	// danger-full-access. Default workspace-write.
	Sandbox string
	// Provider, when it names a provider defined in the user's Codex
	// configuration, gets its own retries capped at one (request and
	// stream), so the agent owns retrying. Codex refuses overrides of its
	// built-in providers (openai): leave it empty for those.
	Provider string
}

// Codex drives `codex app-server` over its JSON-RPC stdio protocol: one app
// server per attempt, one thread, one turn.
type Codex struct{ cfg Config }

// Overrides turn off what Codex does besides the turn (as -c KEY=VALUE
// each): its analytics, plugin sync and update check reach the internet,
// and by default it retries a refused connection forever. codex-acp,
// which embeds Codex, takes the same.
var Overrides = []string{
	"analytics.enabled=false",
	"features.plugins=false",
	"check_for_update_on_startup=false",
	"features.unbounded_connection_retries=false",
}

// New returns a codex executor.
func New(cfg Config) (*Codex, error) {
	switch cfg.Approval {
	case "":
		cfg.Approval = runner.ApprovalNever
	case runner.ApprovalNever, runner.ApprovalAcceptAll, runner.ApprovalDeclineAll, runner.ApprovalAsk:
	default:
		return nil, fmt.Errorf("codex executor: approval policy %q: want never, accept, decline or ask", cfg.Approval)
	}
	switch cfg.Sandbox {
	case "":
		cfg.Sandbox = "workspace-write"
	case "read-only", "workspace-write", "danger-full-access":
	default:
		return nil, fmt.Errorf("codex executor: sandbox %q: want read-only, workspace-write or danger-full-access", cfg.Sandbox)
	}
	if strings.ContainsAny(cfg.Provider, ". =\"'") {
		return nil, fmt.Errorf("codex executor: provider %q is not a provider id", cfg.Provider)
	}
	if err := cfg.Defaults("codex"); err != nil {
		return nil, err
	}
	return &Codex{cfg: cfg}, nil
}

// Name implements runner.Executor.
func (c *Codex) Name() string { return "codex" }

// Resumes implements runner.Resumer: Codex keeps every thread in a
// rollout file, and thread/resume takes it up.
func (c *Codex) Resumes() bool { return true }

// Probe implements runner.Executor.
func (c *Codex) Probe(ctx context.Context) error { return c.cfg.Probe(ctx) }

// args is the app server's command line after the binary.
func (c *Codex) args() []string {
	args := []string{"app-server"}
	for _, o := range Overrides {
		args = append(args, "-c", o)
	}
	if p := c.cfg.Provider; p != "" {
		args = append(args, "-c", "model_providers."+p+".request_max_retries=1", "-c", "model_providers."+p+".stream_max_retries=1")
	}
	return append(args, c.cfg.Args...)
}

// env is the app server's environment: the allowlist, Codex's own
// variables, and what the config sets.
func (c *Codex) env(spec runner.AttemptSpec) []string {
	return spec.Environ(append([]string{"CODEX_HOME", "OPENAI_*"}, c.cfg.EnvPass...), c.cfg.Env)
}

// Reattaches implements runner.Reattacher: an attempt outlives the
// agent, its keeper spooling the app server's output and relaying what
// the agent writes to its stdin, each request and answer once by its id.
func (c *Codex) Reattaches() bool { return true }

// Run implements runner.Executor.
func (c *Codex) Run(ctx context.Context, spec runner.AttemptSpec, emit func(runner.Event)) runner.Exit {
	dir := spec.WorkDir
	if dir == "" {
		dir = c.cfg.Dir
	}
	env := c.env(spec)
	var (
		p  *proc.Process
		st codexState
	)
	if re := spec.Reattach; re != nil {
		p = re.Process
		if re.State != nil {
			if err := json.Unmarshal(re.State, &st); err != nil {
				return runner.Exit{StartErr: fmt.Errorf("the attempt's checkpoint: %w", err), ExitCode: -1}
			}
		}
		p.ReadFrom(st.Stdout, st.Stderr)
	} else {
		path, err := proc.Resolve(c.cfg.Bin)
		if err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
		ps := proc.Spec{Name: c.cfg.Bin, Path: path, Args: c.args(), Dir: dir,
			Env: env, Mark: spec.ProcessMark(), StdinPipe: true, Grace: c.cfg.Grace,
			Confine: spec.Confinement(codexHome(env)), Egress: spec.EgressPolicy(c.endpoints(env)...), User: spec.ProcUser()}
		if spec.Spool != nil {
			ps.Spool = spec.Spool.Proc()
		}
		if p, err = proc.Start(ps); err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
	}
	if spec.Spool != nil {
		spec.Spool.Started(p)
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	s := &codexSession{cfg: c.cfg, spec: spec, dir: dir, p: p, out: cli.NewSessionEmitter(emit, "codex", p.Pid()), pending: map[int64]string{},
		streamed: map[string]int{}, partial: map[string]string{}, msgs: make(chan codexMsg, 64), approvals: make(chan codexApproval),
		changes: map[string][]codexChange{}, asked: map[string]bool{}, waiting: map[string]codexMsg{}, emit: emit}
	s.restore(st)
	return s.run(ctx)
}

// codexHome is where Codex keeps its state: CODEX_HOME, else ~/.codex.
func codexHome(env []string) string { return Home(env) }

// Home is where Codex keeps its state in env: CODEX_HOME, else ~/.codex.
func Home(env []string) string {
	if h := cli.EnvValue(env, "CODEX_HOME"); h != "" {
		return h
	}
	return cli.HomeDir(env, ".codex")
}

// codexSandbox is the sandbox mode a thread is started with. Codex's own
// sandbox is bubblewrap, which mounts, and Landlock forbids a confined
// process to mount: inside the agent's confinement it cannot run. There,
// workspace-write becomes danger-full-access (the agent's confinement lets
// the attempt write its work directory, not the rest), and read-only stays:
// a command Codex would sandbox fails, so nothing runs unless the model
// asks for escalation and the approval policy grants it.
func codexSandbox(mode string, confined bool) string {
	if confined && mode == "workspace-write" {
		return "danger-full-access"
	}
	return mode
}

// CanAsk says why Codex would never ask with approval ask in a sandbox
// mode, nil when it asks. Confined by the agent, Codex asks before every
// command and file change (untrusted: see approvalPolicy), whatever the
// mode. Not confined, it asks for what is beyond its own sandbox's
// reach (on-request), and danger-full-access leaves nothing beyond it.
func CanAsk(sandbox string, confined bool) error {
	if !confined && sandbox == "danger-full-access" {
		return fmt.Errorf("with --codex-sandbox danger-full-access and no confinement by the agent, Codex never asks; use --codex-sandbox workspace-write (or read-only), or confine attempts (--isolation auto or landlock, on Linux with Landlock)")
	}
	return nil
}

// splitLines splits text into lines without their newlines, dropping a
// last empty one.
func splitLines(text string) []string {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// VersionCommand implements cli.Versioned.
func (c *Codex) VersionCommand() (bin string, env []string) {
	return c.cfg.Bin, c.env(runner.AttemptSpec{})
}

// Describe says what the executor runs, for the agent's start banner.
func (c *Codex) Describe() string { return "codex app-server (" + proc.Located(c.cfg.Bin) + ")" }
