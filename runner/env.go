package runner

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/proc"
)

// The executor's environment is an allowlist: what a CLI needs to run for
// the user (PATH, HOME, the locale, the terminal), the attempt's variables,
// what its executor kind names (CODEX_HOME and OPENAI_* for Codex;
// CLAUDE_CONFIG_DIR and ANTHROPIC_* for Claude Code), and what the operator
// passes on by name (--executor-env). Everything else of the agent's
// environment stays behind: above all the control plane's token, and the
// service manager's sockets.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR"}

// neverEnv is never passed on, whatever an allowlist says.
var neverEnv = []string{"AGENT_TOKEN", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", proc.MarkEnv}

// CheckEnvNames checks names given to pass on (--executor-env): a name, or a
// prefix ending in "*". The agent's own secrets cannot be passed.
func CheckEnvNames(names []string) error {
	for _, n := range names {
		base := strings.TrimSuffix(n, "*")
		if base == "" || strings.ContainsAny(base, "=*\x00 ") {
			return fmt.Errorf("executor environment: %q is not a variable name (NAME or PREFIX*)", n)
		}
		for _, never := range neverEnv {
			if envMatch(n, never) || strings.HasPrefix(never, base) && strings.HasSuffix(n, "*") {
				return fmt.Errorf("executor environment: %s is never passed to an executor", never)
			}
		}
	}
	return nil
}

// envMatch reports whether variable name matches pattern (a name, or a
// prefix ending in "*").
func envMatch(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// Environ is the attempt's environment, built from the agent's: the
// allowed variables (the allowlist and allow), then set (explicit
// NAME=VALUE pairs), then the attempt's own variables.
func (s AttemptSpec) Environ(allow, set []string) []string {
	return executorEnv(os.Environ(), allow, set, s)
}

// executorEnv builds an attempt's environment from the agent's: the
// allowed variables of from, then set (explicit NAME=VALUE pairs), then the
// attempt's own variables.
func executorEnv(from []string, allow []string, set []string, spec AttemptSpec) []string {
	var env []string
	for _, kv := range from {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || matchesAny(neverEnv, name) || matchesAny(spec.Withhold, name) || name == "TMPDIR" && spec.TempDir != "" {
			continue
		}
		if matchesAny(baseEnv, name) || matchesAny(allow, name) {
			env = append(env, kv)
		}
	}
	env = spec.TaskUser.env(env)
	for _, kv := range set {
		if name, _, _ := strings.Cut(kv, "="); !matchesAny(neverEnv, name) && !matchesAny(spec.Withhold, name) {
			env = append(env, kv)
		}
	}
	if spec.TempDir != "" {
		env = append(env, "TMPDIR="+spec.TempDir)
	}
	if spec.SessionDir != "" {
		env = append(env, "AGENT_SESSION_DIR="+spec.SessionDir)
	}
	env = append(env, "AGENT_TASK_ID="+spec.Task.ID, "AGENT_ATTEMPT="+strconv.Itoa(spec.Task.Attempt), "AGENT_MODEL="+spec.Task.Model)
	for _, kv := range spec.TaskEnv {
		env = setEnv(env, kv)
	}
	return env
}

// setEnv puts NAME=VALUE kv in env, in place of any variable of that name.
func setEnv(env []string, kv string) []string {
	name, _, _ := strings.Cut(kv, "=")
	if matchesAny(neverEnv, name) {
		return env
	}
	env = slices.DeleteFunc(env, func(e string) bool { n, _, _ := strings.Cut(e, "="); return n == name })
	return append(env, kv)
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if envMatch(p, name) {
			return true
		}
	}
	return false
}
