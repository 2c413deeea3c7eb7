package state

import "fmt"

// The closed sets an attempt's record is made of: why it failed, what the
// safety gate said, and what was decided. Each is a type, so that a wrong
// value fails to compile and a switch can be checked whole; the JSON is the
// string.

// ErrorCode names why an attempt failed.
type ErrorCode string

// Codes an executor gives (an exec child's error event, or mapped from a
// CLI's own errors). The first seven are transient, the rest permanent (see
// ErrorCode.Retry).
const (
	CodeRateLimit      ErrorCode = "rate_limit"
	CodeOverloaded     ErrorCode = "overloaded"
	CodeUnavailable    ErrorCode = "unavailable"
	CodeTimeout        ErrorCode = "timeout"         // the model or its gateway timed out; not the agent's limit
	CodeGatewayTimeout ErrorCode = "gateway_timeout" // likewise
	CodeNetwork        ErrorCode = "network"
	// CodeUsageLimit: the account's usage limit (a plan's window of use,
	// a rate or quota limit with a reset time) is reached. Transient: with
	// the time it resets (an error's resets_at or retry_after_s) the task
	// parks until then and continues its session; without, the backoff
	// applies.
	CodeUsageLimit      ErrorCode = "usage_limit"
	CodeQuota           ErrorCode = "quota"
	CodeAuth            ErrorCode = "auth"
	CodeInvalidRequest  ErrorCode = "invalid_request"
	CodeContextOverflow ErrorCode = "context_overflow"
	CodePermission      ErrorCode = "permission"
)

// Codes the agent gives.
const (
	CodeCancelled         ErrorCode = "cancelled"
	CodeAgentShutdown     ErrorCode = "agent_shutdown"
	CodeAgentRestart      ErrorCode = "agent_restart"
	CodeExecutorNotFound  ErrorCode = "executor_not_found"
	CodeNotExecutable     ErrorCode = "not_executable"
	CodeStartFailed       ErrorCode = "start_failed"
	CodeStdioClosed       ErrorCode = "stdio_closed"
	CodeFirstEventTimeout ErrorCode = "first_event_timeout" // the agent's first-event limit fired
	CodeAttemptTimeout    ErrorCode = "attempt_timeout"     // the agent's whole-attempt limit fired
	CodeProtocolError     ErrorCode = "protocol_error"
	CodeExitStatus        ErrorCode = "exit_status"
	// CodeSessionLost: a continue could not resume the CLI's session (its
	// files are gone, or the CLI refused it). Never followed by a silent
	// replay: a person decides.
	CodeSessionLost ErrorCode = "session_lost"
	// CodeWorkspace: the task's workspace could not be made (a repository
	// the agent does not serve, a base that is not there, git failing).
	CodeWorkspace ErrorCode = "workspace"
	// CodeBudgetExceeded: the task's attempts passed its token or
	// wall-time budget; the agent stopped this one. Never retried.
	CodeBudgetExceeded ErrorCode = "budget_exceeded"
)

// Codes a terminal phase gives an attempt still open when its task ends
// from outside the runner (the control plane's watchdog timing a task out,
// a phase an agent reported): the phase's own name.
const (
	CodeFailed            ErrorCode = "failed"
	CodeRecoverableFailed ErrorCode = "recoverable_failed"
	CodeTimedOut          ErrorCode = "timed_out"
	CodeExpired           ErrorCode = "expired"
)

// Retry is what an error code, given by an executor, says of another
// attempt.
type Retry uint8

// What a code says of another attempt.
const (
	// RetryUnsaid: a code the agent gives itself, or one nobody knows;
	// the runner judges the failure by its other facts.
	RetryUnsaid Retry = iota
	// RetryTransient: the same attempt may well succeed later.
	RetryTransient
	// RetryPermanent: another attempt would fail the same way.
	RetryPermanent
)

// errorCodes is every ErrorCode, once, with what it says of another
// attempt: the runner's classification and the metrics' label values
// derive from it.
var errorCodes = map[ErrorCode]Retry{
	CodeRateLimit: RetryTransient, CodeOverloaded: RetryTransient, CodeUnavailable: RetryTransient,
	CodeTimeout: RetryTransient, CodeGatewayTimeout: RetryTransient, CodeNetwork: RetryTransient, CodeUsageLimit: RetryTransient,
	CodeQuota: RetryPermanent, CodeAuth: RetryPermanent, CodeInvalidRequest: RetryPermanent,
	CodeContextOverflow: RetryPermanent, CodePermission: RetryPermanent,

	CodeCancelled: RetryUnsaid, CodeAgentShutdown: RetryUnsaid, CodeAgentRestart: RetryUnsaid,
	CodeExecutorNotFound: RetryUnsaid, CodeNotExecutable: RetryUnsaid, CodeStartFailed: RetryUnsaid,
	CodeStdioClosed: RetryUnsaid, CodeFirstEventTimeout: RetryUnsaid, CodeAttemptTimeout: RetryUnsaid,
	CodeProtocolError: RetryUnsaid, CodeExitStatus: RetryUnsaid, CodeSessionLost: RetryUnsaid, CodeWorkspace: RetryUnsaid,
	CodeBudgetExceeded: RetryPermanent,

	CodeFailed: RetryUnsaid, CodeRecoverableFailed: RetryUnsaid, CodeTimedOut: RetryUnsaid, CodeExpired: RetryUnsaid,
}

