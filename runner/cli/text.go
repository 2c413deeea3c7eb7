package cli

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// ExitText says how a process ended.
func ExitText(e runner.Exit) string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return "exit status " + strconv.Itoa(e.ExitCode)
}

// HTTPStatusCode maps an HTTP status from a CLI's error to an error code.
func HTTPStatusCode(status int) state.ErrorCode {
	switch {
	case status == 0:
		return state.CodeNetwork
	case status == 429:
		return state.CodeRateLimit
	case status == 401:
		return state.CodeAuth
	case status == 403:
		return state.CodePermission
	case status == 529:
		return state.CodeOverloaded
	case status >= 500:
		return state.CodeUnavailable
	case status >= 400:
		return state.CodeInvalidRequest
	}
	return ""
}

// EnvValue is NAME's value in env, the last one set.
func EnvValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}

// HomeDir is where a CLI's own state lives by default: HOME/name, or ""
// without a HOME.
func HomeDir(env []string, name string) string {
	if home := EnvValue(env, "HOME"); home != "" {
		return filepath.Join(home, name)
	}
	return ""
}
