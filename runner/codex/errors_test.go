package codex

import (
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

func TestCodexErrorClassification(t *testing.T) {
	for _, c := range []struct {
		name, info, message string
		code                state.ErrorCode
		retryAfter          time.Duration
	}{
		{"429 after codex's retries", `{"responseTooManyFailedAttempts":{"httpStatusCode":429}}`, "exceeded retry limit, last status: 429 Too Many Requests", "rate_limit", 0},
		{"rate limit with a hint", `"rateLimitExceeded"`, "rate limit exceeded: Rate limit reached. Please try again in 1.5s.", "rate_limit", 1500 * time.Millisecond},
		{"quota", `"usageLimitExceeded"`, "Quota exceeded. Check your plan and billing details.", "quota", 0},
		{"usage limit", `"usageLimitExceeded"`, "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 10:15 PM.", "usage_limit", 0},
		{"401", `{"httpConnectionFailed":{"httpStatusCode":401}}`, "unexpected status 401 Unauthorized", "auth", 0},
		{"403", `{"httpConnectionFailed":{"httpStatusCode":403}}`, "unexpected status 403 Forbidden", "permission", 0},
		{"connection refused", `{"httpConnectionFailed":{"httpStatusCode":null}}`, "Connection failed: error sending request", "network", 0},
		{"500", `"internalServerError"`, "We're currently experiencing high demand, which may cause temporary errors.", "unavailable", 0},
		{"503 overloaded", `"serverOverloaded"`, "Selected model is at capacity. Please try a different model.", "overloaded", 0},
		{"context window", `"contextWindowExceeded"`, "Codex ran out of room in the model's context window.", "context_overflow", 0},
		{"stream cut", `"other"`, "stream disconnected before completion: stream closed before response.completed", "network", 0},
		{"idle stream", `"other"`, "stream disconnected before completion: idle timeout waiting for SSE", "timeout", 0},
		{"5xx after retries", `{"responseTooManyFailedAttempts":{"httpStatusCode":502}}`, "exceeded retry limit, last status: 502", "unavailable", 0},
		{"unknown", `"somethingNew"`, "a new failure", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, after := codexError{Message: c.message, CodexErrorInfo: []byte(c.info)}.classify()
			if code != c.code || after != c.retryAfter {
				t.Errorf("classify = %q, %v; want %q, %v", code, after, c.code, c.retryAfter)
			}
		})
	}
}

func TestRetryHint(t *testing.T) {
	for msg, want := range map[string]time.Duration{
		"Please try again in 1.5s.":     1500 * time.Millisecond,
		"try again in 20 seconds":       20 * time.Second,
		"Try again in 300ms":            300 * time.Millisecond,
		"try again in 2 minutes":        2 * time.Minute,
		"try again later":               0,
		"no hint here":                  0,
		"try again in -3s (impossible)": 0,
	} {
		t.Run(msg, func(t *testing.T) {
			if got := retryHint(msg); got != want {
				t.Errorf("retryHint(%q) = %v, want %v", msg, got, want)
			}
		})
	}
}

// The rate-limit snapshot says when a used-up window resets: the latest
// of those at 100%; none when none is.
func TestRateLimitsReset(t *testing.T) {
	w := func(used float64, at int64) *codexRateWindow {
		return &codexRateWindow{UsedPercent: used, ResetsAt: at}
	}
	for _, c := range []struct {
		name string
		l    codexRateLimits
		want int64
	}{
		{"none", codexRateLimits{}, 0},
		{"not reached", codexRateLimits{Primary: w(80, 1795817737)}, 0},
		{"primary", codexRateLimits{Primary: w(100, 1795817737)}, 1795817737},
		{"the later of two", codexRateLimits{Primary: w(100, 1795817737), Secondary: w(100, 1796000000)}, 1796000000},
		{"the one reached", codexRateLimits{Primary: w(100, 1795817737), Secondary: w(50, 1796000000)}, 1795817737},
	} {
		got := c.l.resetsAt()
		if (c.want == 0) != got.IsZero() || c.want != 0 && got.Unix() != c.want {
			t.Errorf("%s: %v, want %d", c.name, got, c.want)
		}
	}
}
