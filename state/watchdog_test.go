package state

import (
	"testing"
	"time"
)

func TestWatchdogRules(t *testing.T) {
	lim := Limits{Queued: time.Hour, Stall: 10 * time.Minute}
	mk := func(phase Phase, created, progress time.Duration) *Task {
		task := NewTask("t", "p", t0.Add(-created))
		task.Phase = phase
		if progress >= 0 {
			task.LastProgressAt = t0.Add(-progress)
		}
		return task
	}
	cases := []struct {
		name string
		task *Task
		want Phase // "" for no verdict
	}{
		{"queued within the limit", mk(PhaseQueued, 59*time.Minute, -1), ""},
		{"queued past the limit", mk(PhaseQueued, 61*time.Minute, -1), PhaseExpired},
		{"claimed, quiet within the limit", mk(PhaseClaimed, 2*time.Hour, 9*time.Minute), ""},
		{"claimed, stalled", mk(PhaseClaimed, 2*time.Hour, 11*time.Minute), PhaseRecoverableFailed},
		{"starting executor, stalled", mk(PhaseExecutorStarting, 2*time.Hour, 11*time.Minute), PhaseRecoverableFailed},
		{"turn started, stalled", mk(PhaseTurnStarted, 2*time.Hour, 11*time.Minute), PhaseTimedOut},
		// A person is what it waits for: its agent declines the question
		// when its own approval timeout passes.
		{"awaiting reply, a day without progress", mk(PhaseAwaitingReply, 25*time.Hour, 24*time.Hour), ""},
		{"completing, stalled", mk(PhaseCompleting, 2*time.Hour, 11*time.Minute), PhaseTimedOut},
		{"completing, fresh", mk(PhaseCompleting, 2*time.Hour, time.Minute), ""},
		{"completed long ago", mk(PhaseCompleted, 9*time.Hour, 9*time.Hour), ""},
		{"failed long ago", mk(PhaseFailed, 9*time.Hour, 9*time.Hour), ""},
		{"cancelled long ago", mk(PhaseCancelled, 9*time.Hour, -1), ""},
	}
	for _, c := range cases {
		v, ok := Watch(c.task, t0, lim)
		if ok != (c.want != "") || v.Phase != c.want {
			t.Errorf("%s: verdict %+v %v, want %q", c.name, v, ok, c.want)
		}
		if ok {
			// The verdict is always a transition the rules allow.
			if err := c.task.Transition(v.Phase, v.Reason, t0); err != nil {
				t.Errorf("%s: verdict cannot be applied: %v", c.name, err)
			}
		}
	}
}

func TestWatchdogWaitsOutARetryBackoff(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	task.StartFirstAttempt("a1", nil, t0)
	_, err := task.ScheduleRetry("a1", retried("rate_limit", 30*time.Minute), "a2", nil, t0)
	must(t, err)
	if v, ok := Watch(task, t0.Add(20*time.Minute), Limits{}); ok {
		t.Errorf("a task waiting for its retry was judged stalled: %+v", v)
	}
	if _, ok := Watch(task, t0.Add(41*time.Minute), Limits{}); !ok {
		t.Error("a retry that never began was not caught")
	}
}

func TestLateCompletionCannotOverwriteTerminal(t *testing.T) {
	task := NewTask("t", "p", t0.Add(-2*time.Hour))
	v, ok := Watch(task, t0, Limits{})
	if !ok {
		t.Fatal("no verdict")
	}
	must(t, task.Transition(v.Phase, v.Reason, t0))
	if err := task.Transition(PhaseCompleted, "", t0); err == nil || task.Phase != PhaseExpired {
		t.Errorf("a late completion overwrote %s: %v", task.Phase, err)
	}
}

// A running task whose processes were seen at work in silence is not
// stalled until the stall limit has passed since then; a parked one never
// is.
func TestSilentWorkAndParkedTasksAreNotStalled(t *testing.T) {
	lim := Limits{Stall: time.Minute}
	task := claimed(t)
	must(t, task.Transition(PhaseExecutorStarting, "", t0))
	must(t, task.Transition(PhaseTurnStarted, "", t0))
	task.LastProgressAt = t0
	task.LastActivityAt, task.Liveness = t0.Add(50*time.Second), LivenessSilent
	if e, ok := Watch(task, t0.Add(90*time.Second), lim); ok {
		t.Errorf("working in silence 40s ago: ended %+v", e)
	}
	if e, ok := Watch(task, t0.Add(111*time.Second), lim); !ok || e.Phase != PhaseTimedOut {
		t.Errorf("no work seen for 61s: %+v %v, want timed_out", e, ok)
	}
	must(t, task.Park(Park{Reason: ParkBudget, Since: t0}, "budget", t0))
	if e, ok := Watch(task, t0.Add(24*time.Hour), lim); ok {
		t.Errorf("parked a day: ended %+v", e)
	}
}
