package runner

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// failureClass is what a failure means for a retry.
type failureClass string

// The classes.
const (
	// classStop: the user cancelled. No retry.
	classStop failureClass = "stop"
	// classInterrupted: the agent stopped or restarted under the attempt.
	// Nothing was wrong with it: the agent takes it up again when it runs
	// next, as the gate allows (a replay or a continue).
	classInterrupted failureClass = "interrupted"
	// classTransient: the same attempt may well succeed later.
	classTransient failureClass = "transient"
	// classPermanent: trying again would fail the same way.
	classPermanent failureClass = "permanent"
)

// failure is everything known about why an attempt failed.
type failure struct {
	Cancelled bool // by the user
	Shutdown  bool // the agent is stopping
	// Code, Message and RetryAfter come from the executor's last error event.
	Code       state.ErrorCode
	Message    string
	RetryAfter time.Duration
	StartErr   error       // the executor could not start
	StdioClose bool        // output closed before a result
	Timeout    timeoutKind // which of the agent's own limits fired, if one did
	Protocol   error       // an app server broke its protocol
	Budget     string      // how the attempt passed its task's budget, if it did
	ExitCode   int
	Signal     string
}

// verdict is a classified failure.
type verdict struct {
	Class failureClass
	// Code names the failure on the attempt: the executor's code, or one
	// of the agent's own (state.CodeCancelled, …).
	Code       state.ErrorCode
	Message    string
	RetryAfter time.Duration
	// Signal is what the failure tells the health tracker, if anything.
	Signal health.Signal
}

// Patterns in an error message, lower-case.
var (
	stopPatterns      = []string{"quota exceeded", "exceeded your current quota", "billing", "payment required", "insufficient credits", "insufficient_quota", "context length", "context_length", "maximum context"}
	transientPatterns = []string{"rate limit", "rate_limit", "too many requests", "overloaded", "timeout", "timed out", "429", "502", "503", "504", "529", "connection reset", "temporarily unavailable", "try again"}
)

// classify judges a failure, first match wins:
//
//  1. user cancel stops; agent shutdown interrupts; a session that cannot
//     be continued (session_lost) is permanent;
//  2. an explicit code from the executor: rate_limit, overloaded,
//     unavailable, timeout, gateway_timeout, network are transient; quota,
//     auth, invalid_request, context_overflow, permission are permanent
//     (an executor's timeout is the model's or its gateway's, never the
//     agent's own limit); an unknown code is kept and judged by the rules
//     below;
//  3. stop patterns in the message (quota exceeded, billing, payment
//     required, insufficient credits, context length) are permanent;
//  4. transient patterns (rate limit, too many requests, overloaded,
//     timeout, 429, 502, 503, 504, 529, connection reset, temporarily
//     unavailable, try again) are transient;
//  5. an executor that is not found or not executable is permanent;
//  6. stdio closed before a result, a protocol error, and a timeout, are
//     transient;
//  7. everything else is permanent.
func classify(f failure) verdict {
	v := verdict{Code: f.Code, Message: f.Message, RetryAfter: f.RetryAfter, Signal: signalOf(f)}
	msg := strings.ToLower(f.Message)
	switch {
	case f.Cancelled:
		return verdict{Class: classStop, Code: state.CodeCancelled, Message: "cancelled by the user"}
	case f.Shutdown:
		return verdict{Class: classInterrupted, Code: state.CodeAgentShutdown, Message: "the agent is shutting down"}
	case f.Budget != "":
		// Whatever the executor said as it was stopped.
		return verdict{Class: classPermanent, Code: state.CodeBudgetExceeded, Message: f.Budget}
	case f.Code == state.CodeSessionLost, f.Code == state.CodeWorkspace:
		// The session to continue is gone (a replay would start over what
		// it had done, so a person decides), or the task's workspace
		// could not be made.
		v.Class = classPermanent
	case f.Code.Retry() == state.RetryTransient:
		v.Class = classTransient
	case f.Code.Retry() == state.RetryPermanent:
		v.Class = classPermanent
	case containsAny(msg, stopPatterns):
		v.Class = classPermanent
	case containsAny(msg, transientPatterns):
		v.Class = classTransient
	case errors.Is(f.StartErr, ErrExecutorNotFound):
		v.Class, v.Code, v.Message = classPermanent, state.CodeExecutorNotFound, f.StartErr.Error()
	case errors.Is(f.StartErr, ErrNotExecutable):
		v.Class, v.Code, v.Message = classPermanent, state.CodeNotExecutable, f.StartErr.Error()
	case f.StdioClose:
		v.Class, v.Code, v.Message = classTransient, state.CodeStdioClosed, "stdio closed before result"
	case f.Protocol != nil:
		// The CLI broke its protocol (a garbled line, an exit before the
		// outcome): the next run may well be fine.
		v.Class, v.Code, v.Message = classTransient, state.CodeProtocolError, f.Protocol.Error()
	case f.Timeout != timeoutNone:
		v.Class, v.Code = classTransient, f.Timeout.Code()
		if v.Message == "" {
			v.Message = f.Timeout.message()
		}
	default:
		v.Class = classPermanent
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
func signalOf(f failure) health.Signal {
	switch {
	case f.StartErr != nil:
		return health.StartFailure
	case f.Protocol != nil:
		return health.ProtocolError
	case f.StdioClose:
		return health.StdioClosed
	case f.Timeout != timeoutNone:
		return f.Timeout.signal()
	}
	return ""
}

func fallbackCode(f failure) state.ErrorCode {
	switch {
	case f.StartErr != nil:
		return state.CodeStartFailed
	case f.Protocol != nil:
		return state.CodeProtocolError
	}
	return state.CodeExitStatus
}

// timeoutKind names which of the agent's own limits fired.
type timeoutKind int

// The limits.
const (
	timeoutNone       timeoutKind = iota
	timeoutFirstEvent             // no answer from the model within the first-event limit
	timeoutAttempt                // the whole attempt took longer than its limit
)

// Code is the error code a fired limit gives the attempt.
func (k timeoutKind) Code() state.ErrorCode {
	switch k {
	case timeoutFirstEvent:
		return state.CodeFirstEventTimeout
	case timeoutAttempt:
		return state.CodeAttemptTimeout
	}
	return ""
}

func (k timeoutKind) String() string {
	switch k {
	case timeoutFirstEvent:
		return "first_event"
	case timeoutAttempt:
		return "attempt"
	}
	return "none"
}

func (k timeoutKind) message() string {
	switch k {
	case timeoutFirstEvent:
		return "no first event within the limit"
	case timeoutAttempt:
		return "the attempt did not end within its limit"
	}
	return ""
}

func (k timeoutKind) signal() health.Signal {
	switch k {
	case timeoutFirstEvent:
		return health.FirstEventTimeout
	case timeoutAttempt:
		return health.AttemptTimeout
	}
	return ""
}

func fallbackMessage(f failure) string {
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
