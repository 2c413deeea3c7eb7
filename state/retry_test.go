package state

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// gateStopped is a task whose first attempt had a side effect before a
// transient failure: the gate stopped it for a person.
func gateStopped(t *testing.T) *Task {
	t.Helper()
	task := claimed(t)
	_, err := task.StartFirstAttempt("a1", []string{"small", "big"}, t0)
	must(t, err)
	must(t, task.Transition(PhaseTurnStarted, "", t0))
	must(t, task.Observe("a1", Activity{SideEffect: true}, t0))
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptFailed, Error: &Error{Code: CodeNetwork, Message: "reset"},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: GateSideEffect, Decision: DecisionStopped}}, t0.Add(time.Second)))
	must(t, task.Transition(PhaseRecoverableFailed, "network: reset; not retried automatically: side_effect", t0.Add(time.Second)))
	task.Result = &Result{}
	return task
}

func TestPersonRetryRunsTheNextAttempt(t *testing.T) {
	task := gateStopped(t)
	at := t0.Add(2 * time.Hour)
	must(t, task.RetryByPerson(at))
	if task.Phase != PhaseQueued || task.PhaseReason != "retried by a person" || task.Result != nil || task.Recoverable ||
		task.PersonRetry == nil || task.PersonRetry.After != 1 || !task.LastProgressAt.IsZero() {
		t.Fatalf("after a person's retry: %+v", task)
	}
	if err := task.Check(); err != nil {
		t.Fatal(err)
	}
	// Queued two hours after it was created, it does not expire: the
	// queued limit counts from the retry.
	if v, ok := Watch(task, at.Add(time.Minute), Limits{}); ok {
		t.Fatalf("the watchdog ended a task retried a minute ago: %+v", v)
	}
	if _, ok := Watch(task, at.Add(2*time.Hour), Limits{}); !ok {
		t.Fatal("the queued limit no longer applies after a retry")
	}
	if task.PersonRetryDue() {
		t.Fatal("due before it was claimed")
	}
	must(t, task.Transition(PhaseClaimed, "claimed by agent-1", at))
	if !task.PersonRetryDue() {
		t.Fatal("a claimed retry is not due")
	}
	a, err := task.StartPersonRetry("a2", []string{"small", "big"}, at)
	must(t, err)
	if a.Number != 2 || a.Model != "big" || !a.RetriedByPerson || a.Status != AttemptRunning || task.Phase != PhaseExecutorStarting || task.PersonRetryDue() {
		t.Fatalf("attempt %+v, phase %s", a, task.Phase)
	}
	if _, err := task.StartPersonRetry("a3", nil, at); err == nil {
		t.Fatal("a second attempt for one retry")
	}
	must(t, task.FinalizeAttempt("a2", Outcome{Status: AttemptCompleted}, at.Add(time.Second)))
	must(t, task.Transition(PhaseCompleted, "", at.Add(time.Second)))
	lines := Timeline(task, at)
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "-> blocked: side_effect; retried by a person") || !strings.HasPrefix(lines[1], "Attempt 2  completed  big") {
		t.Fatalf("timeline:\n%s", strings.Join(lines, "\n"))
	}
}

func TestPersonRetryOnlyFromRecoverableFailed(t *testing.T) {
	for _, p := range Phases {
		if p == PhaseRecoverableFailed {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			task := NewTask("t-1", "fix it", t0)
			task.Phase = p
			if err := task.RetryByPerson(t0); !errors.Is(err, ErrNotRecoverable) || task.Phase != p || task.PersonRetry != nil {
				t.Fatalf("RetryByPerson from %s: %v, phase %s", p, err, task.Phase)
			}
		})
	}
}
