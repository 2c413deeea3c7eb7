package state

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func claimed(t *testing.T) *Task {
	t.Helper()
	task := NewTask("t-1", "fix it", t0)
	if err := task.Transition(PhaseClaimed, "", t0); err != nil {
		t.Fatal(err)
	}
	return task
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func retried(code ErrorCode, delay time.Duration) Outcome {
	return Outcome{Status: AttemptFailed, Error: &Error{Code: code},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: GateAllowed, Decision: DecisionRetried, Delay: Duration(delay)}}
}

func TestAttemptLifecycleWithFallbackChain(t *testing.T) {
	task := claimed(t)
	models := []string{"gpt-5-mini", "gpt-5"}
	a1, err := task.StartFirstAttempt("a1", models, t0)
	must(t, err)
	if a1.Number != 1 || a1.Model != "gpt-5-mini" || task.Phase != PhaseExecutorStarting || task.CurrentAttemptID != "a1" {
		t.Fatalf("first attempt %+v, task %s", a1, task.Phase)
	}
	must(t, task.BindSession("a1", "sess-1"))
	must(t, task.Observe("a1", Activity{Progress: &Progress{Message: "reading", Percent: 10}}, t0.Add(time.Second)))
	a2, err := task.ScheduleRetry("a1", retried("rate_limit", 4*time.Second), "a2", models, t0.Add(2*time.Second))
	must(t, err)
	if a2.Number != 2 || a2.Model != "gpt-5" || a2.Status != AttemptPending {
		t.Fatalf("second attempt %+v", a2)
	}
	if task.LastErrorCode != "rate_limit" || !task.NextRetryAt.Equal(t0.Add(6*time.Second)) || task.CurrentAttemptID != "a2" {
		t.Fatalf("projection: %+v", task)
	}
	must(t, task.BeginAttempt("a2", t0.Add(6*time.Second)))
	if !task.NextRetryAt.IsZero() {
		t.Errorf("next_retry_at kept after the retry began")
	}
	a3, err := task.ScheduleRetry("a2", retried("overloaded", time.Second), "a3", models, t0.Add(7*time.Second))
	must(t, err)
	if a3.Model != "gpt-5" {
		t.Errorf("attempt 3 model %q: the last model repeats", a3.Model)
	}
	must(t, task.BeginAttempt("a3", t0.Add(8*time.Second)))
	must(t, task.Transition(PhaseTurnStarted, "", t0.Add(9*time.Second)))
	must(t, task.Transition(PhaseCompleted, "", t0.Add(10*time.Second)))
	if c := task.Current(); c.Status != AttemptCompleted || !c.CompletedAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("completing the task did not finalize its attempt: %+v", c)
	}
	must(t, task.Check())
}

func TestSessionBindsToExactlyTheNamedAttempt(t *testing.T) {
	task := claimed(t)
	_, err := task.StartFirstAttempt("a1", nil, t0)
	must(t, err)
	must(t, task.BindSession("a1", "s1"))
	must(t, task.BindSession("a1", "s1")) // again: no change
	if err := task.BindSession("a1", "s2"); err == nil {
		t.Error("rebinding to another session accepted")
	}
	if err := task.BindSession("nope", "s3"); err == nil {
		t.Error("binding an unknown attempt accepted")
	}
	_, err = task.ScheduleRetry("a1", retried("network", 0), "a2", nil, t0)
	must(t, err)
	if err := task.BindSession("a1", "s9"); !errors.Is(err, ErrNotCurrent) {
		t.Errorf("binding a finalized, non-current attempt: %v", err)
	}
	if err := task.BindSession("a2", "s1"); err == nil {
		t.Error("a session of attempt 1 bound to attempt 2")
	}
	must(t, task.BindSession("a2", "s2"))
}

