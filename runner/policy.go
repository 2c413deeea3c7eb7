package runner

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/edgeagent/agent/state"
)

// Policy is the retry policy. The zero value uses the defaults.
type Policy struct {
	// MaxAttempts is the most attempts a task gets, the first included.
	// Default 3. 1 means no retry.
	MaxAttempts int
	// BaseDelay is the wait before the first retry. Default 2 s.
	BaseDelay time.Duration
	// Factor multiplies the wait for each further retry. Default 2.
	Factor float64
	// MaxDelay caps the computed wait. Default 5 min.
	MaxDelay time.Duration
	// Jitter spreads the wait by up to this fraction either way. Default
	// 0.2; negative for none.
	Jitter float64
	// Rand returns a number in [0, 1). Default math/rand/v2.Float64.
	Rand func() float64
	// OnSideEffect is what follows an attempt that failed after it had
	// done something, when its session could be continued: continue it
	// (state.OnSideEffectContinue, the default) or stop for a person
	// (state.OnSideEffectAsk).
	OnSideEffect state.OnSideEffect
}

// Defaults of Policy.
const (
	DefaultMaxAttempts = 3
	DefaultBaseDelay   = 2 * time.Second
	DefaultFactor      = 2.0
	DefaultMaxDelay    = 5 * time.Minute
	DefaultJitter      = 0.2
)

// WithMaxRetries returns the policy allowing n retries after the first
// attempt (--max-retries n); n = 0 is no retry (--no-retry).
func (p Policy) WithMaxRetries(n int) Policy {
	p.MaxAttempts = max(n, 0) + 1
	return p
}

