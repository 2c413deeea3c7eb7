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

func TestDecide(t *testing.T) {
	p := Policy{Rand: func() float64 { return 0.5 }}
	transient := verdict{Class: classTransient, Code: "overloaded"}
	a := &state.Attempt{Number: 1}
	if d := p.decide(transient, a, false); d.Decision != state.DecisionRetried || d.Delay.D() != 2*time.Second || !d.TechnicallyRetryable {
		t.Errorf("first transient failure: %+v", d)
	}
	if d := p.decide(verdict{Class: classPermanent, Code: "auth"}, a, false); d.Decision != state.DecisionStopped || d.TechnicallyRetryable {
		t.Errorf("permanent: %+v", d)
	}
	if d := p.decide(transient, &state.Attempt{Number: 3}, false); d.Gate != state.GateMaxAttempts || d.Decision != state.DecisionStopped {
		t.Errorf("last attempt: %+v", d)
	}
	if d := p.decide(transient, &state.Attempt{Number: 1, Facts: state.Facts{SideEffect: true}}, false); d.Gate != state.GateSideEffect {
		t.Errorf("side effect: %+v", d)
	}
	fe := verdict{Class: classTransient, Code: "first_event_timeout"}
	if d := p.decide(fe, &state.Attempt{Number: 1}, false); d.Decision != state.DecisionRetried {
		t.Errorf("first first-event timeout: %+v", d)
	}
	if d := p.decide(fe, &state.Attempt{Number: 2}, true); d.Gate != state.GateFirstEventUsed {
		t.Errorf("second first-event timeout: %+v", d)
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
