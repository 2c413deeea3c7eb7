// Package opencode is the opencode executor: it drives OpenCode in its
// ACP mode (`opencode acp`, JSON-RPC over stdio), one process per
// attempt, through the acp executor, with what OpenCode's protocol does
// not carry: where OpenCode keeps its state (its data, state and cache
// directories: never its configuration, which decides what an attempt may
// reach), the hosts of its providers, the settings that keep it from
// traffic but the model's, its permissions for the approval policy, and,
// once a turn has ended, OpenCode's own record of the session (`opencode
// export`), which holds every model request's tokens and the class of a
// failed request (its HTTP status, its retry-after) that the protocol
// drops. Its sessions live in its database and are continued with
// session/load.
//
// ACP over stdio rather than OpenCode's HTTP server: an attempt runs in a
// network namespace of its own, where the agent could not reach a server
// the attempt serves; stdio needs no network. The server's one gain, its
// live events (retries, tokens as they come), is what the export makes
// up for at the end of the turn.
package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// Config configures the opencode executor. Zero fields take the defaults
// their comments give.
type Config struct {
	// Base: Bin defaults to "opencode" on PATH; Args are added after
	// "acp" and the executor's own; the variables of OpenCode and of its
	// main providers always pass (Pass); Grace is each stop step's wait.
	cli.Base
	// Approval answers what OpenCode asks: never (default: OpenCode's
	// own permissions decide, and what they would ask about is
	// declined), accept, decline or ask a person. Other than never,
	// OpenCode asks before every command, file change, web fetch and
	// search, and any file outside the work directory.
	Approval runner.ApprovalPolicy
}

// Pass are the variables an OpenCode attempt gets besides the
// allowlist: OpenCode's own (OPENCODE_*, its XDG directories) and the
// keys of the providers it is most used with; another provider's key
// passes with --executor-env.
var Pass = []string{"OPENCODE_*", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
	"ANTHROPIC_*", "OPENAI_*", "GEMINI_*", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_*"}

// quiet keeps OpenCode from traffic but the model's (seen on 1.18.33:
// without them it looked up models.opencode.ai for its model catalog,
// and checked for updates) and from what it does besides the turn (its
// LSP downloads, sharing).
var quiet = []string{"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1"}

// overrides are the configuration the executor lays over the user's
// (OPENCODE_CONFIG_CONTENT, which OpenCode merges last): no session
// titles (a second model request per session, with the task's prompt),
// no sharing, no update.
var overrides = map[string]any{"agent": map[string]any{"title": map[string]any{"disable": true}}, "share": "disabled", "autoupdate": false}

// askPermissions are OpenCode's permissions when the agent answers what
// it asks (approval other than never): every tool that acts asks; reads
// inside the work directory do not.
var askPermissions = map[string]any{"bash": "ask", "edit": "ask", "webfetch": "ask", "websearch": "ask", "codesearch": "ask", "external_directory": "ask"}

// defaultEndpoints are the APIs of the providers OpenCode is most used
// with (their default base URLs), and OpenCode Zen's.
var defaultEndpoints = []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "openrouter.ai", "opencode.ai"}

// OpenCode is the opencode executor: the acp executor with OpenCode's
// profile.
type OpenCode struct {
	*acp.Executor
	cfg Config
	// catalog is `opencode models`, run once: agent doctor's login and
	// models checks both read it, and each run of OpenCode costs seconds
	// of processor time before it prints a line.
	catalog struct {
		sync.Mutex
		done   bool
		models []string
		err    error
	}
}

// New returns an opencode executor.
func New(cfg Config) (*OpenCode, error) {
	if cfg.Bin == "" {
		cfg.Bin = "opencode"
	}
	agent, err := Agent(cfg.Approval)
	if err != nil {
		return nil, err
	}
	x, err := acp.New(acp.Config{Base: cfg.Base, Kind: "opencode", Agent: &agent, Approval: cfg.Approval})
	if err != nil {
		return nil, err
	}
	return &OpenCode{Executor: x, cfg: cfg}, nil
}

