// Package acp is the executor for any agent that speaks the Agent Client
// Protocol (ACP: JSON-RPC 2.0 over stdio, one JSON object a line): one
// agent process per attempt, one session, one prompt turn. The agent is
// started with the attempt's confinement; the executor initializes it,
// opens a session (session/new, or session/load to continue an earlier
// attempt's), picks the attempt's model (the session's model option, or
// session/set_model), sends the prompt (session/prompt) and maps what the
// agent reports (session/update) to the runner's events: the agent's
// message as output, its thoughts and plan as progress, its tool calls
// (their kind and status) as tool calls and side effects. A permission
// request (session/request_permission) is answered by the approval
// policy, or asked of a person. A cancel sends session/cancel and waits
// for the turn to end; the agent is then ended: stdin closed, SIGTERM,
// SIGKILL, each after the grace.
//
// What the protocol does not carry (where the agent keeps its state, the
// hosts it reaches, how to keep it from other traffic, the class of its
// errors) an Agent profile says: the opencode executor is this executor
// with OpenCode's profile, and --executor acp picks a profile by the
// agent's binary (Known), or none.
//
// The protocol itself is github.com/coder/acp-go-sdk's.
package acp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// Agent is what an executor knows of the agent it drives beyond the
// protocol. Every field is optional: the zero Agent is an agent nothing
// is known of, which keeps no state the attempt may write, reaches no
// host but what --egress-allow names, and is told nothing.
type Agent struct {
	// Name names it in messages and the start banner ("OpenCode").
	Name string
	// Pass are variables of its own that always pass to it (NAME or
	// PREFIX*), its keys among them.
	Pass []string
	// Set are NAME=VALUE variables set in its environment for every
	// attempt: what keeps it from traffic but the model's.
	Set []string
	// Args are put on its command line before the executor's --executor-arg.
	Args []string
	// State lists where it keeps its state, given its environment: made
	// writable when the attempt is confined.
	State func(env []string) []string
	// Endpoints are the hosts it reaches its model at, given its
	// environment and its command line, for the attempt's confined
	// network.
	Endpoints func(env, args []string) []egress.Rule
	// KeepsRunning: it does not exit when its stdin closes (codex-acp
	// 0.16.0): SIGTERM follows at once.
	KeepsRunning bool
	// DeclineFailsTurn: when a call is declined it ends its turn with
	// an error (claude-code-acp 0.16.2 denies the call with Claude Code's
	// interrupt, and Claude Code then fails the turn): a prompt's error
	// after a declined call is the turn's end, not a failure.
	DeclineFailsTurn bool
	// BeforeLoad, if set, readies the agent's own record of a session
	// before a new process of it starts to load the session
	// (session/load), given the process's environment and the time; an
	// error ends the attempt as session_lost.
	BeforeLoad func(env []string, session string, now time.Time) error
	// ReplaysAfterLoad: its session/load answers before the history it
	// replays has all come (Gemini CLI 0.61.0). The replay is taken to
	// end at the answer to a request sent after the load (session/set_mode
	// to the session's mode): the agent has written all of it by the time
	// it reads that request.
	ReplaysAfterLoad bool
	// TurnCut, if set, reads the agent's own record of a session, once
	// the agent has exited, after a turn begun at since that it said
	// ended (end_turn), with the usage its answer reported (zero for
	// none): it returns why the turn did not really end (the model's last
	// answer missing from the record, or recorded from a stream that did
	// not finish: its stream was cut, and the agent took the part for
	// the answer), "" when the record shows the turn whole. Such a turn
	// fails as network.
	TurnCut func(env []string, session string, since time.Time, reported state.Usage) (string, error)
	// Tested is the release the executor is tested against, if any:
	// agent doctor says when another runs.
	Tested cli.TestedCLI
	// Settle, if set, reads the agent's own record of the session once
	// the agent has exited: what the protocol did not say of the turn.
	// run runs the agent's binary with args under the attempt's
	// confinement and returns its standard output.
	Settle func(ctx context.Context, run RunFunc, session string, since time.Time) (Settlement, error)
	// Classify maps a failed prompt's error (its JSON-RPC code, message
	// and data) to a code, "" to leave it to the executor's own rules
	// (Classify in this package).
	Classify func(code int, msg string, data map[string]any) state.ErrorCode
	// Prepare, if set, readies an attempt's agent: dir is a directory of
	// the attempt's own, private to it; it returns NAME=VALUE variables
	// to set (a settings file written there, say).
	Prepare func(dir string) ([]string, error)
	// Noise reports whether a line of its stderr is noise the agent
	// prints at every start, said as the executor's log, not as an error.
	Noise func(line string) bool
	// LoginFix says how to give it a credential, for agent doctor when
	// it refuses a session for want of one.
	LoginFix string
}

// RunFunc runs the agent's binary with args, as an attempt's process
// (confined alike), and returns what it printed on stdout.
type RunFunc func(ctx context.Context, args ...string) ([]byte, error)

// Settlement is what an agent's own record says of a turn.
type Settlement struct {
	// Usage, if set, is the tokens the attempt used, all its model
	// requests together: it replaces what the protocol reported.
	Usage *state.Usage
	// Code, RetryAfter and Message, if set, say why the turn failed
	// better than the protocol's error did.
	Code       state.ErrorCode
	RetryAfter time.Duration
	Message    string
}

