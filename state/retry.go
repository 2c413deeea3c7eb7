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
	// Continue: the person asked to continue the latest session (agent
	// tasks continue) rather than replay the prompt. Only Agent, the
	// agent that keeps the session, may take the task up.
	Continue bool   `json:"continue,omitempty"`
	Agent    string `json:"agent,omitempty"`
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
	t.requeue(now, "retried by a person")
	t.PersonRetry = &PersonRetry{At: now, After: len(t.Attempts)}
	return nil
}

// ErrNotContinuable: a person may continue only a task that ended
// without completing and whose session can be resumed.
var ErrNotContinuable = errors.New("only a task that ended without completing, with a session to resume, can be continued")

// ContinueByPerson puts a task that ended without completing (failed,
// recoverable_failed, timed_out or cancelled) back in the queue for the
// agent that keeps its latest session: the next attempt resumes that
// session with a follow-up rather than replaying the prompt. agentID is
// that agent, the one whose lease the task last had.
func (t *Task) ContinueByPerson(agentID string, now time.Time) error {
	switch t.Phase {
	case PhaseFailed, PhaseRecoverableFailed, PhaseTimedOut, PhaseCancelled:
	default:
		return fmt.Errorf("task %s is %s: %w", t.ID, t.Phase, ErrNotContinuable)
	}
	if t.SessionAttempt() == nil {
		return fmt.Errorf("task %s: no attempt has a session its executor can resume: %w", t.ID, ErrNotContinuable)
	}
	if agentID == "" {
		return fmt.Errorf("task %s: no agent is known to keep its session: %w", t.ID, ErrNotContinuable)
	}
	t.requeue(now, "continued by a person")
	t.PersonRetry = &PersonRetry{At: now, After: len(t.Attempts), Continue: true, Agent: agentID}
	return nil
}

// requeue puts a terminal task back in the queue for a person.
func (t *Task) requeue(now time.Time, reason string) {
	t.Phase, t.PhaseReason, t.PhaseBefore = PhaseQueued, reason, ""
	t.see(PhaseQueued)
	t.Result, t.Lease, t.CancelRequested, t.CancelReason, t.CancelAt = nil, nil, false, "", time.Time{}
	t.AwaitingReply, t.Reply = nil, nil
	// The stall limit counts from the claim, not from the last run.
	t.Progress, t.LastProgressAt, t.UpdatedAt = Progress{}, time.Time{}, now
	t.project()
}

// MayClaim reports whether agentID may claim the queued task: any agent,
// unless a person continued it, which only the agent that keeps its
// session may take up.
func (t *Task) MayClaim(agentID string) bool {
	r := t.PersonRetry
	return r == nil || !r.Continue || len(t.Attempts) != r.After || r.Agent == agentID
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
	a := Attempt{AttemptID: attemptID, Number: n, Model: modelFor(models, n), Status: AttemptRunning, StartedAt: now, RetriedByPerson: true}
	why := "retried by a person"
	if t.PersonRetry.Continue {
		s := t.SessionAttempt()
		if s == nil {
			return nil, fmt.Errorf("task %s: %w", t.ID, ErrNotContinuable)
		}
		a.Continues, why = s.Number, fmt.Sprintf("continuing attempt %d's session, a person having asked", s.Number)
	}
	t.Attempts = append(t.Attempts, a)
	t.clearProgress()
	if err := t.Transition(PhaseExecutorStarting, fmt.Sprintf("attempt %d, %s", n, why), now); err != nil {
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
