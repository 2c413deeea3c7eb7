package acp

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/state"
)

// Tested are the ACP agents the acp executor is tested against, by the
// name of their binary: the npm package and version scripts/tools.sh
// installs for the tests. agent doctor says when another version runs.
var Tested = map[string]cli.TestedCLI{
	"gemini":          {Package: "@google/gemini-cli", Version: "0.61.0"},
	"codex-acp":       {Package: "@zed-industries/codex-acp", Version: "0.16.0"},
	"claude-code-acp": {Package: "@zed-industries/claude-code-acp", Version: "0.16.2"},
}

// Known is what the executor knows of the agent a command runs, by the
// binary's name: Gemini CLI (gemini, in ACP mode) and codex-acp (Codex
// over ACP) are known; any other agent is run knowing nothing of it (the
// zero Agent): it may then write only what the attempt may, and reach
// only what --egress-allow names. OpenCode's profile is its own
// executor's (runner/opencode).
func Known(bin string, args []string) Agent {
	var a Agent
	name := strings.TrimSuffix(filepath.Base(bin), ".js")
	switch name {
	case "gemini":
		a = Gemini(args)
	case "codex-acp":
		a = CodexACP()
	case "claude-code-acp":
		a = ClaudeCodeACP()
	}
	a.Tested = Tested[name]
	return a
}

// ClaudeCodeACP is claude-code-acp (@zed-industries/claude-code-acp),
// which runs Claude Code through the Claude Agent SDK: the Claude Code
// that CLAUDE_CODE_EXECUTABLE names, else the SDK's own bundled one. Its
// state, keys and hosts are Claude Code's (CLAUDE_CONFIG_DIR, else
// ~/.claude; ANTHROPIC_*), and it is told what the claude executor tells
// Claude Code: no traffic but the model's, one retry of its own. It does
// not exit when its stdin closes.
//
// Claude Code's own fallback after a cut stream (the same request again,
// not streamed) is turned off: claude-code-acp 0.16.2 passes on only
// the streamed text of an answer, so the fallback's answer never reaches
// ACP, and the turn would end end_turn with the cut part as its answer.
// Without it the cut fails the turn, as network, and the session is
// continued.
func ClaudeCodeACP() Agent {
	return Agent{Name: "claude-code-acp", Pass: []string{"CLAUDE_CONFIG_DIR", "CLAUDE_CODE_*", "ANTHROPIC_*"},
		Set: []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=1",
			"CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1"},
		KeepsRunning: true, DeclineFailsTurn: true,
		Classify:  classifyClaudeCode,
		LoginFix:  "set ANTHROPIC_API_KEY in agent run's environment, or run claude as the user agent run runs as and log in (its state is CLAUDE_CONFIG_DIR, else ~/.claude)",
		State:     func(env []string) []string { return []string{claude.ConfigDir(env)} },
		Endpoints: func(env, _ []string) []egress.Rule { return claude.Endpoints(env) },
	}
}

// claudeAPIError is the HTTP status Claude Code quotes in a failed
// request's message: "API Error: 500 …", "API Error: Request rejected
// (429) …".
var claudeAPIError = regexp.MustCompile(`(?i)\bAPI Error: (?:[^0-9(]*\()?([45]\d\d)\b`)

// classifyClaudeCode reads Claude Code's words, as claude-code-acp
// 0.16.2 passes them on (the prompt's -32603, "Internal error: " and
// Claude Code's message): a cut stream ("Connection to the API was lost
// (StreamTruncated)"), and the status it quotes, which says a 403
// ("Failed to authenticate. API Error: 403 Your API key does not have
// permission…") better than its words.
func classifyClaudeCode(_ int, msg string, _ map[string]any) state.ErrorCode {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "connection to the api was lost"), strings.Contains(m, "streamtruncated"):
		return state.CodeNetwork
	}
	// Its words for these come before any status it quotes.
	if c := Classify(msg); c == state.CodeContextOverflow || c == state.CodeQuota {
		return c
	}
	if sm := claudeAPIError.FindStringSubmatch(msg); sm != nil {
		if n, err := strconv.Atoi(sm[1]); err == nil {
			return cli.HTTPStatusCode(n)
		}
	}
	return ""
}

// geminiEndpoints are where Gemini CLI reaches its model: the Gemini API
// (a key), Code Assist (a Google login) and the login's token refresh.
var geminiEndpoints = []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"}

// geminiDefaults are the settings an attempt's Gemini CLI gets as its
// system defaults (the lowest of its settings: the user's own win): one
// try per model request (its default is 10, about four minutes of its own
// backoff on a 429 or a 5xx, during which it says nothing over ACP), so
// that the agent owns retrying; and no usage statistics or telemetry
// (they reach Google besides the model: play.googleapis.com).
const geminiDefaults = `{"general": {"maxAttempts": 1}, "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}}` + "\n"

