package acp

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// The protocol gives a failed prompt a JSON-RPC error and nothing more:
// most agents put the model API's own message in it (OpenCode: "This
// request would exceed the rate limit…"; Gemini CLI: "[429 Too Many
// Requests] …"). Classify reads the class an agent does not say from
// that message; what it cannot tell it leaves to the runner's patterns.

// statusInText finds an HTTP status an agent quotes: "[429 Too Many
// Requests]", "status 503", "got status: 401", "(529)", "HTTP 500".
var statusInText = regexp.MustCompile(`(?i)(?:\[|\(|status(?: code)?:? |http |error:? |got )([45]\d\d)\b`)

// Classify maps an agent's error message to the runner's codes, "" when
// it cannot tell.
func Classify(msg string) state.ErrorCode {
	m := strings.ToLower(msg)
	switch {
	case containsAny(m, "context window", "context length", "context_length", "prompt is too long", "too many tokens", "exceeds the context",
		"maximum context", "input token count"):
		return state.CodeContextOverflow
	case containsAny(m, "quota", "credit balance", "insufficient_quota", "billing", "payment required"):
		return state.CodeQuota
	case containsAny(m, "api key", "api-key", "x-api-key", "unauthorized", "unauthenticated", "authentication", "invalid token", "not logged in", "login required"):
		return state.CodeAuth
	case containsAny(m, "rate limit", "rate_limit", "too many requests", "resource_exhausted", "resource exhausted"):
		return state.CodeRateLimit
	case containsAny(m, "overloaded", "at capacity"):
		return state.CodeOverloaded
	case containsAny(m, "permission denied", "permission_denied", "forbidden", "does not have permission"):
		return state.CodePermission
	}
	if sm := statusInText.FindStringSubmatch(msg); sm != nil {
		if n, err := strconv.Atoi(sm[1]); err == nil {
			return cli.HTTPStatusCode(n)
		}
	}
	switch {
	case containsAny(m, "timed out", "timeout"):
		return state.CodeTimeout
	case containsAny(m, "econnrefused", "econnreset", "connection refused", "connection reset", "fetch failed", "network", "socket hang up", "enotfound", "eai_again"):
		return state.CodeNetwork
	case containsAny(m, "internal server error", "service unavailable", "bad gateway"):
		return state.CodeUnavailable
	}
	return ""
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// retryHint finds the wait an agent's message asks for: "retry after 1s"
// (Gemini CLI), "try again in 1.5s", "in 20 seconds", "in 300ms".
var retryHint = regexp.MustCompile(`(?i)(?:retry after|try again in)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?)?\b`)

// RetryHint is the wait msg asks for before a retry, 0 when it says none.
func RetryHint(msg string) time.Duration {
	m := retryHint.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil || n <= 0 {
		return 0
	}
	unit := time.Second
	switch u := strings.ToLower(m[2]); {
	case strings.HasPrefix(u, "ms"), strings.HasPrefix(u, "milli"):
		unit = time.Millisecond
	case u == "m", strings.HasPrefix(u, "min"):
		unit = time.Minute
	}
	return time.Duration(n * float64(unit))
}
