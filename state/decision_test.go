package state

import (
	"encoding/json"
	"testing"
	"time"
)

// A task ended from outside the runner (the watchdog, a phase an agent
// reported) finalizes its open attempt with a code named for the phase.
func TestTerminalPhaseNamesAnOpenAttemptsFailure(t *testing.T) {
	cases := []struct {
		phase  Phase
		status AttemptStatus
		code   ErrorCode
	}{
		{PhaseCompleted, AttemptCompleted, ""},
		{PhaseCancelled, AttemptCancelled, CodeCancelled},
		{PhaseFailed, AttemptFailed, CodeFailed},
		{PhaseRecoverableFailed, AttemptFailed, CodeRecoverableFailed},
		{PhaseTimedOut, AttemptFailed, CodeTimedOut},
	}
	for _, c := range cases {
		t.Run(string(c.phase), func(t *testing.T) {
			task := claimed(t)
			_, err := task.StartFirstAttempt("a1", nil, t0)
			must(t, err)
			must(t, task.Transition(PhaseTurnStarted, "", t0))
			must(t, task.Transition(c.phase, "no progress for 10m", t0.Add(time.Minute)))
			a := task.Attempts[0]
			var code ErrorCode
			if a.Error != nil {
				code = a.Error.Code
			}
			if a.Status != c.status || code != c.code {
				t.Errorf("attempt %s %+v, want %s %q", a.Status, a.Error, c.status, c.code)
			}
			if c.code != "" && string(c.code) != string(c.phase) {
				t.Errorf("code %q is not the phase's name %q", c.code, c.phase)
			}
			must(t, task.Check())
		})
	}
}

// The typed decisions are strings on the wire, exactly as before they had
// a type: a task file or a report written by an older agent reads the same.
func TestDecisionsOnTheWire(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"executor code", Error{Code: CodeGatewayTimeout, Message: "upstream"}, `{"code":"gateway_timeout","message":"upstream"}`},
		{"agent code", Error{Code: CodeFirstEventTimeout}, `{"code":"first_event_timeout"}`},
		{"unknown executor code kept", Error{Code: ErrorCode("weird_thing")}, `{"code":"weird_thing"}`},
		{"retried", RetryDecision{TechnicallyRetryable: true, Gate: GateAllowed, Decision: DecisionRetried, Delay: Duration(4 * time.Second)},
			`{"technically_retryable":true,"gate":"allowed","decision":"retried","delay":"4s"}`},
		{"blocked", RetryDecision{TechnicallyRetryable: true, Gate: GateFirstEventUsed, Decision: DecisionStopped},
			`{"technically_retryable":true,"gate":"first_event_retry_used","decision":"stopped"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want {
				t.Errorf("got  %s\nwant %s", b, c.want)
			}
		})
	}
}
