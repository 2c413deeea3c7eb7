package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// fakeBin writes an executable shell script standing in for a CLI that
// breaks its protocol.
func fakeBin(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-cli")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// A CLI that breaks the protocol fails its attempt with a protocol error
// (transient, the executor degraded), and never panics the agent.
func TestBrokenProtocolIsAProtocolError(t *testing.T) {
	for _, c := range []struct {
		name, script string
		claude       bool
		want         string
	}{
		{"codex: not JSON", `read line; echo 'this is not json'; sleep 30`, false, "not a protocol message"},
		{"codex: JSON that is not a message", `read line; echo '{"hello":1}'; sleep 30`, false, "not a protocol message"},
		{"codex: exits before the turn", `read line; exit 0`, false, "before the turn completed"},
		{"codex: refuses initialize", `read line; echo '{"id":1,"error":{"code":-1,"message":"nope"}}'; sleep 30`, false, "refused initialize"},
		{"claude: not JSON", `echo 'garbage'; sleep 30`, true, "not stream-json"},
		{"claude: no result line", `echo '{"type":"system","subtype":"init","session_id":"s"}'; exit 0`, true, "without a result line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var exe Executor
			var err error
			if c.claude {
				exe, err = NewClaude(ClaudeConfig{Bin: fakeBin(t, c.script), Grace: 200 * time.Millisecond})
			} else {
				exe, err = NewCodex(CodexConfig{Bin: fakeBin(t, c.script), Grace: 200 * time.Millisecond})
			}
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, exe, "hello")
			f.runner.Policy.MaxAttempts = 1
			f.run(t, context.Background())
			a := f.task.Attempts[0]
			if a.Error == nil || a.Error.Code != "protocol_error" || !strings.Contains(a.Error.Message, c.want) {
				t.Fatalf("attempt error %+v, want protocol_error with %q", a.Error, c.want)
			}
			if a.Retry == nil || !a.Retry.TechnicallyRetryable {
				t.Errorf("a protocol error is transient: retry decision %+v", a.Retry)
			}
			if g := f.health.Snapshot().Grade; g != "degraded" {
				t.Errorf("health %s, want degraded", g)
			}
		})
	}
}
