package runner

import (
	"cmp"
	"errors"
	"regexp"
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
	Cancelled bool // from outside: a person, its parent, the control plane
	// CancelReason says who cancelled it and why, CancelPhase the phase it
	// ends in (see Cancel); empty for a bare ErrCancelled.
	CancelReason string
	CancelPhase  state.Phase
	Shutdown     bool // the agent is stopping
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
	// Stderr is what the executor wrote last to its stderr, when it
	// ended by itself (not stopped by the agent): see Exit.Stderr.
	Stderr string
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

// textRules name a failure from what was said of it (an error event's
// message, or what a plain command wrote last to its stderr), lower-case,
// in order: the permanent ones first, so that "429 … insufficient_quota"
// is a quota and not a rate limit. A pattern of digits matches a whole
// number only (see containsAny).
var textRules = []struct {
	code     state.ErrorCode
	patterns []string
}{
	{state.CodeQuota, []string{"quota exceeded", "exceeded your current quota", "insufficient_quota", "billing", "payment required", "insufficient credits", "credit balance is too low"}},
	{state.CodeContextOverflow, []string{"context length", "context_length", "maximum context", "context window", "prompt is too long"}},
	{state.CodeAuth, []string{"401", "unauthorized", "invalid api key", "invalid_api_key", "invalid x-api-key", "authentication failed", "authentication_error", "not logged in"}},
	{state.CodeRateLimit, []string{"rate limit", "rate_limit", "ratelimit", "too many requests", "429"}},
	{state.CodeOverloaded, []string{"overloaded", "529"}},
	{state.CodeGatewayTimeout, []string{"504", "gateway timeout"}},
	{state.CodeNetwork, []string{"connection reset", "connection refused", "econnreset", "econnrefused", "network is unreachable", "no such host", "name resolution", "broken pipe", "i/o timeout", "tls handshake"}},
	{state.CodeUnavailable, []string{"502", "503", "bad gateway", "service unavailable", "temporarily unavailable", "try again"}},
	{state.CodeTimeout, []string{"timed out", "timeout"}},
}

// codeOfText is the code the first rule that matches text gives, or "".
func codeOfText(text string) state.ErrorCode {
	lower := strings.ToLower(text)
	for _, r := range textRules {
		if containsAny(lower, r.patterns) {
			return r.code
		}
	}
	return ""
}

// stderrVerdict reads what a command wrote last to its stderr: the last
// line a rule matches names the failure (what it printed last is what
// ended it). It returns that line and its code, or "" when none matches.
func stderrVerdict(stderr string) (line string, code state.ErrorCode) {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if c := codeOfText(lines[i]); c != "" {
			return strings.TrimSpace(lines[i]), c
		}
	}
	return "", ""
}

// retryAfterText finds the wait a message asks for: "Retry-After: 30",
// "retry after 2.5s", "try again in 20 seconds", "retry in 500ms" (a bare
// number is seconds, as in the HTTP header). At most maxTextRetryAfter.
var retryAfterText = regexp.MustCompile(`(?i)(?:retry[-_ ]?after|try again in|retry in)["':= ]*([0-9]+(?:\.[0-9]+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\b`)

// maxTextRetryAfter bounds the wait a message may ask for.
const maxTextRetryAfter = time.Hour

func retryAfterOf(text string) time.Duration {
	m := retryAfterText.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	unit := time.Second
	switch u := strings.ToLower(m[2]); {
	case strings.HasPrefix(u, "ms"), strings.HasPrefix(u, "milli"):
		unit = time.Millisecond
	case strings.HasPrefix(u, "m"):
		unit = time.Minute
	case strings.HasPrefix(u, "h"):
		unit = time.Hour
	}
	return time.Duration(min(n*float64(unit), float64(maxTextRetryAfter)))
}

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
//  3. the text rules (textRules) on the executor's error message: quota
//     exceeded, billing, payment required, insufficient credits (quota),
//     context length (context_overflow), 401, unauthorized, invalid api
//     key (auth) are permanent; rate limit, too many requests, 429
//     (rate_limit), overloaded, 529 (overloaded), 504 (gateway_timeout),
//     connection reset or refused, no such host (network), 502, 503,
//     temporarily unavailable, try again (unavailable), timeout (timeout)
//     are transient; the rule names the code when the executor gave none;
//  4. the same rules on what a command that exited by itself wrote last
//     to its stderr (its last line a rule matches): a plain command's
//     "429 rate limit exceeded" is a rate limit, that line the message
//     when no error event gave one;
//  5. an executor that is not found or not executable is permanent;
//  6. stdio closed before a result, a protocol error, and a timeout, are
//     transient;
//  7. everything else is permanent.
//
// A transient failure whose text asks for a wait ("retry after 30s")
// carries it, unless the executor gave one.
func classify(f failure) verdict {
	v := verdict{Code: f.Code, Message: f.Message, RetryAfter: f.RetryAfter, Signal: signalOf(f)}
	stderrLine, stderrCode := stderrVerdict(f.Stderr)
	byText := func(code state.ErrorCode, text string) {
		if v.Code == "" {
			v.Code = code
		}
		if v.Class = classPermanent; code.Retry() == state.RetryTransient {
			v.Class = classTransient
			if v.RetryAfter <= 0 {
				v.RetryAfter = retryAfterOf(text)
			}
		}
	}
	switch {
	case f.Cancelled:
		return verdict{Class: classStop, Code: state.CodeCancelled, Message: cmp.Or(f.CancelReason, ErrCancelled.Error())}
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
	case codeOfText(f.Message) != "":
		byText(codeOfText(f.Message), f.Message)
	case stderrCode != "":
		if v.Message == "" {
			v.Message = stderrLine
		}
		byText(stderrCode, stderrLine)
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
