package runner

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/health"
)

// Class is what a failure means for a retry.
type Class string

// The classes.
const (
	// Stop: the user cancelled, or the agent is shutting down. No retry.
	Stop Class = "stop"
	// Transient: the same attempt may well succeed later.
	Transient Class = "transient"
	// Permanent: trying again would fail the same way.
	Permanent Class = "permanent"
)

// Failure is everything known about why an attempt failed.
type Failure struct {
	Cancelled bool // by the user
	Shutdown  bool // the agent is stopping
	// Code, Message and RetryAfter come from the executor's last error event.
	Code       string
	Message    string
	RetryAfter time.Duration
	StartErr   error  // the executor could not start
	StdioClose bool   // output closed before a result
	Timeout    string // "first_event" or "attempt" when a limit fired
	Protocol   error  // an app server broke its protocol
	ExitCode   int
	Signal     string
}

// Verdict is a classified failure.
type Verdict struct {
	Class Class
	// Code names the failure on the attempt: the executor's code, or one
	// of cancelled, agent_shutdown, executor_not_found, not_executable,
	// stdio_closed, first_event_timeout, attempt_timeout, protocol_error,
	// exit_status.
	Code       string
	Message    string
	RetryAfter time.Duration
	// Signal is what the failure tells the health tracker, if anything.
	Signal health.Signal
}

// Explicit codes an executor may give, by class.
var (
	transientCodes = []string{"rate_limit", "overloaded", "unavailable", "timeout", "network"}
	permanentCodes = []string{"quota", "auth", "invalid_request", "context_overflow", "permission"}
)

// Patterns in an error message, lower-case.
var (
	stopPatterns      = []string{"quota exceeded", "exceeded your current quota", "billing", "payment required", "insufficient credits", "insufficient_quota", "context length", "context_length", "maximum context"}
	transientPatterns = []string{"rate limit", "rate_limit", "too many requests", "overloaded", "timeout", "timed out", "429", "502", "503", "504", "529", "connection reset", "temporarily unavailable", "try again"}
)

// Classify judges a failure, first match wins:
//
//  1. user cancel and agent shutdown stop;
//  2. an explicit code from the executor: rate_limit, overloaded,
//     unavailable, timeout, network are transient; quota, auth,
//     invalid_request, context_overflow, permission are permanent;
//  3. stop patterns in the message (quota exceeded, billing, payment
//     required, insufficient credits, context length) are permanent;
//  4. transient patterns (rate limit, too many requests, overloaded,
//     timeout, 429, 502, 503, 504, 529, connection reset, temporarily
//     unavailable, try again) are transient;
//  5. an executor that is not found or not executable is permanent;
//  6. stdio closed before a result, a protocol error, and a timeout, are
//     transient;
//  7. everything else is permanent.
func Classify(f Failure) Verdict {
	v := Verdict{Code: f.Code, Message: f.Message, RetryAfter: f.RetryAfter, Signal: signalOf(f)}
	msg := strings.ToLower(f.Message)
	switch {
	case f.Cancelled:
		return Verdict{Class: Stop, Code: "cancelled", Message: "cancelled by the user"}
	case f.Shutdown:
		return Verdict{Class: Stop, Code: "agent_shutdown", Message: "the agent is shutting down"}
	case slices.Contains(transientCodes, f.Code):
		v.Class = Transient
	case slices.Contains(permanentCodes, f.Code):
		v.Class = Permanent
	case containsAny(msg, stopPatterns):
		v.Class = Permanent
	case containsAny(msg, transientPatterns):
		v.Class = Transient
	case errors.Is(f.StartErr, ErrExecutorNotFound):
		v.Class, v.Code, v.Message = Permanent, "executor_not_found", f.StartErr.Error()
	case errors.Is(f.StartErr, ErrNotExecutable):
		v.Class, v.Code, v.Message = Permanent, "not_executable", f.StartErr.Error()
	case f.StdioClose:
		v.Class, v.Code, v.Message = Transient, "stdio_closed", "stdio closed before result"
	case f.Protocol != nil:
		// The CLI broke its protocol (a garbled line, an exit before the
		// outcome): the next run may well be fine.
		v.Class, v.Code, v.Message = Transient, "protocol_error", f.Protocol.Error()
	case f.Timeout != "":
		v.Class, v.Code = Transient, f.Timeout+"_timeout"
		if v.Message == "" {
			v.Message = "no " + strings.ReplaceAll(f.Timeout, "_", " ") + " within the limit"
		}
	default:
		v.Class = Permanent
	}
	if v.Code == "" {
		v.Code = fallbackCode(f)
	}
	if v.Message == "" {
		v.Message = fallbackMessage(f)
	}
	return v
}

// signalOf is what a failure tells the health tracker.
func signalOf(f Failure) health.Signal {
	switch {
	case f.StartErr != nil:
		return health.StartFailure
	case f.Protocol != nil:
		return health.ProtocolError
	case f.StdioClose:
		return health.StdioClosed
	case f.Timeout == "first_event":
		return health.FirstEventTimeout
	case f.Timeout == "attempt":
		return health.AttemptTimeout
	}
	return ""
}

func fallbackCode(f Failure) string {
	switch {
	case f.StartErr != nil:
		return "start_failed"
	case f.Protocol != nil:
		return "protocol_error"
	}
	return "exit_status"
}

func fallbackMessage(f Failure) string {
	switch {
	case f.StartErr != nil:
		return f.StartErr.Error()
	case f.Protocol != nil:
		return f.Protocol.Error()
	case f.Signal != "":
		return "killed by " + f.Signal
	}
	return "exit status " + strconv.Itoa(f.ExitCode)
}

// containsAny reports whether s holds one of the patterns. A pattern of
// digits matches only a whole number: "429" is not in "port 14293".
func containsAny(s string, patterns []string) bool {
	for _, p := range patterns {
		for off := 0; ; {
			i := strings.Index(s[off:], p)
			if i < 0 {
				break
			}
			i += off
			if !isDigit(p[0]) || ((i == 0 || !isDigit(s[i-1])) && (i+len(p) == len(s) || !isDigit(s[i+len(p)]))) {
				return true
			}
			off = i + 1
		}
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