// Known reports whether c is one of the codes above. An executor may send
// any string as a code.
func (c ErrorCode) Known() bool {
	_, ok := errorCodes[c]
	return ok
}

// Retry is what c, given by an executor, says of another attempt.
func (c ErrorCode) Retry() Retry { return errorCodes[c] }

// EndedBy is the outcome terminal phase p gives an attempt still open,
// with reason as its message: the control plane's when its watchdog ends
// a task, and the agent's when it hears of that ending.
func EndedBy(p Phase, reason string) Outcome {
	fail := func(c ErrorCode) Outcome {
		return Outcome{Status: AttemptFailed, Error: &Error{Code: c, Message: reason}}
	}
	switch p {
	case PhaseCompleted:
		return Outcome{Status: AttemptCompleted}
	case PhaseCancelled:
		return Outcome{Status: AttemptCancelled, Error: &Error{Code: CodeCancelled, Message: reason}}
	case PhaseRecoverableFailed:
		return fail(CodeRecoverableFailed)
	case PhaseTimedOut:
		return fail(CodeTimedOut)
	case PhaseExpired:
		return fail(CodeExpired)
	}
	return fail(CodeFailed) // PhaseFailed
}

// GateReason is what the safety gate said of a retry: allowed, or why not.
type GateReason string

// The gate's answers.
const (
	GateAllowed        GateReason = "allowed"
	GateSideEffect     GateReason = "side_effect"
	GateToolExecuted   GateReason = "tool_executed"
	GateVisibleOutput  GateReason = "visible_output"
	GateMaxAttempts    GateReason = "max_attempts"
	GateFirstEventUsed GateReason = "first_event_retry_used"
	// GateBudget: the task's budget is spent; nothing more runs.
	GateBudget GateReason = "budget_exceeded"
)

// Blocks reports whether the gate stopped the retry for safety (what the
// attempt did), as opposed to allowing it or running out of attempts.
func (g GateReason) Blocks() bool {
	switch g {
	case GateSideEffect, GateToolExecuted, GateVisibleOutput:
		return true
	}
	return false
}

// Decision is what followed a failed attempt.
type Decision string

// The decisions.
const (
	// DecisionRetried: the next attempt replays the task's prompt from
	// the start (in a workspace reset to its base).
	DecisionRetried Decision = "retried"
	// DecisionContinued: the next attempt resumes the attempt's CLI
	// session with a short follow-up, keeping its conversation and its
	// workspace as they are.
	DecisionContinued Decision = "continued"
	// DecisionStopped: no next attempt; the task ends, for a person to
	// retry or continue if they will.
	DecisionStopped Decision = "stopped"
)

// OnSideEffect is what follows an attempt that failed after it had done
// something a replay could repeat (visible output, a tool call, a side
// effect), when its session could be continued: on_side_effect, the
// agent's setting or a task's own.
type OnSideEffect string

// The choices. Empty is the agent's setting, and the agent's default is
// OnSideEffectContinue.
const (
	// OnSideEffectContinue: the agent continues the session on its own,
	// after the backoff (or, after its own stop, when it runs again).
	OnSideEffectContinue OnSideEffect = "continue"
	// OnSideEffectAsk: the gate stops there for a person, who continues
	// the session or replays the task (agent tasks continue, agent tasks
	// retry): the task ends recoverable_failed.
	OnSideEffectAsk OnSideEffect = "ask"
)

// Check refuses a value that is neither choice (empty is allowed: the
// agent's setting).
func (o OnSideEffect) Check() error {
	switch o {
	case "", OnSideEffectContinue, OnSideEffectAsk:
		return nil
	}
	return fmt.Errorf("on_side_effect %q: want continue or ask", string(o))
}

// Next reports whether the decision opens a next attempt.
func (d Decision) Next() bool { return d == DecisionRetried || d == DecisionContinued }
