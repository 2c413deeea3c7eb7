package state

import (
	"testing"
	"time"
)

// A task that ended says what it came to: a completed one its summary's
// first line, else what it changed, else that it completed; any other
// its phase and why (its reason, else its last attempt's error). A task
// still running says nothing: its progress stands.
func TestResultLine(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ended := func(p Phase, reason string, res *Result, err *Error) *Task {
		task := NewTask("t-1", "p", now)
		task.Progress = Progress{Message: "writing a reply", Percent: 0}
		task.Phase, task.PhaseReason, task.Result = p, reason, res
		if err != nil {
			task.Attempts = []Attempt{{AttemptID: "a1", Number: 1, Status: AttemptFailed, Error: err}}
			task.CurrentAttemptID = "a1"
		}
		return task
	}
	for _, c := range []struct {
		name string
		task *Task
		want string
	}{
		{"running", ended(PhaseTurnStarted, "", nil, nil), ""},
		{"a summary", ended(PhaseCompleted, "", &Result{Summary: "\n  Fixed the footer  \nand its test"}, nil), "Fixed the footer"},
		{"changes, no summary", ended(PhaseCompleted, "", &Result{Changes: &Changes{Files: 1, Insertions: 3, Deletions: 1}}, nil), "+3 -1 in 1 file"},
		{"nothing said", ended(PhaseCompleted, "", nil, nil), "completed"},
		{"a reason", ended(PhaseRecoverableFailed, "network after a side effect\nmore", nil, nil), "recoverable_failed: network after a side effect"},
		{"an error", ended(PhaseFailed, "", nil, &Error{Code: CodeQuota, Message: "out of credits"}), "failed: quota: out of credits"},
		{"neither", ended(PhaseCancelled, "", nil, nil), "cancelled"},
		{"a reason that names the phase", ended(PhaseCancelled, "cancelled: cancelled by the user", nil, nil), "cancelled: cancelled by the user"},
	} {
		if got := ResultLine(c.task); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A checkout whose status could not be read says so, and what the task
// starts from; a detached one names HEAD.
func TestCheckoutText(t *testing.T) {
	c := &Checkout{Repo: "app", Base: "", BaseCommit: "3f2a1c9d0e", Unread: "git status: context deadline exceeded"}
	want := "the agent could not tell whether the checkout of app has uncommitted changes (git status: context deadline exceeded); this task starts from HEAD at 3f2a1c9 and sees none of them"
	if got := CheckoutText(c); got != want {
		t.Errorf("unread: %q, want %q", got, want)
	}
	if got := CheckoutText(nil); got != "" {
		t.Errorf("nil: %q", got)
	}
}
