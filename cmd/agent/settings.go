package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/tmuxview"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/state"
)

// A setting is one knob of the agent, defined once and known by one name
// everywhere: the flag --NAME, the environment variable AGENT_NAME (in
// capitals, dashes as underscores) and the key KEY in the config file.
// Commands bind the settings they take to their own variables with
// settings.bind; the default, the help and the checks come from here.
type setting struct {
	name string
	// key is the config file's key, dotted for a table
	// ("executor.codex.sandbox"); empty means the name.
	key  string
	def  any // the type and default: string, int, bool, time.Duration, byteSize, []string or []time.Duration
	help string
	// live settings apply to attempts that start after a reload; the
	// others need a restart. What decides a task's reach (the executor's
	// command, binary, arguments and environment, approvals, the CLIs'
	// sandbox and permissions, isolation) is never live: a file a task
	// could write must not change it under a running agent.
	live bool
	// repeat: a []string flag given once per value (--executor-arg) rather
	// than split at commas.
	repeat bool
	// commaList: a string setting that holds a comma-separated list, which
	// the config file may give as an array of strings.
	commaList bool
	// path: a file or directory. In the config file, ~/ is the home
	// directory and a relative path is relative to the file's directory.
	path bool
	// oneOf, if set, is every value allowed.
	oneOf []string
	// min, if set, is the smallest value allowed of an int or a duration.
	min *int64
	// pairs, if set, makes a repeat []string setting a list of pairs
	// FIRST=SECOND (--repo NAME=PATH); in the config file, an array of
	// tables [[KEY]] with the keys pairs[0] and pairs[1]. With path, the
	// second of each pair is a path.
	pairs *[2]string
	// pairOptions are the keys a pairs setting's [[KEY]] tables may have
	// besides the pair's (the file only): a command reads them with
	// resolved.tables.
	pairOptions []tableKey
	// table, if set, makes the setting a list of tables [[KEY]] with
	// these keys, in the config file only (no flag, no environment
	// variable): what is too rich for a flag, such as the control plane's
	// [[notify]] targets. Its value is []fileTable; a command reads it
	// with resolved.tables.
	table []tableKey
	// alias and aliasKey are a former name of the setting and its config
	// file key, still taken (as the flag --ALIAS, hidden, the variable
	// AGENT_ALIAS and the key) for what the setting is now.
	alias, aliasKey string
}

// tableKey is a key of the tables of a table setting.
type tableKey struct {
	name string
	def  any // the type: string or []string
	path bool
	// required: every table has it.
	required bool
}

// notifyKeys are the keys of a [[notify]] table (controlplane/notify's
// Target).
var notifyKeys = []tableKey{
	{name: "name", def: "", required: true},
	{name: "type", def: "", required: true},
	{name: "url", def: ""},
	{name: "url-file", def: "", path: true},
	{name: "secret-file", def: "", path: true},
	{name: "token-file", def: "", path: true},
	{name: "events", def: []string(nil)},
}

// delegateKeys are the keys of a [[delegate]] table (controlplane/server's
// DelegateRule): subtasks.
var delegateKeys = []tableKey{
	{name: "parent", def: []string(nil)},
	{name: "child", def: []string(nil)},
	{name: "max-depth", def: 0},
	{name: "max-children", def: 0},
}

// repoKeys are the keys of a [[repo]] table; repoOptionKeys the ones it
// may have besides: what the agent does with a completed task's branch
// (see repoDeliveries).
var (
	repoKeys       = [2]string{"name", "path"}
	repoOptionKeys = []tableKey{{name: "push", def: ""}, {name: "pull_request", def: ""}, {name: "api_url", def: ""},
		{name: "token_env", def: ""}, {name: "project", def: ""}}
)

func atLeast(n int64) *int64 { return &n }

// fileKey is the setting's key in the config file.
func (s *setting) fileKey() string {
	if s.key != "" {
		return s.key
	}
	return s.name
}

