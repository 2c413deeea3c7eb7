package codex

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// codexError is a turn's or an error notification's error.
type codexError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails string          `json:"additionalDetails"`
}

func (e codexError) text() string {
	if e.AdditionalDetails != "" && !strings.Contains(e.Message, e.AdditionalDetails) {
		return e.Message + " (" + e.AdditionalDetails + ")"
	}
	return e.Message
}

// classify maps codexErrorInfo to the runner's error codes (see
// EXECUTORS.md), and finds a retry hint in the message.
func (e codexError) classify() (code state.ErrorCode, retryAfter time.Duration) {
	retryAfter = retryHint(e.Message)
	var name string
	var detail map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &name) != nil && json.Unmarshal(e.CodexErrorInfo, &detail) == nil {
		for k := range detail {
			name = k
		}
	}
	status := 0
	if d, ok := detail[name]; ok && d.HTTPStatusCode != nil {
		status = *d.HTTPStatusCode
	}
	switch name {
	case "rateLimitExceeded":
		return state.CodeRateLimit, retryAfter
	case "serverOverloaded":
		return state.CodeOverloaded, retryAfter
	case "internalServerError":
		return state.CodeUnavailable, retryAfter
	case "usageLimitExceeded":
		// Codex says so of two things: a plan's usage window used up
		// ("You've hit your usage limit … try again at 10:15 PM"), which
		// resets (the rate-limit snapshot says when; see
		// codexRateLimits), and an API key's quota ("Quota exceeded.
		// Check your plan and billing details."), which does not.
		if strings.Contains(strings.ToLower(e.Message), "usage limit") {
			return state.CodeUsageLimit, retryAfter
		}
		return state.CodeQuota, retryAfter
	case "sessionBudgetExceeded":
		return state.CodeQuota, retryAfter
	case "unauthorized":
		return state.CodeAuth, retryAfter
	case "sandboxError":
		return state.CodePermission, retryAfter
	case "badRequest", "modelNotFound":
		return state.CodeInvalidRequest, retryAfter
	case "contextWindowExceeded":
		return state.CodeContextOverflow, retryAfter
	case "responseStreamDisconnected":
		return state.CodeNetwork, retryAfter
	case "responseTooManyFailedAttempts", "httpConnectionFailed":
		return cli.HTTPStatusCode(status), retryAfter
	}
	msg := strings.ToLower(e.Message + " " + e.AdditionalDetails)
	switch {
	case strings.Contains(msg, "idle timeout"):
		return state.CodeTimeout, retryAfter
	case strings.Contains(msg, "stream disconnected"), strings.Contains(msg, "stream closed"), strings.Contains(msg, "connection failed"):
		return state.CodeNetwork, retryAfter
	}
	return "", retryAfter // the message patterns decide
}

// retryHint finds "try again in 1.5s" (or "in 20 seconds", "in 300ms") in
// a message.
func retryHint(msg string) time.Duration {
	lower := strings.ToLower(msg)
	i := strings.Index(lower, "try again in ")
	if i < 0 {
		return 0
	}
	rest := lower[i+len("try again in "):]
	j := 0
	for j < len(rest) && (rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.') {
		j++
	}
	n, err := strconv.ParseFloat(rest[:j], 64)
	if err != nil || n <= 0 {
		return 0
	}
	unit := strings.TrimSpace(rest[j:])
	switch {
	case strings.HasPrefix(unit, "ms"), strings.HasPrefix(unit, "millisecond"):
		return time.Duration(n * float64(time.Millisecond))
	case strings.HasPrefix(unit, "m") && !strings.HasPrefix(unit, "ms"):
		if strings.HasPrefix(unit, "min") {
			return time.Duration(n * float64(time.Minute))
		}
	}
	return time.Duration(n * float64(time.Second))
}

// codexRateLimits is the account's rate-limit snapshot, as
// account/rateLimits/updated sends it: each window's use and when it
// resets (Unix seconds).
type codexRateLimits struct {
	Primary   *codexRateWindow `json:"primary"`
	Secondary *codexRateWindow `json:"secondary"`
}

type codexRateWindow struct {
	UsedPercent float64 `json:"usedPercent"`
	ResetsAt    int64   `json:"resetsAt"`
}

// resetsAt is when the latest of the windows used up resets: zero when
// none is.
func (l codexRateLimits) resetsAt() time.Time {
	var at time.Time
	for _, w := range []*codexRateWindow{l.Primary, l.Secondary} {
		if w != nil && w.UsedPercent >= 100 && w.ResetsAt > 0 {
			if t := time.Unix(w.ResetsAt, 0).UTC(); t.After(at) {
				at = t
			}
		}
	}
	return at
}