func (p Policy) withDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.Factor < 1 {
		p.Factor = DefaultFactor
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = DefaultJitter
	case p.Jitter < 0:
		p.Jitter = 0
	case p.Jitter > 0.9:
		p.Jitter = 0.9
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// Delay is the wait before retrying after failed attempt number n: the
// executor's retry-after when it gave one, else BaseDelay·Factor^(n-1),
// capped at MaxDelay, spread by the jitter.
func (p Policy) Delay(n int, retryAfter time.Duration) time.Duration {
	p = p.withDefaults()
	if retryAfter > 0 {
		return retryAfter
	}
	d := float64(p.BaseDelay) * math.Pow(p.Factor, float64(max(n, 1)-1))
	d = min(d, float64(p.MaxDelay))
	d *= 1 - p.Jitter + 2*p.Jitter*p.Rand()
	return time.Duration(d)
}

// parkDelay is how long a task parks for a limit that resets in wait
// (at most MaxParkWait): that, and a little jitter, up to a tenth of it
// and at most parkJitterMax, so that the tasks parked at one limit do not
// all resume at the same instant.
func (p Policy) parkDelay(wait time.Duration) time.Duration {
	wait = min(wait, MaxParkWait)
	return wait + time.Duration(p.Rand()*float64(min(wait/10, parkJitterMax)))
}

// parkJitterMax bounds the jitter of a park.
const parkJitterMax = 30 * time.Second

// gateOf is the safety gate: an automatic retry is allowed only when the
// failed attempt produced no visible output, used no tool, and had no side
// effect, so that running it again cannot repeat work. It returns
// state.GateAllowed or the blocking reason.
func gateOf(f state.Facts) state.GateReason {
	switch {
	case f.SideEffect:
		return state.GateSideEffect
	case f.ToolInput || f.ToolCall:
		return state.GateToolExecuted
	case f.Output:
		return state.GateVisibleOutput
	}
	return state.GateAllowed
}

// decide records how a failed attempt is judged: technically retryable
// (transient, or interrupted by the agent's own stop or restart), what the
// gate says of a replay, and what follows, when:
//
//   - a permanent failure, or a cancel: stopped;
//   - the gate blocks a replay (the attempt had a side effect, used a
//     tool, or showed output) and no session can be continued, or no
//     attempt is left: stopped, for a person, the gate saying why;
//   - no attempt left (MaxAttempts): stopped;
//   - the gate blocks a replay and a session can be continued
//     (canContinue), but OnSideEffect is ask: stopped for a person, who
//     may continue or retry (Asked);
//   - the gate blocks a replay and a session can be continued
//     (canContinue): continued, so the conversation, which knows what was
//     done, goes on from where it was cut;
//   - a second first-event timeout: stopped (that safe replay happens
//     once);
//   - otherwise, nothing having been done: retried, a replay of the
//     prompt.
//
// A usage limit said to reset (usage_limit with a retry-after) comes
// first: continued when a session can be, else retried when the gate
// allows it, after the wait and a little jitter (parkDelay), whatever
// the attempts used (the runner parks the task meanwhile).
//
// A transient failure waits the backoff; an interrupted attempt goes on
// as soon as the agent runs again. firstEventRetried reports whether an
// earlier attempt was already retried after a first-event timeout.
func (p Policy) decide(v verdict, a *state.Attempt, firstEventRetried, canContinue bool) state.RetryDecision {
	p = p.withDefaults()
	interrupted := v.Class == classInterrupted
	d := state.RetryDecision{TechnicallyRetryable: v.Class == classTransient || interrupted, Gate: gateOf(a.Facts), Decision: state.DecisionStopped}
	if v.Code == state.CodeBudgetExceeded {
		// Nothing is left to spend: neither the gate nor a backoff
		// brings another attempt.
		return state.RetryDecision{Gate: state.GateBudget, Decision: state.DecisionStopped}
	}
	blocked := d.Gate != state.GateAllowed
	if v.Code == state.CodeUsageLimit && v.RetryAfter > 0 {
		// The account's limit, said to reset: not the task's doing, so
		// no attempt is spent (see stoppedBefore), and the conversation
		// goes on once it resets, as the person would have it go on.
		switch {
		case canContinue:
			d.Decision = state.DecisionContinued
		case blocked:
			return d
		default:
			d.Decision = state.DecisionRetried
		}
		d.Delay = state.Duration(p.parkDelay(v.RetryAfter))
		return d
	}
	switch {
	case !d.TechnicallyRetryable, blocked && (!canContinue || a.Number >= p.MaxAttempts):
		return d
	case a.Number >= p.MaxAttempts:
		d.Gate = state.GateMaxAttempts
		return d
	case blocked && p.OnSideEffect == state.OnSideEffectAsk:
		d.Asked = true
		return d
	case blocked:
		d.Decision = state.DecisionContinued
	case v.Code == state.CodeFirstEventTimeout && firstEventRetried:
		d.Gate = state.GateFirstEventUsed
		return d
	default:
		d.Decision = state.DecisionRetried
	}
	if !interrupted {
		d.Delay = state.Duration(p.Delay(a.Number, v.RetryAfter))
	}
	return d
}

// Timeouts are the per-attempt limits. Each list holds the limit for
// attempt 1, 2, …; the last value repeats. The zero value uses the
// defaults.
type Timeouts struct {
	// Attempt bounds a whole attempt. Default 30 min.
	Attempt []time.Duration
	// FirstEvent bounds the wait for the executor's first event: short on
	// the first attempt, longer on the automatic retry. Default 60 s, 120 s.
	FirstEvent []time.Duration
}

// Defaults of Timeouts.
var (
	DefaultAttemptTimeout    = []time.Duration{30 * time.Minute}
	DefaultFirstEventTimeout = []time.Duration{60 * time.Second, 120 * time.Second}
)

// For returns the limits of attempt number n.
func (t Timeouts) For(n int) (firstEvent, attempt time.Duration) {
	fe, at := t.FirstEvent, t.Attempt
	if len(fe) == 0 {
		fe = DefaultFirstEventTimeout
	}
	if len(at) == 0 {
		at = DefaultAttemptTimeout
	}
	return state.Nth(fe, n), state.Nth(at, n)
}
