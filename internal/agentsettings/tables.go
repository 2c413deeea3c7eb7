package agentsettings

import (
	"os"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/tmuxview"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/state"
)

// NotifyKeys are the keys of a [[notify]] table (controlplane/notify).
var NotifyKeys = notify.TableKeys

// DelegateKeys are the keys of a [[delegate]] table (controlplane/server's
// DelegateRule): subtasks.
var DelegateKeys = []settings.TableKey{
	{Name: "parent", Default: []string(nil)},
	{Name: "child", Default: []string(nil)},
	{Name: "max-depth", Default: 0},
	{Name: "max-children", Default: 0},
}

// RepoKeys are the keys of a [[repo]] table; RepoOptionKeys the ones it
// may have besides: what the agent does with a completed task's branch
// (cmd/agent's repoDeliveries reads them).
var (
	RepoKeys       = [2]string{"name", "path"}
	RepoOptionKeys = []settings.TableKey{{Name: "push", Default: ""}, {Name: "pull_request", Default: ""}, {Name: "api_url", Default: ""},
		{Name: "token_env", Default: ""}, {Name: "project", Default: ""}}
)

// Agent are the settings of the agent's commands. The config file
// (--config, AGENT_CONFIG, else ~/.config/agent/agent.toml if it exists)
// holds any of them.
var Agent = &settings.Table{EnvPrefix: "AGENT_", DefaultFile: DefaultConfigFile, KeysCommand: "agent config print", List: []*settings.Setting{
	{Name: "control-plane", CommaList: true, Help: "the control plane's URL (https, or http on loopback); several replicas' comma-separated (a list in the config file): the agent talks to one at a time and moves to the next when it does not answer"},
	{Name: "token-file", Path: true, Help: "file holding the token (else AGENT_TOKEN): for agent run, the control plane's registration secret; for submit, tasks and agents, a person's operator token, unless operator-token-file names it; 0600, 32 characters or more"},
	{Name: "operator-token-file", Path: true, Help: "for submit, tasks and agents: file holding a person's operator token, over token-file (which agent run reads for the registration secret), so that one config file serves both; --token-file on the command line wins"},
	{Name: "insecure", Default: false, Help: "allow http:// to a control plane that is not on loopback"},
	{Name: "data-dir", Path: true, Default: DefaultDataDir(), Help: "the agent's data directory (for the commands that read one, the installed service's when nothing names one: see agent service)"},
	{Name: "agent-id", Help: "this agent's id (default: one kept in the data directory)"},
	{Name: "work-dir", Path: true, Help: "where each task gets its work directory, TASK_ID below it, kept after the task (default: DATA_DIR/work)"},
	{Name: "label", Default: []string(nil), Repeat: true,
		Help: "a label the agent says it has, KEY=VALUE, repeatable (team=infra, gpu=yes); agents ls shows them as self-described: a task's --require label=gpu is met only by labels an operator grants (agents label)"},
	{Name: "repo", Default: []string(nil), Repeat: true, Path: true, Pairs: &RepoKeys, PairOptions: RepoOptionKeys,
		Help: "a repository tasks may name, NAME=PATH, repeatable: a task naming it runs in a clone of its own, WORK_DIR/TASK_ID on branch agent/TASK_ID; in the config file, [[repo]] tables with name and path, and push, pull_request, api_url, token_env and project (see docs/workspaces.md)"},
	{Name: "commit-author", Help: `who the agent's commits of a task's work are by, "NAME <EMAIL>" (default: agent <agent@HOSTNAME>)`},

	{Name: "executor", Key: "executor.kind", Default: "exec", OneOf: []string{"exec", "codex", "claude", "opencode", "acp", "sample"},
		Help: "exec (runs --executor-command), codex (codex app-server), claude (Claude Code in print mode), opencode (OpenCode in its ACP mode), acp (any agent that speaks the Agent Client Protocol: --executor-bin and --executor-arg), or sample (built in)"},
	{Name: "executor-command", Key: "executor.command",
		Help: `with --executor exec: the command to run per attempt, split into argv like a shell would but never run by one, e.g. "my-cli --json"`},
	{Name: "executor-bin", Key: "executor.bin", Path: true, Help: "the codex, claude or opencode binary (default: its name on PATH); with --executor acp, the agent's command (e.g. gemini, codex-acp, opencode)"},
	{Name: "executor-arg", Key: "executor.args", Default: []string(nil), Repeat: true,
		Help: `an argument added to the codex, claude, opencode or ACP agent's command line, repeatable (e.g. --executor-arg=-c --executor-arg='model_reasoning_effort="high"'; --executor-arg=--yolo for gemini)`},
	{Name: "executor-env", Key: "executor.env", Default: []string(nil),
		Help: "names of more environment variables to pass to the executor (NAME or PREFIX*); the agent's token is never passed"},
	{Name: "approval", Key: "executor.approval", Default: "never", OneOf: []string{"never", "accept", "decline", "ask"},
		Help: "what the executor asks before it acts (Codex's approval requests, Claude Code's permission prompts, OpenCode's and ACP agents' permission requests, an exec child's approval lines): never (nobody is asked: Codex stays in its sandbox, Claude Code denies what is not allowed, what OpenCode or an ACP agent asks about is declined), accept, decline, or ask (a person answers; docs/executors.md says when each CLI asks)"},
	{Name: "approval-timeout", Key: "executor.approval-timeout", Default: runner.DefaultApprovalTimeout, Live: true, Min: settings.AtLeast(0),
		Alias: "reply-timeout", AliasKey: "executor.reply-timeout",
		Help: "with --approval ask: how long a person has to answer before the request is declined (the model is told; the task and a notification say so); 0 waits for ever; the time waited does not count against --attempt-timeout (formerly --reply-timeout, still taken)"},
	{Name: "kill-grace", Key: "executor.kill-grace", Default: runner.DefaultKillGrace, Live: true, Min: settings.AtLeast(0),
		Help: "each step of stopping an attempt (interrupt, SIGTERM, SIGKILL) waits this long"},
	{Name: "codex-sandbox", Key: "executor.codex.sandbox", Default: "workspace-write",
		OneOf: []string{"read-only", "workspace-write", "danger-full-access"}, Help: "codex sandbox mode"},
	{Name: "codex-provider", Key: "executor.codex.provider", Live: true,
		Help: "a model provider defined in your Codex config whose own retries are capped at one, so the agent owns retrying (not for the built-in openai)"},
	{Name: "claude-allowed-tools", Key: "executor.claude.allowed-tools", Default: []string(nil),
		Help: "tools Claude Code may use without asking (--allowedTools), e.g. Bash,Write,Edit"},
	{Name: "claude-limit-wait", Key: "executor.claude.limit-wait", Default: claude.DefaultLimitWait, Min: settings.AtLeast(int64(time.Second)),
		Help: "a retry Claude Code would wait longer than this for after a 429 (its retry-after: a usage limit's reset) stops the attempt, usage_limit: the task parks until then rather than the CLI sleeping through it; a shorter wait is left to Claude Code"},
	{Name: "claude-permission-mode", Key: "executor.claude.permission-mode",
		OneOf: []string{"", "default", "acceptEdits", "dontAsk", "plan", "bypassPermissions"}, Help: "Claude Code --permission-mode"},

	{Name: "isolation", Key: "isolation.mode", Default: string(isolation.Auto), OneOf: isolationModes(),
		Help: "auto (confine every attempt with Landlock where the kernel has it, and say so loudly where it has not), landlock (confine, or do not start), or none"},
	{Name: "isolation-deny", Key: "isolation.deny", Default: []string(nil), Repeat: true, Path: true,
		Help: "a file or directory no task may read or write, besides the agent's own and the default list of credentials (agent doctor shows it), repeatable"},
	{Name: "isolation-allow", Key: "isolation.allow", Default: []string(nil), Repeat: true, Path: true,
		Help: "an entry of the default deny list tasks may read after all (e.g. ~/.aws), or a path inside one (a deploy key, ~/.ssh/deploy_key), repeatable; never the agent's own files"},
	{Name: "isolation-write", Key: "isolation.write", Default: []string(nil), Repeat: true, Path: true,
		Help: "a directory tasks may write, besides their work directory, temporary directories and CLI state (e.g. ~/.cache/go-build), repeatable"},
	{Name: "egress", Default: string(isolation.EgressAuto), OneOf: egressModes(),
		Help: "auto (each attempt in a network namespace of its own, reaching its executor's model API and --egress-allow through the agent's proxy, where the kernel lets the agent make one; said loudly where not), allowlist (that, or do not start), or open (the machine's network)"},
	{Name: "egress-allow", Default: []string(nil), Repeat: true,
		Help: "a host tasks may reach besides their executor's model API, HOST (ports 443 and 80), HOST:PORT or *.DOMAIN, repeatable (e.g. github.com, pypi.org, 127.0.0.1:11434); a task may narrow it (submit --egress-allow)"},
	{Name: "task-user", Help: "for an agent running as root: the unprivileged user its tasks run as (their directories become theirs); without it they run as root without capabilities"},

	{Name: "models", Default: []string(nil), Live: true, Help: "fallback chain of models: attempt N uses the N-th, the last repeating"},
	{Name: "max-concurrent", Default: agent.DefaultMaxConcurrent, Live: true, Min: settings.AtLeast(1), Help: "tasks run at once"},
	{Name: "max-starts", Default: runner.DefaultMaxStarts, Live: true, Min: settings.AtLeast(1),
		Help: "attempts starting at once (their workspace and executor, until its first event), apart from --max-concurrent; the others wait in a start queue, their limits not running (agent health shows it)"},
	{Name: "on-budget", Default: string(state.OnBudgetPark), OneOf: []string{string(state.OnBudgetPark), string(state.OnBudgetFail)},
		Help: "when a task reaches its token or time budget: park (the attempt is stopped, the task parks and a person is told; agent tasks budget ID --add-tokens N or --add-time D raises it and the session continues) or fail (budget_exceeded, for good)"},
	{Name: "liveness-interval", Default: runner.DefaultLiveness, Min: settings.AtLeast(int64(100 * time.Millisecond)),
		Help: "how often a running attempt's processes are looked at (their CPU time and I/O, the whole tree): one at work with no event is working (silent), and the control plane's stall limit counts from the last time it was seen at work, so a long silent test run is not ended as hung, while a stopped or idle one is"},
	{Name: "park-keeps-slot", Default: false,
		Help: "a task parked at a usage limit (phase parked, until the limit resets) keeps its slot of --max-concurrent; by default it gives the slot up while it waits, and waits for one to resume"},
	{Name: "max-retries", Default: runner.DefaultMaxAttempts - 1, Live: true, Min: settings.AtLeast(0), Help: "automatic retries after the first attempt"},
	{Name: "no-retry", Default: false, Live: true, Help: "never retry automatically (same as --max-retries 0)"},
	{Name: "on-side-effect", Default: string(state.OnSideEffectContinue), Live: true, OneOf: []string{string(state.OnSideEffectContinue), string(state.OnSideEffectAsk)},
		Help: "after a transient failure (or the agent's own stop) of an attempt that had output, a tool call or a side effect, with a session to resume: continue it on its own, or ask: stop there for a person, who continues or retries (a task's submit --on-side-effect wins)"},
	{Name: "attempt-timeout", Default: runner.DefaultAttemptTimeout, Live: true, Min: settings.AtLeast(1),
		Help: "whole-attempt limit per attempt number, the last repeating"},
	{Name: "first-event-timeout", Default: runner.DefaultFirstEventTimeout, Live: true, Min: settings.AtLeast(1),
		Help: "first-event limit per attempt number, the last repeating"},
	// budgets
	{Name: "default-max-tokens", Default: 0, Live: true, Min: settings.AtLeast(0),
		Help: "the tokens all of a task's attempts may use together, for a task that sets none (submit --max-tokens); past it the attempt is stopped, budget_exceeded; 0: no bound"},
	{Name: "default-max-time", Default: time.Duration(0), Live: true, Min: settings.AtLeast(0),
		Help: "the wall time all of a task's attempts may run together, for a task that sets none (submit --max-time); past it the attempt is stopped, budget_exceeded; 0: no bound"},
	{Name: "heartbeat-interval", Default: agent.DefaultHeartbeatInterval, Min: settings.AtLeast(1),
		Help: "time between heartbeats (the control plane may change it)"},
	{Name: "drain-timeout", Default: agent.DefaultShutdownGrace, Min: settings.AtLeast(0),
		Help: "on stop, how long running tasks may finish before they are cancelled"},
	{Name: "reattach-grace", Default: agent.DefaultReattachGrace, Min: settings.AtLeast(0),
		Help: "on stop or a crash, how long running attempts go on without the agent: the next start within it takes them up where they are (no continue, no replay); past it they end and are continued as after a crash; 0 stops them with the agent (docs/operating.md)"},

	{Name: "metrics-addr", Help: "serve Prometheus metrics at /metrics on this address (a port alone listens on 127.0.0.1); off when empty"},
	{Name: "retention", Default: state.DefaultRetention, Min: settings.AtLeast(int64(time.Hour)),
		Help: "how long finished tasks (state, logs, work directories) and dead outbox records are kept; at least 1h, as pruning runs every hour (a shorter one is refused)"},
	{Name: "retention-max-size", Default: settings.ByteSize(state.DefaultRetentionMaxBytes), Min: settings.AtLeast(0),
		Help: "disk cap for finished tasks; past it the ones that ended first are pruned (e.g. 10GiB)"},
	{Name: "task-log-max-size", Default: settings.ByteSize(agent.DefaultTaskLogMaxBytes), Min: settings.AtLeast(4 << 10),
		Help: "cap of each attempt's local log: the head and the tail are kept, the middle counted (e.g. 1MiB)"},
	{Name: "max-attempt-output", Default: settings.ByteSize(agent.DefaultMaxAttemptOutput), Min: settings.AtLeast(64 << 10),
		Help: "cap of the log output one attempt puts in the outbox (the control plane's own --max-attempt-output, which it tells the agent, when that is smaller); past it lines are counted and the control plane marks the cut (e.g. 8MiB; lower for a small disk)"},

	// The tmux view (issue 27): see docs/tmux.md.
	{Name: "tmux", Default: false,
		Help: "show each running attempt in a window of a tmux session of the agent's, its output as tasks logs -f prints it; attach with tmux -L agent attach -t agent"},
	{Name: "tmux-socket", Default: tmuxview.DefaultSocket, Help: "with --tmux: the tmux server's socket name (tmux -L), a server of the agent's own"},
	{Name: "tmux-session", Default: tmuxview.DefaultSession, Help: "with --tmux: the tmux session's name"},
	{Name: "tmux-linger", Default: tmuxview.DefaultLinger, Min: settings.AtLeast(0),
		Help: "with --tmux: how long an attempt's window stays once the attempt has ended (0: it closes at once)"},

	{Name: "log-level", Key: "log.level", Default: "info", Live: true, OneOf: []string{"debug", "info", "warn", "error"}, Help: "debug, info, warn or error"},
	{Name: "log-format", Key: "log.format", Default: "auto", OneOf: []string{"auto", "text", "json"},
		Help: "text (colored on a terminal unless NO_COLOR is set), json, or auto: text on a terminal, journal lines under systemd (<N> priority prefix, no time), json otherwise"},
}}