// Gemini is Gemini CLI (@google/gemini-cli) in ACP mode: --acp is added
// unless its arguments ask for ACP already. Its state is GEMINI_CLI_HOME
// (else HOME)/.gemini; its keys GEMINI_API_KEY or GOOGLE_API_KEY, or a
// Google login kept in that state; GOOGLE_GEMINI_BASE_URL moves its API.
// Each attempt's settings defaults (geminiDefaults) are a file of its
// own (GEMINI_CLI_SYSTEM_DEFAULTS_PATH), which Gemini CLI 0.61.0 reads
// only where no directory above it is writable by others (not under
// /tmp): it says so on stderr when it skips it.
func Gemini(args []string) Agent {
	a := Agent{Name: "Gemini CLI", Pass: []string{"GEMINI_*", "GOOGLE_*"},
		Set: []string{"GEMINI_TELEMETRY_ENABLED=false", "GEMINI_CLI_NO_RELAUNCH=true"},
		Prepare: func(dir string) ([]string, error) {
			path := filepath.Join(dir, "gemini-system-defaults.json")
			// Readable by the attempt's user, who may not be the agent's.
			if err := os.WriteFile(path, []byte(geminiDefaults), 0o644); err != nil {
				return nil, err
			}
			return []string{"GEMINI_CLI_SYSTEM_DEFAULTS_PATH=" + path}, nil
		},
		Classify: classifyGemini,
		LoginFix: "set GEMINI_API_KEY (or GOOGLE_API_KEY) in agent run's environment, or run gemini as the user agent run runs as and log in with Google (its state is GEMINI_CLI_HOME, else ~/.gemini)",
		// Seen on 0.61.0: a new process's session/load empties the
		// session's record when it comes in the minute the record is
		// named by, and replays the history partly after its answer
		// (gemini.go).
		BeforeLoad:       geminiBeforeLoad,
		ReplaysAfterLoad: true,
		TurnCut:          geminiTurnCut,
		Noise: func(line string) bool {
			for _, n := range []string{"Ripgrep is not available", "due to untrusted folder", "disabled because the folder is not trusted", "[STARTUP] Phase"} {
				if strings.Contains(line, n) {
					return true
				}
			}
			return false
		},
		State: geminiState,
		Endpoints: func(env, _ []string) []egress.Rule {
			return Rules(geminiEndpoints, cli.EnvValue(env, "GOOGLE_GEMINI_BASE_URL"))
		},
	}
	if !slices.Contains(args, "--acp") && !slices.Contains(args, "--experimental-acp") {
		a.Args = []string{"--acp"}
	}
	return a
}

// CodexACP is codex-acp (@zed-industries/codex-acp), which embeds Codex:
// its state, configuration and hosts are Codex's (CODEX_HOME), it takes
// Codex's -c overrides (the codex executor's are added: no analytics,
// plugin sync, update check or endless connection retries), and it does
// not exit when its stdin closes.
func CodexACP() Agent {
	var args []string
	for _, o := range codex.Overrides {
		args = append(args, "-c", o)
	}
	return Agent{Name: "codex-acp", Pass: []string{"CODEX_HOME", "CODEX_*", "OPENAI_*"}, Args: args, KeepsRunning: true,
		Classify:  classifyCodex,
		LoginFix:  "codex login as the user agent run runs as (its state is CODEX_HOME, else ~/.codex), or set OPENAI_API_KEY or CODEX_API_KEY in agent run's environment",
		State:     func(env []string) []string { return []string{codex.Home(env)} },
		Endpoints: func(env, args []string) []egress.Rule { return codex.Endpoints(env, args) },
		Noise: func(line string) bool {
			return strings.Contains(line, "could not find bubblewrap") || strings.Contains(line, "Refusing to create helper binaries under temporary dir")
		}}
}

// classifyCodex reads Codex's own words for the errors whose class its
// message does not name (seen with codex 0.169.0's, which codex-acp
// 0.16.0 passes on as the prompt's error message).
func classifyCodex(_ int, msg string, _ map[string]any) state.ErrorCode {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "at capacity"):
		return state.CodeOverloaded
	case strings.Contains(m, "experiencing high demand"):
		return state.CodeUnavailable
	case strings.Contains(m, "idle timeout"):
		return state.CodeTimeout
	case strings.Contains(m, "stream disconnected"), strings.Contains(m, "stream closed"), strings.Contains(m, "connection failed"):
		return state.CodeNetwork
	case strings.Contains(m, "ran out of room in the model's context window"):
		return state.CodeContextOverflow
	}
	return ""
}

// classifyGemini tells Gemini CLI's two 429s apart: a daily quota spent
// ("You have exhausted your daily quota on this model.", a
// TerminalQuotaError) from a rate limit ("Resource has been exhausted
// (e.g. check quota).", retryable). Gemini CLI 0.61.0 answers a failed
// prompt with the API's HTTP status as the error's code.
func classifyGemini(code int, msg string, _ map[string]any) state.ErrorCode {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "daily quota"), strings.Contains(m, "exceeded your current quota"):
		return state.CodeQuota
	case code == 429:
		return state.CodeRateLimit
	}
	return ""
}