func TestStaleEventsAreReportedNotApplied(t *testing.T) {
	task := claimed(t)
	task.StartFirstAttempt("a1", nil, t0)
	must(t, task.BindSession("a1", "s1"))
	_, err := task.ScheduleRetry("a1", retried("timeout", 0), "a2", nil, t0)
	must(t, err)
	must(t, task.BeginAttempt("a2", t0))
	must(t, task.BindSession("a2", "s2"))

	a, err := task.ResolveEvent("s1")
	if !errors.Is(err, ErrStaleEvent) || a == nil || a.Number != 1 {
		t.Fatalf("event of attempt 1: %v %+v", err, a)
	}
	if err := task.Observe(a.AttemptID, Activity{SideEffect: true}, t0); err == nil {
		t.Error("stale attempt observed")
	}
	if task.Attempts[0].Facts.SideEffect {
		t.Error("stale event changed a finalized attempt")
	}
	if _, err := task.ResolveEvent("s-unknown"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("unknown session: %v", err)
	}
	a, err = task.ResolveEvent("s2")
	if err != nil || a.AttemptID != "a2" {
		t.Fatalf("current session: %v", err)
	}
	must(t, task.FinalizeAttempt("a2", Outcome{Status: AttemptFailed, Error: &Error{Code: "auth"}}, t0))
	if _, err := task.ResolveEvent("s2"); !errors.Is(err, ErrStaleEvent) {
		t.Errorf("event after finalization: %v", err)
	}
}

func TestFinalizedAttemptsNeverChange(t *testing.T) {
	task := claimed(t)
	task.StartFirstAttempt("a1", nil, t0)
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptFailed, Error: &Error{Code: "quota"}}, t0))
	for name, err := range map[string]error{
		"finalize again": task.FinalizeAttempt("a1", Outcome{Status: AttemptCompleted}, t0),
		"observe":        task.Observe("a1", Activity{Output: true}, t0),
		"bind":           task.BindSession("a1", "s"),
		"begin":          task.BeginAttempt("a1", t0),
	} {
		if !errors.Is(err, ErrFinalized) {
			t.Errorf("%s on a finalized attempt: %v", name, err)
		}
	}
	if a := task.Attempts[0]; a.Status != AttemptFailed || a.Error.Code != "quota" || a.SessionID != "" {
		t.Errorf("finalized attempt changed: %+v", a)
	}
	if err := task.FinalizeAttempt("a1", Outcome{Status: AttemptRunning}, t0); err == nil {
		t.Error("finalizing with a non-final status accepted")
	}
}

func TestTerminalTaskRefusesLateChanges(t *testing.T) {
	task := claimed(t)
	task.StartFirstAttempt("a1", nil, t0)
	must(t, task.Transition(PhaseCancelled, "user cancelled", t0))
	if c := task.Current(); c.Status != AttemptCancelled {
		t.Errorf("cancel left the attempt %s", c.Status)
	}
	if err := task.Transition(PhaseCompleted, "late completion", t0); !errors.Is(err, ErrTerminal) {
		t.Errorf("late completion: %v", err)
	}
	if task.Phase != PhaseCancelled || task.PhaseBefore != PhaseExecutorStarting {
		t.Errorf("phase %s (before %s)", task.Phase, task.PhaseBefore)
	}
	if _, err := task.ScheduleRetry("a1", retried("network", 0), "a2", nil, t0); err == nil {
		t.Error("retry of a terminal task accepted")
	}
}

func TestModelFor(t *testing.T) {
	chain := []string{"a", "b", "c"}
	for n, want := range map[int]string{1: "a", 2: "b", 3: "c", 4: "c", 9: "c"} {
		if got := modelFor(chain, n); got != want {
			t.Errorf("attempt %d: %q, want %q", n, got, want)
		}
	}
	if modelFor(nil, 1) != "" {
		t.Error("empty chain")
	}
}

func TestPutAttemptKeepsTheInvariantsOnTheReceivingSide(t *testing.T) {
	task := claimed(t)
	must(t, task.Transition(PhaseExecutorStarting, "", t0))
	a1 := Attempt{AttemptID: "a1", Number: 1, Status: AttemptRunning, StartedAt: t0}
	must(t, task.PutAttempt(a1))
	a1.SessionID = "s1"
	must(t, task.PutAttempt(a1)) // an open attempt takes updates
	if err := task.PutAttempt(Attempt{AttemptID: "a3", Number: 3, Status: AttemptPending}); err == nil {
		t.Error("attempt 3 accepted after 1")
	}
	if err := task.PutAttempt(Attempt{AttemptID: "a2", Number: 2, Status: AttemptPending}); err == nil {
		t.Error("attempt 2 accepted while attempt 1 runs")
	}
	a1.Status, a1.Error = AttemptFailed, &Error{Code: "network"}
	must(t, task.PutAttempt(a1))
	must(t, task.PutAttempt(a1)) // the same final record again: a duplicate, fine
	changed := a1
	changed.Error = &Error{Code: "quota"}
	if err := task.PutAttempt(changed); !errors.Is(err, ErrFinalized) {
		t.Errorf("finalized attempt rewritten: %v", err)
	}
	must(t, task.PutAttempt(Attempt{AttemptID: "a2", Number: 2, Status: AttemptPending, NotBefore: t0.Add(time.Second)}))
	if task.CurrentAttemptID != "a2" || task.LastErrorCode != "network" || task.NextRetryAt.IsZero() {
		t.Errorf("projection %+v", task)
	}
	must(t, task.Check())
	if err := task.PutAttempt(Attempt{AttemptID: "", Number: 3, Status: "weird"}); err == nil {
		t.Error("a bad record accepted")
	}
}

