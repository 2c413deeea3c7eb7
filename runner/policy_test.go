package runner

import (
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

func TestBackoffIsExponentialCappedAndJittered(t *testing.T) {
	mid := Policy{Rand: func() float64 { return 0.5 }} // no jitter at the midpoint
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 8: 256 * time.Second, 9: 5 * time.Minute, 30: 5 * time.Minute} {
		if got := mid.Delay(n, 0); got != want {
			t.Errorf("after attempt %d: %v, want %v", n, got, want)
		}
	}
	low, high := Policy{Rand: func() float64 { return 0 }}, Policy{Rand: func() float64 { return 0.999999 }}
	if got := low.Delay(1, 0); got != 1600*time.Millisecond {
		t.Errorf("low jitter %v", got)
	}
	if got := high.Delay(1, 0); got < 2399*time.Millisecond || got > 2400*time.Millisecond {
		t.Errorf("high jitter %v", got)
	}
	if got := mid.Delay(1, 42*time.Second); got != 42*time.Second {
		t.Errorf("retry-after must win: %v", got)
	}
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[Policy{}.Delay(2, 0)] = true
	}
	if len(seen) < 2 {
		t.Error("default jitter does not vary")
	}
}

func TestMaxRetriesAndNoRetry(t *testing.T) {
	if p := (Policy{}).WithMaxRetries(0); p.withDefaults().MaxAttempts != 1 {
		t.Errorf("--no-retry: %d attempts", p.MaxAttempts)
	}
	if p := (Policy{}).WithMaxRetries(4); p.MaxAttempts != 5 {
		t.Errorf("--max-retries 4: %d attempts", p.MaxAttempts)
	}
	if (Policy{}).withDefaults().MaxAttempts != 3 {
		t.Error("default max attempts")
	}
}

func TestGate(t *testing.T) {
	cases := []struct {
		name  string
		facts state.Facts
		want  state.GateReason
	}{
		{"nothing done", state.Facts{}, state.GateAllowed},
		{"visible output", state.Facts{Output: true}, state.GateVisibleOutput},
		{"tool input", state.Facts{ToolInput: true}, state.GateToolExecuted},
		{"tool call wins over output", state.Facts{ToolCall: true, Output: true}, state.GateToolExecuted},
		{"side effect wins over all", state.Facts{SideEffect: true, ToolCall: true, Output: true}, state.GateSideEffect},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := gateOf(c.facts)
			if got != c.want {
				t.Errorf("%+v: %q, want %q", c.facts, got, c.want)
			}
			if got.Blocks() != (c.want != state.GateAllowed) {
				t.Errorf("%q.Blocks() = %v", got, got.Blocks())
			}
		})
	}
}