// Agent is OpenCode's profile, for an executor whose approval policy is
// approval: what `--executor acp --executor-bin opencode` runs with too.
func Agent(approval runner.ApprovalPolicy) (acp.Agent, error) {
	content := map[string]any{}
	if own := os.Getenv("OPENCODE_CONFIG_CONTENT"); own != "" {
		if err := json.Unmarshal([]byte(own), &content); err != nil {
			return acp.Agent{}, fmt.Errorf("opencode executor: OPENCODE_CONFIG_CONTENT is not JSON: %v", err)
		}
	}
	for k, v := range overrides {
		content[k] = v
	}
	b, err := json.Marshal(content)
	if err != nil {
		return acp.Agent{}, err
	}
	set := append(append([]string{}, quiet...), "OPENCODE_CONFIG_CONTENT="+string(b))
	if approval != "" && approval != runner.ApprovalNever {
		// A project's configuration (opencode.json, .opencode/ in the
		// work directory: what a task can write) could say what OpenCode
		// may do without asking, per agent, over the permissions below,
		// or load a plugin that answers for the person: it is not read.
		// Its AGENTS.md goes with it.
		set = append(set, "OPENCODE_DISABLE_PROJECT_CONFIG=1")
		perm := map[string]any{}
		if own := os.Getenv("OPENCODE_PERMISSION"); own != "" {
			_ = json.Unmarshal([]byte(own), &perm)
		}
		for k, v := range askPermissions {
			perm[k] = v
		}
		pb, _ := json.Marshal(perm)
		set = append(set, "OPENCODE_PERMISSION="+string(pb))
	}
	return acp.Agent{
		Name: "OpenCode",
		// Its errors to stderr as they happen: its own retries of a
		// failed model request are said nowhere else.
		Args:      []string{"acp", "--print-logs", "--log-level", "ERROR"},
		Pass:      Pass,
		Set:       set,
		State:     stateDirs,
		Endpoints: func(env, _ []string) []egress.Rule { return endpoints(env) },
		Settle:    settle,
		Classify:  classify,
	}, nil
}

// xdg is OpenCode's directory of an XDG kind in env: $XDG_…/opencode,
// else under HOME.
func xdg(env []string, variable string, home ...string) string {
	if d := cli.EnvValue(env, variable); d != "" {
		return filepath.Join(d, "opencode")
	}
	if h := acp.HomeDir(env, home...); h != "" {
		return filepath.Join(h, "opencode")
	}
	return ""
}

