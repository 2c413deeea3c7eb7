package state

import (
	"fmt"
	"time"
)

// Who cancels a task, as a cancel's reason says it.
const (
	// CancelledByPerson is a person's cancel (agent tasks cancel, the
	// console).
	CancelledByPerson = "cancelled by a person"
)

// RequestCancel records that a cancel of the running task was asked, by
// whom and why (reason; CancelledByPerson when empty), at now. The first
// request stands: asking again changes nothing.
func (t *Task) RequestCancel(reason string, now time.Time) {
	if t.CancelRequested {
		return
	}
	if reason == "" {
		reason = CancelledByPerson
	}
	t.CancelRequested, t.CancelReason, t.CancelAt = true, reason, now
}

// CancelNote says how a cancel asked of the task came out, the same way
// wherever the task is shown (the control plane and the agent keep the
// same fields): "" when none was asked, or when it cancelled the task
// (its attempt and phase say so); while the task runs, that its agent
// is stopping it; when the task ended otherwise, that its agent had
// finished first and the ending stands. A cancel and a completion that
// cross resolve one way: whichever the agent did first.
func CancelNote(t *Task) string {
	switch {
	case !t.CancelRequested || t.Phase == PhaseCancelled:
		return ""
	case t.Phase.Terminal():
		return fmt.Sprintf("cancel asked at %s came after it had ended %s: the ending stands", clock(t.CancelAt), t.Phase)
	}
	return fmt.Sprintf("cancel asked at %s (%s): its agent is stopping it", clock(t.CancelAt), t.CancelReason)
}

// clock is a time of day as the notes show it, in UTC.
func clock(at time.Time) string {
	if at.IsZero() {
		return "an unknown time"
	}
	return at.UTC().Format(time.TimeOnly) + " UTC"
}