// TestDecide walks the decision table, every row, as the README gives it.
func TestDecide(t *testing.T) {
	p := Policy{Rand: func() float64 { return 0.5 }}
	var (
		transient   = verdict{Class: classTransient, Code: state.CodeOverloaded}
		permanent   = verdict{Class: classPermanent, Code: state.CodeAuth}
		cancelled   = verdict{Class: classStop, Code: state.CodeCancelled}
		shutdown    = verdict{Class: classInterrupted, Code: state.CodeAgentShutdown}
		restart     = verdict{Class: classInterrupted, Code: state.CodeAgentRestart}
		firstEvent  = verdict{Class: classTransient, Code: state.CodeFirstEventTimeout}
		sessionLost = verdict{Class: classPermanent, Code: state.CodeSessionLost}
	)
	clean := func(n int) *state.Attempt { return &state.Attempt{Number: n} }
	did := func(n int, f state.Facts) *state.Attempt { return &state.Attempt{Number: n, Facts: f} }
	sideEffect, tool, output := state.Facts{SideEffect: true}, state.Facts{ToolCall: true}, state.Facts{Output: true}
	const (
		retried   = state.DecisionRetried
		continued = state.DecisionContinued
		stopped   = state.DecisionStopped
	)
	for _, c := range []struct {
		name        string
		v           verdict
		a           *state.Attempt
		feUsed      bool
		canContinue bool
		decision    state.Decision
		gate        state.GateReason
		delay       time.Duration
	}{
		{"transient, nothing done: replay after the backoff", transient, clean(1), false, true, retried, state.GateAllowed, 2 * time.Second},
		{"transient, nothing done, second retry: longer backoff", transient, clean(2), false, false, retried, state.GateAllowed, 4 * time.Second},
		{"transient after a side effect, a session: continue", transient, did(1, sideEffect), false, true, continued, state.GateSideEffect, 2 * time.Second},
		{"transient after a tool call, a session: continue", transient, did(1, tool), false, true, continued, state.GateToolExecuted, 2 * time.Second},
		{"transient after output, a session: continue", transient, did(1, output), false, true, continued, state.GateVisibleOutput, 2 * time.Second},
		{"transient after a side effect, no session: a person", transient, did(1, sideEffect), false, false, stopped, state.GateSideEffect, 0},
		{"transient after a side effect, last attempt: a person", transient, did(3, sideEffect), false, true, stopped, state.GateSideEffect, 0},
		{"transient, nothing done, last attempt: a person", transient, clean(3), false, true, stopped, state.GateMaxAttempts, 0},
		{"first first-event timeout: replay", firstEvent, clean(1), false, true, retried, state.GateAllowed, 2 * time.Second},
		{"second first-event timeout: a person", firstEvent, clean(2), true, true, stopped, state.GateFirstEventUsed, 0},
		{"agent stopped, nothing done: replay at once on its next run", shutdown, clean(1), false, true, retried, state.GateAllowed, 0},
		{"agent stopped after a side effect, a session: continue at once", shutdown, did(1, sideEffect), false, true, continued, state.GateSideEffect, 0},
		{"agent stopped after a side effect, no session: a person", shutdown, did(1, sideEffect), false, false, stopped, state.GateSideEffect, 0},
		{"agent restarted after a tool call, a session: continue at once", restart, did(2, tool), false, true, continued, state.GateToolExecuted, 0},
		{"agent restarted after a tool call on the last attempt: a person", restart, did(3, tool), false, true, stopped, state.GateToolExecuted, 0},
		{"agent stopped before anything on the last attempt: a person", shutdown, clean(3), false, true, stopped, state.GateMaxAttempts, 0},
		{"permanent: a person", permanent, clean(1), false, true, stopped, state.GateAllowed, 0},
		{"permanent after a side effect: a person", permanent, did(1, sideEffect), false, true, stopped, state.GateSideEffect, 0},
		{"session lost: a person, never a replay", sessionLost, did(2, sideEffect), false, true, stopped, state.GateSideEffect, 0},
		{"cancelled: stopped", cancelled, did(1, output), false, true, stopped, state.GateVisibleOutput, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := p.decide(c.v, c.a, c.feUsed, c.canContinue)
			if d.Decision != c.decision || d.Gate != c.gate || d.Delay.D() != c.delay {
				t.Errorf("decision %s gate %s delay %s, want %s %s %s", d.Decision, d.Gate, d.Delay.D(), c.decision, c.gate, c.delay)
			}
			wantRetryable := c.v.Class == classTransient || c.v.Class == classInterrupted
			if d.TechnicallyRetryable != wantRetryable {
				t.Errorf("technically retryable %v, want %v", d.TechnicallyRetryable, wantRetryable)
			}
		})
	}
}

// on_side_effect ask stops at the gate for a person wherever the agent
// would continue a session on its own, and changes nothing else: a
// replay of an attempt that did nothing, a stop with no session to
// continue.
func TestDecideOnSideEffectAsk(t *testing.T) {
	ask := Policy{Rand: func() float64 { return 0.5 }, OnSideEffect: state.OnSideEffectAsk}
	transient := verdict{Class: classTransient, Code: state.CodeNetwork}
	shutdown := verdict{Class: classInterrupted, Code: state.CodeAgentShutdown}
	did := &state.Attempt{Number: 1, Facts: state.Facts{SideEffect: true}}
	for _, c := range []struct {
		name        string
		v           verdict
		a           *state.Attempt
		canContinue bool
		decision    state.Decision
		asked       bool
	}{
		{"transient after a side effect, a session: a person", transient, did, true, state.DecisionStopped, true},
		{"agent stopped after a side effect, a session: a person", shutdown, did, true, state.DecisionStopped, true},
		{"transient after a side effect, no session: a person, as ever", transient, did, false, state.DecisionStopped, false},
		{"transient, nothing done: replay, as ever", transient, &state.Attempt{Number: 1}, true, state.DecisionRetried, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := ask.decide(c.v, c.a, false, c.canContinue)
			if d.Decision != c.decision || d.Asked != c.asked {
				t.Errorf("decision %s asked %v, want %s %v", d.Decision, d.Asked, c.decision, c.asked)
			}
			if c.asked && (d.Gate != state.GateSideEffect || !d.TechnicallyRetryable) {
				t.Errorf("gate %s, retryable %v: want the gate naming the side effect", d.Gate, d.TechnicallyRetryable)
			}
		})
	}
	if d := (Policy{}).decide(transient, did, false, true); d.Decision != state.DecisionContinued || d.Asked {
		t.Errorf("the default (continue): %+v", d)
	}
}

func TestTimeoutsPerAttemptNumber(t *testing.T) {
	fe, at := Timeouts{}.For(1)
	if fe != 60*time.Second || at != 30*time.Minute {
		t.Errorf("defaults for attempt 1: %v %v", fe, at)
	}
	if fe, _ := (Timeouts{}).For(2); fe != 120*time.Second {
		t.Errorf("first-event default for the retry: %v", fe)
	}
	custom := Timeouts{Attempt: []time.Duration{time.Minute, 2 * time.Minute}, FirstEvent: []time.Duration{time.Second}}
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 7: 2 * time.Minute} {
		if fe, at := custom.For(n); at != want || fe != time.Second {
			t.Errorf("attempt %d: %v %v", n, fe, at)
		}
	}
}