// stateDirs are where OpenCode writes: its data (the database its
// sessions are in, auth.json), its state (locks) and its cache. Not its
// configuration: OpenCode reads it at start, and what it says (its
// providers' addresses among it) decides what attempts may reach.
func stateDirs(env []string) []string {
	var dirs []string
	for _, d := range []string{xdg(env, "XDG_DATA_HOME", ".local", "share"), xdg(env, "XDG_STATE_HOME", ".local", "state"), xdg(env, "XDG_CACHE_HOME", ".cache")} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// configFiles are the user's OpenCode configuration files in env: its
// global ones and OPENCODE_CONFIG's. Never a project's, in a work
// directory: a task can write that.
func configFiles(env []string) []string {
	var files []string
	if dir := xdg(env, "XDG_CONFIG_HOME", ".config"); dir != "" {
		for _, n := range []string{"config.json", "opencode.json", "opencode.jsonc"} {
			files = append(files, filepath.Join(dir, n))
		}
	}
	if f := cli.EnvValue(env, "OPENCODE_CONFIG"); f != "" {
		files = append(files, f)
	}
	return files
}

// baseURL finds the base URLs a configuration (JSON or JSONC) gives its
// providers.
var baseURL = regexp.MustCompile(`"baseURL"\s*:\s*"([^"]+)"`)

// endpoints are the hosts an attempt's OpenCode reaches: the main
// providers' and every base URL the user's configuration (its files and
// OPENCODE_CONFIG_CONTENT) gives a provider.
func endpoints(env []string) []egress.Rule {
	var urls []string
	texts := []string{cli.EnvValue(env, "OPENCODE_CONFIG_CONTENT")}
	for _, f := range configFiles(env) {
		if b, err := os.ReadFile(f); err == nil && len(b) < 4<<20 {
			texts = append(texts, string(b))
		}
	}
	for _, t := range texts {
		for _, m := range baseURL.FindAllStringSubmatch(t, 64) {
			urls = append(urls, m[1])
		}
	}
	return acp.Rules(defaultEndpoints, urls...)
}

// export is what `opencode export SESSION` prints of a session: its
// messages, each with its tokens and, for a failed model request, the
// error OpenCode kept.
type export struct {
	Messages []struct {
		Info struct {
			Role string `json:"role"`
			Time struct {
				Created int64 `json:"created"`
			} `json:"time"`
			Tokens *struct {
				Input     int64 `json:"input"`
				Output    int64 `json:"output"`
				Reasoning int64 `json:"reasoning"`
				Cache     struct {
					Read  int64 `json:"read"`
					Write int64 `json:"write"`
				} `json:"cache"`
			} `json:"tokens"`
			Error *exportError `json:"error"`
		} `json:"info"`
	} `json:"messages"`
}

// exportError is a failed message's error as OpenCode keeps it.
type exportError struct {
	Name string `json:"name"`
	Data struct {
		Message         string            `json:"message"`
		StatusCode      int               `json:"statusCode"`
		IsRetryable     bool              `json:"isRetryable"`
		ResponseHeaders map[string]string `json:"responseHeaders"`
		ResponseBody    string            `json:"responseBody"`
	} `json:"data"`
}

// settle reads OpenCode's record of the session (acp.Agent.Settle): the
// tokens of every model request the attempt made, and why its last
// failed.
func settle(ctx context.Context, run acp.RunFunc, session string, since time.Time) (acp.Settlement, error) {
	out, err := run(ctx, "export", session)
	if err != nil {
		return acp.Settlement{}, err
	}
	return parseExport(out, since)
}

// parseExport reads an export: since is when the attempt started (a
// continued session holds earlier attempts' messages too).
func parseExport(out []byte, since time.Time) (acp.Settlement, error) {
	var e export
	if err := json.Unmarshal(out, &e); err != nil {
		return acp.Settlement{}, fmt.Errorf("opencode export printed no session: %v", err)
	}
	var (
		st    acp.Settlement
		u     state.Usage
		last  *exportError
		seen  bool
		after = since.UnixMilli() - 1000 // OpenCode's clock is this machine's; a second of slack
	)
	for _, m := range e.Messages {
		if m.Info.Role != "assistant" || m.Info.Time.Created < after {
			continue
		}
		seen = true
		if t := m.Info.Tokens; t != nil {
			u.InputTokens += max(t.Input, 0) + max(t.Cache.Read, 0) + max(t.Cache.Write, 0)
			u.OutputTokens += max(t.Output, 0) + max(t.Reasoning, 0)
		}
		last = m.Info.Error
	}
	if !seen {
		return st, nil
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	if u.TotalTokens > 0 {
		st.Usage = &u
	}
	if last != nil {
		st.Code, st.RetryAfter = last.classify()
		st.Message = strings.TrimSpace(last.Data.Message)
	}
	return st, nil
}

// classify maps a kept error to a code and the wait its response asked
// for.
func (e *exportError) classify() (state.ErrorCode, time.Duration) {
	retry := retryAfter(e.Data.ResponseHeaders)
	switch e.Name {
	case "ContextOverflowError":
		return state.CodeContextOverflow, 0
	case "ProviderAuthError":
		return state.CodeAuth, 0
	case "MessageAbortedError", "MessageOutputLengthError":
		return "", 0
	}
	var body struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(e.Data.ResponseBody), &body)
	switch body.Error.Type + "/" + body.Error.Code {
	case "rate_limit_error/", "requests/rate_limit_exceeded":
		return state.CodeRateLimit, retry
	case "overloaded_error/":
		return state.CodeOverloaded, retry
	case "authentication_error/":
		return state.CodeAuth, 0
	case "permission_error/":
		return state.CodePermission, 0
	case "insufficient_quota/insufficient_quota":
		return state.CodeQuota, 0
	}
	// The API's words are more precise than its status (a 400 may be a
	// spent credit, a 429 a quota).
	if c := acp.Classify(e.Data.Message); c == state.CodeQuota || c == state.CodeContextOverflow {
		return c, 0
	}
	if e.Data.StatusCode != 0 {
		return cli.HTTPStatusCode(e.Data.StatusCode), retry
	}
	return acp.Classify(e.Data.Message), retry
}

// retryAfter is the wait a response's headers ask for: retry-after-ms,
// else retry-after in seconds.
func retryAfter(h map[string]string) time.Duration {
	get := func(k string) string {
		for hk, v := range h {
			if strings.EqualFold(hk, k) {
				return v
			}
		}
		return ""
	}
	if ms, err := strconv.ParseFloat(get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	if s, err := strconv.ParseFloat(get("retry-after"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 0
}

// classify maps what OpenCode's ACP mode says of a failed prompt (its
// error's name in data.errorName, the API's message) to a code, when the
// export cannot be read.
func classify(_ int, _ string, data map[string]any) state.ErrorCode {
	switch data["errorName"] {
	case "ContextOverflowError":
		return state.CodeContextOverflow
	case "ProviderAuthError":
		return state.CodeAuth
	}
	return ""
}

// CheckLogin implements cli.LoginChecker: `opencode models` lists the
// models of the providers OpenCode has a credential for (auth.json, a
// key in the environment, a key in its configuration), and of OpenCode
// Zen's free ones, without a request.
func (o *OpenCode) CheckLogin(ctx context.Context) (cli.Login, error) {
	models, err := o.models(ctx)
	if err != nil {
		return cli.Login{}, err
	}
	var providers []string
	for p := range providersOf(models) {
		if p != "opencode" {
			providers = append(providers, p)
		}
	}
	sort.Strings(providers)
	if len(providers) == 0 {
		return cli.Login{Detail: "no provider has a credential OpenCode can use (opencode models lists none but OpenCode Zen's)",
			Fix: "opencode auth login as the user agent run runs as, or set the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, …) in agent run's environment"}, nil
	}
	return cli.Login{OK: true, Detail: "providers with a credential: " + strings.Join(providers, ", ") + " (opencode models; keys not shown)"}, nil
}

// KnownModels implements cli.ModelLister: the models `opencode models`
// lists, PROVIDER/MODEL, as --models names them.
func (o *OpenCode) KnownModels(ctx context.Context) ([]string, bool, error) {
	models, err := o.models(ctx)
	return models, err == nil && len(models) > 0, err
}

// models is what `opencode models` listed, run the first time it is
// asked for (see OpenCode.catalog).
func (o *OpenCode) models(ctx context.Context) ([]string, error) {
	o.catalog.Lock()
	defer o.catalog.Unlock()
	if !o.catalog.done {
		o.catalog.models, o.catalog.err = o.listModels(ctx)
		o.catalog.done = true
	}
	return o.catalog.models, o.catalog.err
}

// listModels runs `opencode models`, which makes no request with the
// models fetch turned off.
func (o *OpenCode) listModels(ctx context.Context) ([]string, error) {
	bin, env := o.VersionEnv()
	out, err := cli.Run(ctx, bin, env, 4<<20, "models")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, cli.LastLine(out.Stderr))
	}
	var models []string
	for _, l := range strings.Split(out.Stdout, "\n") {
		l = strings.TrimSpace(l)
		if p, m, ok := strings.Cut(l, "/"); ok && p != "" && m != "" && !strings.ContainsAny(l, " \t") {
			models = append(models, l)
		}
	}
	if len(models) == 0 {
		return nil, errors.New("opencode models listed no model")
	}
	return models, nil
}

func providersOf(models []string) map[string]bool {
	set := map[string]bool{}
	for _, m := range models {
		p, _, _ := strings.Cut(m, "/")
		set[p] = true
	}
	return set
}

// VersionCommand implements cli.Versioned: `opencode --version`.
func (o *OpenCode) VersionCommand() (bin string, env []string) { return o.VersionEnv() }

// Describe says what the executor runs, for the agent's start banner.
func (o *OpenCode) Describe() string { return o.Executor.Describe() }