func egressModes() []string {
	var out []string
	for _, m := range isolation.EgressModes {
		out = append(out, string(m))
	}
	return out
}

func isolationModes() []string {
	var out []string
	for _, m := range isolation.Modes {
		out = append(out, string(m))
	}
	return out
}

// ControlPlane are the reference control plane's (agent
// controlplane serve). Their environment variables start AGENT_CP_, so an
// agent's AGENT_DATA_DIR in the same shell is not taken for the control
// plane's; a config file is read only when named.
var ControlPlane = &settings.Table{EnvPrefix: "AGENT_CP_", KeysCommand: "agent config print", List: []*settings.Setting{
	{Name: "addr", Default: "127.0.0.1:8080", Help: "address to listen on"},
	{Name: "tls-cert", Path: true, Help: "serve HTTPS with this PEM certificate (and its chain); with --tls-key (docs/console.md)"},
	{Name: "tls-key", Path: true, Help: "the PEM private key of --tls-cert; the file must be its owner's alone (chmod 600)"},
	{Name: "data-dir", Path: true, Default: "controlplane-data", Help: "where tasks and events are kept (with the file store), and the token files"},
	{Name: "store", Help: "where tasks, events and agents are kept: empty for files in the data directory, or a PostgreSQL URL (postgres://USER@HOST:PORT/DB; the password best in PGPASSWORD or ~/.pgpass) that any number of replicas share"},
	{Name: "retention", Default: server.DefaultRetention, Help: "ended tasks and their events are removed this long after they end; 0 keeps them forever"},
	{Name: "token-file", Path: true, Default: "", Help: "file holding the registration secret agents enrol with, and nothing else (default: DIR/token, made if missing)"},
	{Name: "operator-token-file", Path: true, Default: "", Help: "file of people's operator tokens, one per line; # comments (default: DIR/operator-token, made if missing)"},
	{Name: "lease", Default: server.DefaultLease, Min: settings.AtLeast(1), Help: "how long a claim lasts without renewal"},
	{Name: "heartbeat-interval", Default: server.DefaultHeartbeatInterval, Min: settings.AtLeast(1), Help: "the interval agents are told to use"},
	{Name: "stall-limit", Default: state.DefaultStallLimit, Min: settings.AtLeast(1), Help: "a running task with no progress this long ends"},
	{Name: "queued-limit", Default: state.DefaultQueuedLimit, Min: settings.AtLeast(1), Help: "a task queued this long expires"},
	{Name: "max-attempt-output", Default: settings.ByteSize(server.DefaultMaxAttemptOutput), Min: settings.AtLeast(64 << 10),
		Help: "cap of the log output stored per attempt; past it lines are counted, not stored, and one event marks the cut (e.g. 8MiB)"},
	{Name: "metrics-addr", Help: "serve Prometheus metrics at /metrics on this address (a port alone listens on 127.0.0.1); off when empty"},
	{Name: "replica-name", Help: "this replica's name, where several serve one store: agent agents ls shows which replica each agent talks to (default: this host's name and --addr's port)"},
	{Name: "public-url", Help: "the address people reach this control plane at, such as https://cp.example.com: notifications, and the pull requests agents open, link to its console (none when empty)"},
	{Name: "notify-webhook", Default: []string(nil), Repeat: true,
		Help: "a generic webhook's URL that gets every notification, signed with --notify-secret-file, repeatable: targets webhook-1, webhook-2, … (docs/notifications.md)"},
	{Name: "notify-secret-file", Path: true,
		Help: "file holding the HMAC key that signs the --notify-webhook deliveries, 32 characters or more (default: DIR/notify-secret, made if missing)"},
	{Name: "notify-window", Default: notify.DefaultWindow, Min: settings.AtLeast(int64(time.Second)),
		Help: "the window notifications' rate limits count in: a target gets one of an agent's or a task's repeats of an event per window, the rest folded into one notice with their count at its end (docs/notifications.md)"},
	{Name: "notify-max-per-subject", Default: notify.DefaultPerSubject, Min: settings.AtLeast(1),
		Help: "notifications about one agent or task a target gets per --notify-window; the rest are folded into one at the window's end"},
	{Name: "notify-max-per-target", Default: notify.DefaultPerTarget, Min: settings.AtLeast(1),
		Help: "notifications a target gets per --notify-window in all; the rest are folded into one digest at the window's end"},
	{Name: "notify", Default: []settings.FileTable(nil), Table: NotifyKeys,
		Help: "notification targets, in the config file only: [[notify]] tables with name, type (webhook, slack or ntfy), url or url-file, secret-file (a webhook's HMAC key), token-file (an ntfy access token) and events (default: every one); docs/notifications.md"},
	// Subtasks.
	{Name: "delegate", Default: []settings.FileTable(nil), Table: DelegateKeys,
		Help: "delegation rules for subtasks, in the config file only: [[delegate]] tables with parent and child (labels KEY=VALUE each must carry; none: any task), max-depth and max-children; the first that matches decides, and a task no parent matches is a leaf; none: the defaults by the task's type label (general or none: any task; explorer: a leaf; any other: explorers only), depth 2, 8 subtasks each (docs/subtasks.md)"},
	{Name: "log-level", Key: "log.level", Default: "info", OneOf: []string{"debug", "info", "warn", "error"}, Help: "debug, info, warn or error"},
	{Name: "log-format", Key: "log.format", Default: "auto", OneOf: []string{"auto", "text", "json"},
		Help: "text (colored on a terminal unless NO_COLOR is set), json, or auto: text on a terminal, json otherwise"},
}}

// DefaultConfigFile is the config file read when none is named:
// $XDG_CONFIG_HOME/agent/agent.toml, else ~/.config/agent/agent.toml;
// /etc/agent/agent.toml for root.
func DefaultConfigFile() string {
	if os.Geteuid() == 0 {
		return "/etc/agent/agent.toml"
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "agent", "agent.toml")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "agent", "agent.toml")
	}
	return ""
}

// DefaultDataDir is where the agent keeps its state unless told otherwise:
// $XDG_STATE_HOME/agent, else ~/.local/state/agent.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agent")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "agent")
	}
	return "agent-data"
}
