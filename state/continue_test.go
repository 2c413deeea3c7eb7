package state

import (
	"errors"
	"testing"
)

func continued(code ErrorCode, gate GateReason) Outcome {
	return Outcome{Status: AttemptFailed, Error: &Error{Code: code},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: gate, Decision: DecisionContinued}}
}

// A continue goes on in its session: the next attempt resumes the latest
// attempt that has one, binds the same session, and takes its events; no
// other attempt may take that session; what the session did carries over
// to the attempts that continue it.
func TestAContinueGoesOnInItsSession(t *testing.T) {
	task := claimed(t)
	_, err := task.StartFirstAttempt("a1", nil, t0)
	must(t, err)
	must(t, task.BindSession("a1", "s1"))
	must(t, task.Transition(PhaseTurnStarted, "", t0))
	must(t, task.Observe("a1", Activity{SideEffect: true}, t0))

	// Without a path, the session cannot be continued.
	if _, err := task.ScheduleRetry("a1", continued(CodeNetwork, GateSideEffect), "a2", nil, t0); err == nil {
		t.Fatal("a continue scheduled without a session path")
	}
	must(t, task.BindSessionPath("a1", "/state/s1.jsonl"))
	a2, err := task.ScheduleRetry("a1", continued(CodeNetwork, GateSideEffect), "a2", nil, t0)
	must(t, err)
	if a2.Continues != 1 || task.PhaseReason != "continue 2 in 0s" {
		t.Fatalf("attempt 2 continues %d (%s)", a2.Continues, task.PhaseReason)
	}
	must(t, task.BeginAttempt("a2", t0))
	must(t, task.BindSession("a2", "s1"))
	if a, err := task.ResolveEvent("s1"); err != nil || a.AttemptID != "a2" {
		t.Fatalf("an event of s1 resolves to %+v, %v; want attempt 2", a, err)
	}
	if f := task.SessionFacts(task.Current()); !f.SideEffect {
		t.Error("attempt 2 does not carry its session's side effect")
	}
	if task.Current().Facts.SideEffect {
		t.Error("attempt 2's own facts took attempt 1's")
	}

	// Attempt 3 continues attempt 2 (the latest with the session), and
	// through it attempt 1.
	must(t, task.BindSessionPath("a2", "/state/s1.jsonl"))
	a3, err := task.ScheduleRetry("a2", continued(CodeNetwork, GateSideEffect), "a3", nil, t0)
	must(t, err)
	must(t, task.BeginAttempt("a3", t0))
	must(t, task.BindSession("a3", "s1"))
	if a3.Continues != 2 || !task.SessionFacts(a3).SideEffect {
		t.Errorf("attempt 3 continues %d, facts %+v", a3.Continues, task.SessionFacts(a3))
	}
	must(t, task.Check())

	// A continue resumes the failed attempt's own session, never an
	// earlier one that knows nothing of what it did.
	other := claimed(t)
	_, err = other.StartFirstAttempt("c1", nil, t0)
	must(t, err)
	must(t, other.BindSession("c1", "s1"))
	must(t, other.BindSessionPath("c1", "/state/s1.jsonl"))
	_, err = other.ScheduleRetry("c1", retried(CodeRateLimit, 0), "c2", nil, t0) // nothing done: a replay
	must(t, err)
	must(t, other.BeginAttempt("c2", t0))
	must(t, other.BindSession("c2", "s2")) // a session, but no path said
	must(t, other.Observe("c2", Activity{SideEffect: true}, t0))
	if s := other.OwnSession(other.Current()); s != nil {
		t.Errorf("attempt 2 would continue attempt %d's session", s.Number)
	}
	if _, err := other.ScheduleRetry("c2", continued(CodeNetwork, GateSideEffect), "c3", nil, t0); err == nil {
		t.Error("attempt 2 was continued in attempt 1's session")
	}

	// A replay starts a session of its own: attempt 1's is not its.
	replay := claimed(t)
	_, err = replay.StartFirstAttempt("b1", nil, t0)
	must(t, err)
	must(t, replay.BindSession("b1", "s1"))
	_, err = replay.ScheduleRetry("b1", retried(CodeNetwork, 0), "b2", nil, t0)
	must(t, err)
	if err := replay.BindSession("b2", "s1"); err == nil {
		t.Error("a replay took the session of the attempt before it")
	}
}

// A person continues a task that ended without completing and has a
// session; only the agent that keeps it may take it up; the attempt it
// opens continues that session.
func TestAPersonContinues(t *testing.T) {
	ended := func(p Phase, withPath bool) *Task {
		task := claimed(t)
		_, err := task.StartFirstAttempt("a1", nil, t0)
		must(t, err)
		must(t, task.BindSession("a1", "s1"))
		if withPath {
			must(t, task.BindSessionPath("a1", "/state/s1.jsonl"))
		}
		must(t, task.Transition(p, "why", t0))
		return task
	}
	for _, p := range []Phase{PhaseFailed, PhaseRecoverableFailed, PhaseTimedOut, PhaseCancelled} {
		task := ended(p, true)
		must(t, task.ContinueByPerson("vm-1", t0))
		if task.Phase != PhaseQueued || !task.PersonRetry.Continue || task.MayClaim("vm-2") || !task.MayClaim("vm-1") {
			t.Fatalf("%s: continued to %s, %+v", p, task.Phase, task.PersonRetry)
		}
		must(t, task.Transition(PhaseClaimed, "", t0))
		a, err := task.StartPersonRetry("a2", nil, t0)
		must(t, err)
		if a.Continues != 1 || !a.RetriedByPerson {
			t.Errorf("%s: attempt 2 %+v", p, a)
		}
	}
	for name, task := range map[string]*Task{"completed": ended(PhaseCompleted, true), "no session path": ended(PhaseFailed, false)} {
		if err := task.ContinueByPerson("vm-1", t0); !errors.Is(err, ErrNotContinuable) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := ended(PhaseFailed, true).ContinueByPerson("", t0); !errors.Is(err, ErrNotContinuable) {
		t.Errorf("no agent keeps the session: %v", err)
	}
}