// Config configures an ACP executor. Zero fields take the defaults their
// comments give.
type Config struct {
	// Base: Bin is the agent's binary (required); Args are added after
	// the profile's; EnvPass names more variables to pass; Grace is each
	// stop step's wait: for the turn to end after session/cancel, for
	// the exit after stdin is closed, between SIGTERM and SIGKILL;
	// MaxLine is the longest protocol line read.
	cli.Base
	// Kind names the executor: "acp" (default) or the profile's own
	// executor ("opencode").
	Kind string
	// Agent is what is known of the agent. Default: Known(Bin, Args).
	Agent *Agent
	// Approval answers the agent's permission requests: never (the
	// default: nobody is asked, the request is declined), accept,
	// decline, or ask a person.
	Approval runner.ApprovalPolicy
}

// Executor drives an ACP agent: one process per attempt, one session,
// one prompt turn.
type Executor struct {
	cfg   Config
	agent Agent
	// noLoad is set once an agent has said it cannot load sessions: its
	// sessions are then never given a path, so never continued.
	noLoad atomic.Bool
	// probe is agent doctor's session probe, made once (probe.go).
	probe struct {
		sync.Mutex
		done   bool
		result sessionProbe
		err    error
	}
}

// New returns an ACP executor.
func New(cfg Config) (*Executor, error) {
	if cfg.Kind == "" {
		cfg.Kind = "acp"
	}
	switch cfg.Approval {
	case "":
		cfg.Approval = runner.ApprovalNever
	case runner.ApprovalNever, runner.ApprovalAcceptAll, runner.ApprovalDeclineAll, runner.ApprovalAsk:
	default:
		return nil, fmt.Errorf("%s executor: approval policy %q: want never, accept, decline or ask", cfg.Kind, cfg.Approval)
	}
	if strings.TrimSpace(cfg.Bin) == "" {
		return nil, fmt.Errorf("%s executor: no agent to run: give --executor-bin the agent's command (and --executor-arg its arguments, e.g. --executor-bin gemini --executor-arg=--acp)", cfg.Kind)
	}
	if err := cfg.Defaults(cfg.Bin); err != nil {
		return nil, err
	}
	agent := Known(cfg.Bin, cfg.Args)
	if cfg.Agent != nil {
		agent = *cfg.Agent
	}
	return &Executor{cfg: cfg, agent: agent}, nil
}

// Name implements runner.Executor.
func (x *Executor) Name() string { return x.cfg.Kind }

// Agent is what the executor knows of its agent.
func (x *Executor) Agent() Agent { return x.agent }

// Probe implements runner.Executor.
func (x *Executor) Probe(ctx context.Context) error { return x.cfg.Probe(ctx) }

// Resumes implements runner.Resumer: an agent that loads sessions
// (session/load) continues them. Until an attempt has asked the agent,
// it is taken to; a session it cannot load is never given a path.
func (x *Executor) Resumes() bool { return !x.noLoad.Load() }

// Describe says what the executor runs, for the agent's start banner.
func (x *Executor) Describe() string {
	what := x.cfg.Kind + " agent"
	if x.agent.Name != "" {
		what = x.agent.Name + " over ACP"
	}
	return what + " (" + strings.TrimSpace(proc.Located(x.cfg.Bin)+" "+strings.Join(x.args(), " ")) + ")"
}

// args is the agent's command line after the binary.
func (x *Executor) args() []string {
	return append(append([]string{}, x.agent.Args...), x.cfg.Args...)
}

// Env is the environment an attempt's agent gets: the allowlist, the
// profile's variables and what the config passes and sets.
func (x *Executor) Env(spec runner.AttemptSpec) []string {
	return spec.Environ(append(append([]string{}, x.agent.Pass...), x.cfg.EnvPass...), append(append([]string{}, x.agent.Set...), x.cfg.Env...))
}

// VersionEnv is the binary and environment of an attempt's agent, for a
// short command of its own (its version, its login, its models).
func (x *Executor) VersionEnv() (bin string, env []string) {
	return x.cfg.Bin, x.Env(runner.AttemptSpec{})
}

// stateDirs is where the agent keeps its state, in env.
func (x *Executor) stateDirs(env []string) []string {
	if x.agent.State == nil {
		return nil
	}
	return x.agent.State(env)
}

// endpoints is where the agent reaches its model, in env.
func (x *Executor) endpoints(env []string) []egress.Rule {
	if x.agent.Endpoints == nil {
		return nil
	}
	return x.agent.Endpoints(env, x.args())
}

// recordName is the file, in the task's session directory, that records
// an attempt's session: the path the runner keeps for it (a session is
// continued only while it is there).
func recordName(kind, session string) string {
	return kind + "-session-" + session + ".json"
}

// sessionRecord writes the record of session in dir and returns its path;
// "" when there is no directory or the id cannot name a file.
func sessionRecord(dir, kind, agent, session, cwd string) string {
	if dir == "" || session == "" || strings.ContainsAny(session, `/\`+"\x00") || len(session) > 200 {
		return ""
	}
	path := filepath.Join(dir, recordName(kind, session))
	body := fmt.Sprintf("{\"agent\":%q,\"session\":%q,\"cwd\":%q}\n", agent, session, cwd)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return ""
	}
	return path
}

// HomeDir is a directory under the home, "" without a HOME.
func HomeDir(env []string, parts ...string) string {
	home := cli.EnvValue(env, "HOME")
	if home == "" {
		return ""
	}
	return filepath.Join(append([]string{home}, parts...)...)
}

// Rules parses hosts and base URLs into egress rules, dropping what does
// not parse.
func Rules(hosts []string, urls ...string) []egress.Rule {
	var out []egress.Rule
	for _, h := range hosts {
		if r, err := egress.ParseRule(h); err == nil {
			out = append(out, r)
		}
	}
	for _, u := range urls {
		if r, ok := egress.Endpoint(u); ok {
			out = append(out, r)
		}
	}
	return out
}
