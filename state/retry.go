package state

import (
	"errors"
	"fmt"
	"time"
)

// PersonRetry is a person's decision to run a recoverable_failed task
// again (agent tasks retry): the safety gate, or a stop, left the task to
// a person, and the person overrode it.
type PersonRetry struct {
	// At is when the person asked; the queued limit counts from then.
	At time.Time `json:"at"`
	// After is how many attempts the task had then. Reports of those
	// attempts that arrive later are from before the decision, and a
	// control plane refuses them (the task was terminal when they were
	// made).
	After int `json:"after_attempt"`
}

// ErrNotRecoverable: a person may retry only a task that ended
// recoverable_failed.
var ErrNotRecoverable = errors.New("only a recoverable_failed task can be retried")

// RetryByPerson puts a recoverable_failed task back in the queue for a
// new attempt, keeping its attempts: the agent that claims it runs the
// next one (StartPersonRetry). It is the one way out of a terminal phase,
// and only out of recoverable_failed, which exists for a person to decide.
func (t *Task) RetryByPerson(now time.Time) error {
	if t.Phase != PhaseRecoverableFailed {
		return fmt.Errorf("task %s is %s: %w", t.ID, t.Phase, ErrNotRecoverable)
	}
	t.PersonRetry = &PersonRetry{At: now, After: len(t.Attempts)}
	t.Phase, t.PhaseReason, t.PhaseBefore = PhaseQueued, "retried by a person", ""
	t.Result, t.Lease, t.CancelRequested = nil, nil, false
	t.AwaitingReply, t.Reply = nil, nil
	// The stall limit counts from the claim, not from the last run.
	t.Progress, t.LastProgressAt, t.UpdatedAt = Progress{}, time.Time{}, now
	t.project()
	return nil
}

// PersonRetryDue reports whether a person's retry waits for an agent to
// open its attempt: the task was retried by a person, an agent holds it
// (claimed), and the new attempt has not been opened yet.
func (t *Task) PersonRetryDue() bool {
	c := t.Current()
	return t.PersonRetry != nil && len(t.Attempts) == t.PersonRetry.After && c != nil && c.Status.Final() && t.Phase.Running()
}

// StartPersonRetry opens the attempt a person's retry asked for, running
// from now, numbered after the others, with its model from the fallback
// chain, and moves the task to executor_starting. The timeline goes on
// from the attempts before it.
func (t *Task) StartPersonRetry(attemptID string, models []string, now time.Time) (*Attempt, error) {
	if !t.PersonRetryDue() {
		return nil, fmt.Errorf("task %s: no person's retry waits for an attempt", t.ID)
	}
	if err := checkTransition(t.Phase, PhaseExecutorStarting); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if attemptID == "" || t.Attempt(attemptID) != nil {
		return nil, fmt.Errorf("task %s: attempt id %q is empty or taken", t.ID, attemptID)
	}
	n := len(t.Attempts) + 1
	t.Attempts = append(t.Attempts, Attempt{AttemptID: attemptID, Number: n, Model: modelFor(models, n), Status: AttemptRunning,
		StartedAt: now, RetriedByPerson: true})
	if err := t.Transition(PhaseExecutorStarting, fmt.Sprintf("attempt %d, retried by a person", n), now); err != nil {
		return nil, err // cannot happen: checked above
	}
	t.project()
	return t.Current(), nil
}

// queuedSince is when the task's current wait in the queue began, for
// the queued limit: its creation, or a person's retry.
func (t *Task) queuedSince() time.Time {
	if t.PersonRetry != nil && t.PersonRetry.At.After(t.CreatedAt) {
		return t.PersonRetry.At
	}
	return t.CreatedAt
}
