package acp

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
)

// Known is what the executor knows of the agent a command runs, by the
// binary's name: Gemini CLI (gemini, in ACP mode) and codex-acp (Codex
// over ACP) are known; any other agent is run knowing nothing of it (the
// zero Agent): it may then write only what the attempt may, and reach
// only what --egress-allow names. OpenCode's profile is its own
// executor's (runner/opencode).
func Known(bin string, args []string) Agent {
	switch name := strings.TrimSuffix(filepath.Base(bin), ".js"); name {
	case "gemini":
		return Gemini(args)
	case "codex-acp":
		return CodexACP()
	}
	return Agent{}
}

// geminiEndpoints are where Gemini CLI reaches its model: the Gemini API
// (a key), Code Assist (a Google login) and the login's token refresh.
var geminiEndpoints = []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"}

// Gemini is Gemini CLI (@google/gemini-cli) in ACP mode: --acp is added
// unless its arguments ask for ACP already. Its state is GEMINI_CLI_HOME
// (else HOME)/.gemini; its keys GEMINI_API_KEY or GOOGLE_API_KEY, or a
// Google login kept in that state; GOOGLE_GEMINI_BASE_URL moves its API.
// Its usage statistics and telemetry are turned off (they reach Google
// besides the model), as is its update check.
func Gemini(args []string) Agent {
	a := Agent{Name: "Gemini CLI", Pass: []string{"GEMINI_*", "GOOGLE_*"},
		Set: []string{"GEMINI_TELEMETRY_ENABLED=false", "GEMINI_CLI_NO_RELAUNCH=true"},
		State: func(env []string) []string {
			if h := cli.EnvValue(env, "GEMINI_CLI_HOME"); h != "" {
				return []string{filepath.Join(h, ".gemini")}
			}
			return []string{HomeDir(env, ".gemini")}
		},
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
		State:     func(env []string) []string { return []string{codex.Home(env)} },
		Endpoints: func(env, args []string) []egress.Rule { return codex.Endpoints(env, args) },
		Noise: func(line string) bool {
			return strings.Contains(line, "could not find bubblewrap") || strings.Contains(line, "Refusing to create helper binaries under temporary dir")
		}}
}