// envName is the setting's environment variable for a prefix such as
// AGENT_.
func (s *setting) envName(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// check refuses a value the setting does not allow. v has the setting's
// type.
func (s *setting) check(v any) error {
	if s.pairs != nil {
		list, _ := v.([]string)
		for _, p := range list {
			if _, _, err := s.splitPair(p); err != nil {
				return err
			}
		}
	}
	if len(s.oneOf) > 0 {
		str, _ := v.(string)
		if !slices.Contains(s.oneOf, str) {
			return fmt.Errorf("%q: want %s", str, orList(s.oneOf))
		}
	}
	if s.min != nil {
		var n int64
		switch x := v.(type) {
		case int:
			n = int64(x)
		case byteSize:
			n = int64(x)
			if n < *s.min {
				return fmt.Errorf("%s: want at least %s", x, byteSize(*s.min))
			}
			return nil
		case time.Duration:
			return s.checkDuration(x)
		case []time.Duration:
			for _, d := range x {
				if err := s.checkDuration(d); err != nil {
					return err
				}
			}
			return nil
		}
		if n < *s.min {
			return fmt.Errorf("%d: want at least %d", n, *s.min)
		}
	}
	return nil
}

func (s *setting) checkDuration(d time.Duration) error {
	switch {
	case int64(d) >= *s.min:
		return nil
	case *s.min == 1:
		return fmt.Errorf("%s: want more than 0s", d)
	}
	return fmt.Errorf("%s: want at least %s", d, time.Duration(*s.min))
}

// splitPair splits a value of a pairs setting, FIRST=SECOND.
func (s *setting) splitPair(v string) (first, second string, err error) {
	first, second, ok := strings.Cut(v, "=")
	if !ok || first == "" || second == "" {
		return "", "", fmt.Errorf("%q: want %s=%s", v, strings.ToUpper(s.pairs[0]), strings.ToUpper(s.pairs[1]))
	}
	return first, second, nil
}

// orList writes "a, b or c", quoting the empty string as "".
func orList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		if v == "" {
			v = `""`
		}
		q[i] = v
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// settingsTable is a program's settings and the prefix of their
// environment variables.
type settingsTable struct {
	envPrefix string
	// defaultFile, if set, is the config file read when --config is not
	// given and the file exists.
	defaultFile func() string
	list        []*setting
}

// lookup finds a setting by flag name.
func (t *settingsTable) lookup(name string) *setting {
	for _, s := range t.list {
		if s.name == name {
			return s
		}
	}
	return nil
}

// byKey finds a setting by config file key, or a former key of it.
func (t *settingsTable) byKey(key string) *setting {
	for _, s := range t.list {
		if s.fileKey() == key || s.aliasKey != "" && s.aliasKey == key {
			return s
		}
	}
	return nil
}

// isTable tells whether key is a table of settings, such as executor.
func (t *settingsTable) isTable(key string) bool {
	for _, s := range t.list {
		if strings.HasPrefix(s.fileKey(), key+".") {
			return true
		}
	}
	return false
}

// bind declares the setting name as a flag of fs, stored in p, which must
// point to a variable of the setting's type.
func (t *settingsTable) bind(fs *pflag.FlagSet, name string, p any) {
	s := t.lookup(name)
	if s == nil {
		panic("no setting " + name)
	}
	help := s.help
	if t.envPrefix != "" {
		help += " (env " + s.envName(t.envPrefix) + ")"
	}
	switch def := s.def.(type) {
	case string:
		fs.StringVar(p.(*string), name, def, help)
	case int:
		fs.IntVar(p.(*int), name, def, help)
	case bool:
		fs.BoolVar(p.(*bool), name, def, help)
	case time.Duration:
		fs.DurationVar(p.(*time.Duration), name, def, help)
	case byteSize:
		v := p.(*byteSize)
		*v = def
		fs.Var(v, name, help)
	case []string:
		if s.repeat {
			fs.StringArrayVar(p.(*[]string), name, def, help)
		} else {
			fs.StringSliceVar(p.(*[]string), name, def, help)
		}
	case []time.Duration:
		fs.DurationSliceVar(p.(*[]time.Duration), name, def, help)
	default:
		panic(fmt.Sprintf("setting %s: unsupported type %T", name, def))
	}
	_ = fs.SetAnnotation(name, settingAnnotation, []string{s.name})
	if s.alias != "" {
		// The former name sets the same variable; pflag says it is
		// deprecated when it is used, and hides it.
		d, ok := s.def.(time.Duration)
		if !ok {
			panic("setting " + name + ": only a duration setting has an alias")
		}
		fs.DurationVar(p.(*time.Duration), s.alias, d, "former name of --"+name)
		_ = fs.MarkDeprecated(s.alias, "use --"+name)
	}
}

// settingAnnotation marks a flag bound to a setting: a command's own flag
// of the same name (submit's --repo) takes nothing from the settings.
const settingAnnotation = "agent-setting"

// bound is the flag of fs bound to setting s, or nil.
func bound(fs *pflag.FlagSet, s *setting) *pflag.Flag {
	if f := fs.Lookup(s.name); f != nil && f.Annotations[settingAnnotation] != nil {
		return f
	}
	return nil
}

// agentSettings are the settings of the agent's commands. The config file
// (--config, AGENT_CONFIG, else ~/.config/agent/agent.toml if it exists)
// holds any of them.
var agentSettings = &settingsTable{envPrefix: "AGENT_", defaultFile: defaultConfigFile, list: []*setting{
	{name: "control-plane", commaList: true, help: "the control plane's URL (https, or http on loopback); several replicas' comma-separated (a list in the config file): the agent talks to one at a time and moves to the next when it does not answer"},
	{name: "token-file", path: true, help: "file holding the token (else AGENT_TOKEN): for agent run, the control plane's registration secret; for submit, tasks and agents, a person's operator token, unless operator-token-file names it; 0600, 32 characters or more"},
	{name: "operator-token-file", path: true, help: "for submit, tasks and agents: file holding a person's operator token, over token-file (which agent run reads for the registration secret), so that one config file serves both; --token-file on the command line wins"},
	{name: "insecure", def: false, help: "allow http:// to a control plane that is not on loopback"},
	{name: "data-dir", path: true, def: defaultDataDir(), help: "the agent's data directory (for the commands that read one, the installed service's when nothing names one: see agent service)"},
	{name: "agent-id", help: "this agent's id (default: one kept in the data directory)"},
	{name: "work-dir", path: true, help: "where each task gets its work directory, TASK_ID below it, kept after the task (default: DATA_DIR/work)"},
	{name: "label", def: []string(nil), repeat: true,
		help: "a label the agent says it has, KEY=VALUE, repeatable (team=infra, gpu=yes); agents ls shows them as self-described: a task's --require label=gpu is met only by labels an operator grants (agents label)"},
	{name: "repo", def: []string(nil), repeat: true, path: true, pairs: &repoKeys, pairOptions: repoOptionKeys,
		help: "a repository tasks may name, NAME=PATH, repeatable: a task naming it runs in a clone of its own, WORK_DIR/TASK_ID on branch agent/TASK_ID; in the config file, [[repo]] tables with name and path, and push, pull_request, api_url, token_env and project (see docs/workspaces.md)"},
	{name: "commit-author", help: `who the agent's commits of a task's work are by, "NAME <EMAIL>" (default: agent <agent@HOSTNAME>)`},

	{name: "executor", key: "executor.kind", def: "exec", oneOf: []string{"exec", "codex", "claude", "opencode", "acp", "sample"},
		help: "exec (runs --executor-command), codex (codex app-server), claude (Claude Code in print mode), opencode (OpenCode in its ACP mode), acp (any agent that speaks the Agent Client Protocol: --executor-bin and --executor-arg), or sample (built in)"},
	{name: "executor-command", key: "executor.command",
		help: `with --executor exec: the command to run per attempt, split into argv like a shell would but never run by one, e.g. "my-cli --json"`},
	{name: "executor-bin", key: "executor.bin", path: true, help: "the codex, claude or opencode binary (default: its name on PATH); with --executor acp, the agent's command (e.g. gemini, codex-acp, opencode)"},
	{name: "executor-arg", key: "executor.args", def: []string(nil), repeat: true,
		help: `an argument added to the codex, claude, opencode or ACP agent's command line, repeatable (e.g. --executor-arg=-c --executor-arg='model_reasoning_effort="high"'; --executor-arg=--yolo for gemini)`},
	{name: "executor-env", key: "executor.env", def: []string(nil),
		help: "names of more environment variables to pass to the executor (NAME or PREFIX*); the agent's token is never passed"},
	{name: "approval", key: "executor.approval", def: "never", oneOf: []string{"never", "accept", "decline", "ask"},
		help: "what the executor asks before it acts (Codex's approval requests, Claude Code's permission prompts, OpenCode's and ACP agents' permission requests, an exec child's approval lines): never (nobody is asked: Codex stays in its sandbox, Claude Code denies what is not allowed, what OpenCode or an ACP agent asks about is declined), accept, decline, or ask (a person answers; docs/executors.md says when each CLI asks)"},
	{name: "approval-timeout", key: "executor.approval-timeout", def: runner.DefaultApprovalTimeout, live: true, min: atLeast(0),
		alias: "reply-timeout", aliasKey: "executor.reply-timeout",
		help: "with --approval ask: how long a person has to answer before the request is declined (the model is told; the task and a notification say so); 0 waits for ever; the time waited does not count against --attempt-timeout (formerly --reply-timeout, still taken)"},
	{name: "kill-grace", key: "executor.kill-grace", def: runner.DefaultKillGrace, live: true, min: atLeast(0),
		help: "each step of stopping an attempt (interrupt, SIGTERM, SIGKILL) waits this long"},
	{name: "codex-sandbox", key: "executor.codex.sandbox", def: "workspace-write",
		oneOf: []string{"read-only", "workspace-write", "danger-full-access"}, help: "codex sandbox mode"},
	{name: "codex-provider", key: "executor.codex.provider", live: true,
		help: "a model provider defined in your Codex config whose own retries are capped at one, so the agent owns retrying (not for the built-in openai)"},
	{name: "claude-allowed-tools", key: "executor.claude.allowed-tools", def: []string(nil),
		help: "tools Claude Code may use without asking (--allowedTools), e.g. Bash,Write,Edit"},
	{name: "claude-limit-wait", key: "executor.claude.limit-wait", def: claude.DefaultLimitWait, min: atLeast(int64(time.Second)),
		help: "a retry Claude Code would wait longer than this for after a 429 (its retry-after: a usage limit's reset) stops the attempt, usage_limit: the task parks until then rather than the CLI sleeping through it; a shorter wait is left to Claude Code"},
	{name: "claude-permission-mode", key: "executor.claude.permission-mode",
		oneOf: []string{"", "default", "acceptEdits", "dontAsk", "plan", "bypassPermissions"}, help: "Claude Code --permission-mode"},

	{name: "isolation", key: "isolation.mode", def: string(isolation.Auto), oneOf: isolationModes(),
		help: "auto (confine every attempt with Landlock where the kernel has it, and say so loudly where it has not), landlock (confine, or do not start), or none"},
	{name: "isolation-deny", key: "isolation.deny", def: []string(nil), repeat: true, path: true,
		help: "a file or directory no task may read or write, besides the agent's own and the default list of credentials (agent doctor shows it), repeatable"},
	{name: "isolation-allow", key: "isolation.allow", def: []string(nil), repeat: true, path: true,
		help: "an entry of the default deny list tasks may read after all (e.g. ~/.aws), or a path inside one (a deploy key, ~/.ssh/deploy_key), repeatable; never the agent's own files"},
	{name: "isolation-write", key: "isolation.write", def: []string(nil), repeat: true, path: true,
		help: "a directory tasks may write, besides their work directory, temporary directories and CLI state (e.g. ~/.cache/go-build), repeatable"},
	{name: "egress", def: string(isolation.EgressAuto), oneOf: egressModes(),
		help: "auto (each attempt in a network namespace of its own, reaching its executor's model API and --egress-allow through the agent's proxy, where the kernel lets the agent make one; said loudly where not), allowlist (that, or do not start), or open (the machine's network)"},
	{name: "egress-allow", def: []string(nil), repeat: true,
		help: "a host tasks may reach besides their executor's model API, HOST (ports 443 and 80), HOST:PORT or *.DOMAIN, repeatable (e.g. github.com, pypi.org, 127.0.0.1:11434); a task may narrow it (submit --egress-allow)"},
	{name: "task-user", help: "for an agent running as root: the unprivileged user its tasks run as (their directories become theirs); without it they run as root without capabilities"},

	{name: "models", def: []string(nil), live: true, help: "fallback chain of models: attempt N uses the N-th, the last repeating"},
	{name: "max-concurrent", def: agent.DefaultMaxConcurrent, live: true, min: atLeast(1), help: "tasks run at once"},
	{name: "max-starts", def: runner.DefaultMaxStarts, live: true, min: atLeast(1),
		help: "attempts starting at once (their workspace and executor, until its first event), apart from --max-concurrent; the others wait in a start queue, their limits not running (agent health shows it)"},
	{name: "on-budget", def: string(state.OnBudgetPark), oneOf: []string{string(state.OnBudgetPark), string(state.OnBudgetFail)},
		help: "when a task reaches its token or time budget: park (the attempt is stopped, the task parks and a person is told; agent tasks budget ID --add-tokens N or --add-time D raises it and the session continues) or fail (budget_exceeded, for good)"},
	{name: "liveness-interval", def: runner.DefaultLiveness, min: atLeast(int64(100 * time.Millisecond)),
		help: "how often a running attempt's processes are looked at (their CPU time and I/O, the whole tree): one at work with no event is working (silent), and the control plane's stall limit counts from the last time it was seen at work, so a long silent test run is not ended as hung, while a stopped or idle one is"},
	{name: "park-keeps-slot", def: false,
		help: "a task parked at a usage limit (phase parked, until the limit resets) keeps its slot of --max-concurrent; by default it gives the slot up while it waits, and waits for one to resume"},
	{name: "max-retries", def: runner.DefaultMaxAttempts - 1, live: true, min: atLeast(0), help: "automatic retries after the first attempt"},
	{name: "no-retry", def: false, live: true, help: "never retry automatically (same as --max-retries 0)"},
	{name: "on-side-effect", def: string(state.OnSideEffectContinue), live: true, oneOf: []string{string(state.OnSideEffectContinue), string(state.OnSideEffectAsk)},
		help: "after a transient failure (or the agent's own stop) of an attempt that had output, a tool call or a side effect, with a session to resume: continue it on its own, or ask: stop there for a person, who continues or retries (a task's submit --on-side-effect wins)"},
	{name: "attempt-timeout", def: runner.DefaultAttemptTimeout, live: true, min: atLeast(1),
		help: "whole-attempt limit per attempt number, the last repeating"},
	{name: "first-event-timeout", def: runner.DefaultFirstEventTimeout, live: true, min: atLeast(1),
		help: "first-event limit per attempt number, the last repeating"},
	// budgets
	{name: "default-max-tokens", def: 0, live: true, min: atLeast(0),
		help: "the tokens all of a task's attempts may use together, for a task that sets none (submit --max-tokens); past it the attempt is stopped, budget_exceeded; 0: no bound"},
	{name: "default-max-time", def: time.Duration(0), live: true, min: atLeast(0),
		help: "the wall time all of a task's attempts may run together, for a task that sets none (submit --max-time); past it the attempt is stopped, budget_exceeded; 0: no bound"},
	{name: "heartbeat-interval", def: agent.DefaultHeartbeatInterval, min: atLeast(1),
		help: "time between heartbeats (the control plane may change it)"},
	{name: "drain-timeout", def: agent.DefaultShutdownGrace, min: atLeast(0),
		help: "on stop, how long running tasks may finish before they are cancelled"},
	{name: "reattach-grace", def: agent.DefaultReattachGrace, min: atLeast(0),
		help: "on stop or a crash, how long running attempts go on without the agent: the next start within it takes them up where they are (no continue, no replay); past it they end and are continued as after a crash; 0 stops them with the agent (docs/operating.md)"},

	{name: "metrics-addr", help: "serve Prometheus metrics at /metrics on this address (a port alone listens on 127.0.0.1); off when empty"},
	{name: "retention", def: state.DefaultRetention, min: atLeast(int64(time.Hour)),
		help: "how long finished tasks (state, logs, work directories) and dead outbox records are kept; at least 1h, as pruning runs every hour (a shorter one is refused)"},
	{name: "retention-max-size", def: byteSize(state.DefaultRetentionMaxBytes), min: atLeast(0),
		help: "disk cap for finished tasks; past it the ones that ended first are pruned (e.g. 10GiB)"},
	{name: "task-log-max-size", def: byteSize(agent.DefaultTaskLogMaxBytes), min: atLeast(4 << 10),
		help: "cap of each attempt's local log: the head and the tail are kept, the middle counted (e.g. 1MiB)"},
	{name: "max-attempt-output", def: byteSize(agent.DefaultMaxAttemptOutput), min: atLeast(64 << 10),
		help: "cap of the log output one attempt puts in the outbox (the control plane's own --max-attempt-output, which it tells the agent, when that is smaller); past it lines are counted and the control plane marks the cut (e.g. 8MiB; lower for a small disk)"},

	// The tmux view (issue 27): see docs/tmux.md.
	{name: "tmux", def: false,
		help: "show each running attempt in a window of a tmux session of the agent's, its output as tasks logs -f prints it; attach with tmux -L agent attach -t agent"},
	{name: "tmux-socket", def: tmuxview.DefaultSocket, help: "with --tmux: the tmux server's socket name (tmux -L), a server of the agent's own"},
	{name: "tmux-session", def: tmuxview.DefaultSession, help: "with --tmux: the tmux session's name"},
	{name: "tmux-linger", def: tmuxview.DefaultLinger, min: atLeast(0),
		help: "with --tmux: how long an attempt's window stays once the attempt has ended (0: it closes at once)"},

	{name: "log-level", key: "log.level", def: "info", live: true, oneOf: []string{"debug", "info", "warn", "error"}, help: "debug, info, warn or error"},
	{name: "log-format", key: "log.format", def: "auto", oneOf: []string{"auto", "text", "json"},
		help: "text (colored on a terminal unless NO_COLOR is set), json, or auto: text on a terminal, journal lines under systemd (<N> priority prefix, no time), json otherwise"},
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

// A setting without a default is a string, empty by default.
func init() {
	for _, t := range []*settingsTable{agentSettings, controlPlaneSettings} {
		for _, s := range t.list {
			if s.def == nil {
				s.def = ""
			}
		}
	}
}

// controlPlaneSettings are the reference control plane's (agent
// controlplane serve). Their environment variables start AGENT_CP_, so an
// agent's AGENT_DATA_DIR in the same shell is not taken for the control
// plane's; a config file is read only when named.
var controlPlaneSettings = &settingsTable{envPrefix: "AGENT_CP_", list: []*setting{
	{name: "addr", def: "127.0.0.1:8080", help: "address to listen on"},
	{name: "tls-cert", path: true, help: "serve HTTPS with this PEM certificate (and its chain); with --tls-key (docs/console.md)"},
	{name: "tls-key", path: true, help: "the PEM private key of --tls-cert; the file must be its owner's alone (chmod 600)"},
	{name: "data-dir", path: true, def: "controlplane-data", help: "where tasks and events are kept (with the file store), and the token files"},
	{name: "store", help: "where tasks, events and agents are kept: empty for files in the data directory, or a PostgreSQL URL (postgres://USER@HOST:PORT/DB; the password best in PGPASSWORD or ~/.pgpass) that any number of replicas share"},
	{name: "retention", def: server.DefaultRetention, help: "ended tasks and their events are removed this long after they end; 0 keeps them forever"},
	{name: "token-file", path: true, def: "", help: "file holding the registration secret agents enrol with, and nothing else (default: DIR/token, made if missing)"},
	{name: "operator-token-file", path: true, def: "", help: "file of people's operator tokens, one per line; # comments (default: DIR/operator-token, made if missing)"},
	{name: "lease", def: server.DefaultLease, min: atLeast(1), help: "how long a claim lasts without renewal"},
	{name: "heartbeat-interval", def: server.DefaultHeartbeatInterval, min: atLeast(1), help: "the interval agents are told to use"},
	{name: "stall-limit", def: state.DefaultStallLimit, min: atLeast(1), help: "a running task with no progress this long ends"},
	{name: "queued-limit", def: state.DefaultQueuedLimit, min: atLeast(1), help: "a task queued this long expires"},
	{name: "max-attempt-output", def: byteSize(server.DefaultMaxAttemptOutput), min: atLeast(64 << 10),
		help: "cap of the log output stored per attempt; past it lines are counted, not stored, and one event marks the cut (e.g. 8MiB)"},
	{name: "metrics-addr", help: "serve Prometheus metrics at /metrics on this address (a port alone listens on 127.0.0.1); off when empty"},
	{name: "replica-name", help: "this replica's name, where several serve one store: agent agents ls shows which replica each agent talks to (default: this host's name and --addr's port)"},
	{name: "public-url", help: "the address people reach this control plane at, such as https://cp.example.com: notifications, and the pull requests agents open, link to its console (none when empty)"},
	{name: "notify-webhook", def: []string(nil), repeat: true,
		help: "a generic webhook's URL that gets every notification, signed with --notify-secret-file, repeatable: targets webhook-1, webhook-2, … (docs/notifications.md)"},
	{name: "notify-secret-file", path: true,
		help: "file holding the HMAC key that signs the --notify-webhook deliveries, 32 characters or more (default: DIR/notify-secret, made if missing)"},
	{name: "notify-window", def: notify.DefaultWindow, min: atLeast(int64(time.Second)),
		help: "the window notifications' rate limits count in: a target gets one of an agent's or a task's repeats of an event per window, the rest folded into one notice with their count at its end (docs/notifications.md)"},
	{name: "notify-max-per-subject", def: notify.DefaultPerSubject, min: atLeast(1),
		help: "notifications about one agent or task a target gets per --notify-window; the rest are folded into one at the window's end"},
	{name: "notify-max-per-target", def: notify.DefaultPerTarget, min: atLeast(1),
		help: "notifications a target gets per --notify-window in all; the rest are folded into one digest at the window's end"},
	{name: "notify", def: []fileTable(nil), table: notifyKeys,
		help: "notification targets, in the config file only: [[notify]] tables with name, type (webhook, slack or ntfy), url or url-file, secret-file (a webhook's HMAC key), token-file (an ntfy access token) and events (default: every one); docs/notifications.md"},
	// Subtasks.
	{name: "delegate", def: []fileTable(nil), table: delegateKeys,
		help: "delegation rules for subtasks, in the config file only: [[delegate]] tables with parent and child (labels KEY=VALUE each must carry; none: any task), max-depth and max-children; the first that matches decides, and a task no parent matches is a leaf; none: the defaults by the task's type label (general or none: any task; explorer: a leaf; any other: explorers only), depth 2, 8 subtasks each (docs/subtasks.md)"},
	{name: "log-level", key: "log.level", def: "info", oneOf: []string{"debug", "info", "warn", "error"}, help: "debug, info, warn or error"},
	{name: "log-format", key: "log.format", def: "auto", oneOf: []string{"auto", "text", "json"},
		help: "text (colored on a terminal unless NO_COLOR is set), json, or auto: text on a terminal, json otherwise"},
}}