func TestCloneSharesNothingThatChanges(t *testing.T) {
	task := claimed(t)
	task.StartFirstAttempt("a1", nil, t0)
	code := 3
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptFailed, Error: &Error{Code: "x"}, ExitCode: &code, Retry: &RetryDecision{Gate: "g"}}, t0))
	task.Lease = &Lease{ID: "l1"}
	task.Result = &Result{Summary: "s"}
	task.Output = []AttemptOutput{{Attempt: 1, StoredBytes: 10}}
	c := task.Clone()
	c.Attempts[0].Error.Code, *c.Attempts[0].ExitCode, c.Attempts[0].Retry.Gate = "changed", 9, "changed"
	c.Attempts[0].Status = AttemptCompleted
	c.Lease.ID, c.Result.Summary = "changed", "changed"
	c.Output[0].StoredBytes = 99
	a := task.Attempts[0]
	if a.Error.Code != "x" || *a.ExitCode != 3 || a.Retry.Gate != "g" || a.Status != AttemptFailed || task.Lease.ID != "l1" || task.Result.Summary != "s" || task.Output[0].StoredBytes != 10 {
		t.Errorf("the clone shares memory with the task: %+v %+v %+v %+v", a, task.Lease, task.Result, task.Output)
	}
}

// TestANoticeBelongsToItsAttempt: the progress attempt 1 reported (a CLI's
// "retries 1/1 … 429" notice) is gone once attempt 2 opens, on the
// agent's side (ScheduleRetry) and on the control plane's (PutAttempt),
// while what attempt 2 reports stays.
func TestANoticeBelongsToItsAttempt(t *testing.T) {
	notice := &Progress{Message: "Claude retries 1/1 in 2s: 429", Step: "retry"}
	agentSide := claimed(t)
	_, err := agentSide.StartFirstAttempt("a1", nil, t0)
	must(t, err)
	must(t, agentSide.Observe("a1", Activity{Progress: notice}, t0))
	if agentSide.Progress != *notice {
		t.Fatalf("progress %+v, want the notice", agentSide.Progress)
	}
	_, err = agentSide.ScheduleRetry("a1", retried(CodeRateLimit, time.Second), "a2", nil, t0.Add(time.Second))
	must(t, err)
	if agentSide.Progress != (Progress{}) {
		t.Fatalf("attempt 2 opened with attempt 1's progress %+v", agentSide.Progress)
	}
	must(t, agentSide.BeginAttempt("a2", t0.Add(2*time.Second)))
	must(t, agentSide.Observe("a2", Activity{Progress: &Progress{Message: "thinking"}}, t0.Add(3*time.Second)))
	if agentSide.Progress.Message != "thinking" {
		t.Fatalf("attempt 2's own progress: %+v", agentSide.Progress)
	}

	// The control plane applies the attempt records as they come.
	cpSide := claimed(t)
	cpSide.Progress = *notice
	must(t, cpSide.PutAttempt(agentSide.Attempts[0]))
	cpSide.Progress = *notice                         // reported during attempt 1
	must(t, cpSide.PutAttempt(agentSide.Attempts[0])) // the same record again changes nothing
	if cpSide.Progress != *notice {
		t.Fatalf("a repeated record of attempt 1 cleared its progress: %+v", cpSide.Progress)
	}
	must(t, cpSide.PutAttempt(agentSide.Attempts[1]))
	if cpSide.Progress != (Progress{}) {
		t.Fatalf("the control plane kept attempt 1's notice after attempt 2's record: %+v", cpSide.Progress)
	}
}
