package state

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestInvariantsHoldUnderRandomOperations drives a task through random
// sequences of every helper, legal or not, and checks after each step:
// exactly one current attempt (the last), all earlier ones finalized;
// finalized attempts never change; terminal is final; the projection
// matches the current attempt; stale events change nothing; a refused
// operation changes nothing.
func TestInvariantsHoldUnderRandomOperations(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := t0
		task := NewTask("t", "p", now)
		if rapid.IntRange(0, 9).Draw(rt, "start claimed") > 0 {
			must(t, task.Transition(PhaseClaimed, "", now))
		}
		models := []string{"m1", "m2", "m3"}
		nextID := 0
		newID := func() string { nextID++; return fmt.Sprintf("a%d", nextID) }
		// Mostly the current attempt, sometimes an older or unknown one.
		anyAttemptID := func() string {
			switch k := rapid.IntRange(0, 9).Draw(rt, "which attempt"); {
			case len(task.Attempts) == 0 || k == 0:
				return "a-missing"
			case k < 7:
				return task.Current().AttemptID
			}
			return task.Attempts[rapid.IntRange(0, len(task.Attempts)-1).Draw(rt, "attempt")].AttemptID
		}
		// Sessions are named after attempt numbers, so that events of
		// earlier attempts (stale ones) come up often.
		anySession := func() string { return fmt.Sprintf("s%d", rapid.IntRange(0, len(task.Attempts)+1).Draw(rt, "session")) }
		// Terminal phases one time in four, so runs live long enough to retry.
		anyPhase := func() Phase {
			if rapid.IntRange(0, 3).Draw(rt, "terminal") == 0 {
				return rapid.SampledFrom(Phases[6:]).Draw(rt, "terminal phase")
			}
			return rapid.SampledFrom(Phases[:6]).Draw(rt, "phase")
		}
		failed := func() Outcome {
			code := rapid.SampledFrom([]ErrorCode{CodeRateLimit, CodeNetwork, CodeQuota}).Draw(rt, "code")
			return Outcome{Status: AttemptFailed, Error: &Error{Code: code}}
		}

		ops := map[string]func() error{
			"transition": func() error {
				return task.Transition(anyPhase(), "r", now)
			},
			"start first": func() error { _, err := task.StartFirstAttempt(newID(), models, now); return err },
			"bind": func() error {
				if c := task.Current(); c != nil && rapid.Bool().Draw(rt, "own session") {
					return task.BindSession(c.AttemptID, fmt.Sprintf("s%d", c.Number))
				}
				return task.BindSession(anyAttemptID(), anySession())
			},
			"observe": func() error {
				return task.Observe(anyAttemptID(), Activity{Output: rapid.Bool().Draw(rt, "out"), SideEffect: rapid.Bool().Draw(rt, "se")}, now)
			},
			"event": func() error {
				a, err := task.ResolveEvent(anySession())
				if err != nil {
					return err
				}
				return task.Observe(a.AttemptID, Activity{ToolCall: true}, now)
			},
			"finalize": func() error {
				out := failed()
				if rapid.Bool().Draw(rt, "ok") {
					out = Outcome{Status: AttemptCompleted}
				}
				return task.FinalizeAttempt(anyAttemptID(), out, now)
			},
			"retry": func() error {
				out := failed()
				out.Retry = &RetryDecision{TechnicallyRetryable: true, Gate: GateAllowed, Decision: DecisionRetried, Delay: Duration(time.Second)}
				_, err := task.ScheduleRetry(anyAttemptID(), out, newID(), models, now)
				return err
			},
			"begin": func() error { return task.BeginAttempt(anyAttemptID(), now) },
		}
		names := []string{"transition", "start first", "bind", "bind", "observe", "event", "event", "event",
			"finalize", "retry", "retry", "retry", "begin", "begin"}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 5000).Draw(rt, "ms")) * time.Millisecond)
			before := task.Clone()
			name := rapid.SampledFrom(names).Draw(rt, "op")
			err := ops[name]()

			if err := task.Check(); err != nil {
				rt.Fatalf("after %s: invariant broken: %v", name, err)
			}
			if err != nil && !reflect.DeepEqual(before, task) {
				rt.Fatalf("%s failed (%v) but changed the task", name, err)
			}
			if errors.Is(err, ErrStaleEvent) && !reflect.DeepEqual(before, task) {
				rt.Fatalf("a stale event changed the task")
			}
			for i, a := range before.Attempts {
				if a.Status.Final() && !reflect.DeepEqual(a, task.Attempts[i]) {
					rt.Fatalf("after %s: finalized attempt %d changed:\n%+v\n%+v", name, a.Number, a, task.Attempts[i])
				}
			}
			if before.Phase.Terminal() && task.Phase != before.Phase {
				rt.Fatalf("after %s: terminal %s became %s", name, before.Phase, task.Phase)
			}
			if len(task.Attempts) < len(before.Attempts) {
				rt.Fatalf("after %s: attempts disappeared", name)
			}
			for i, a := range task.Attempts {
				if a.Model != modelFor(models, i+1) {
					rt.Fatalf("attempt %d has model %q, the chain says %q", a.Number, a.Model, modelFor(models, i+1))
				}
			}
		}
	})
}
