package state

import (
	"fmt"
	"time"
)

// LivenessSilent is a running task's liveness while its attempt reports
// nothing but its processes work (CPU time or I/O growing): a long test
// run, a build. The stall limit counts from the last time they were seen
// at work, so that it is not ended as hung.
const LivenessSilent = "working (silent)"

// Limits are the watchdog's limits. The zero value uses the defaults.
type Limits struct {
	// Queued is how long a task may wait to be claimed. Default 1 h.
	Queued time.Duration
	// Stall is how long a running task may go without progress. Default 10 min.
	Stall time.Duration
}

// Defaults of Limits.
const (
	DefaultQueuedLimit = time.Hour
	DefaultStallLimit  = 10 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.Queued <= 0 {
		l.Queued = DefaultQueuedLimit
	}
	if l.Stall <= 0 {
		l.Stall = DefaultStallLimit
	}
	return l
}

// Ending is how the watchdog ends a task: the terminal phase and why.
type Ending struct {
	Phase  Phase
	Reason string
}

// Watch applies the watchdog rules to t at now, and returns the terminal
// phase t must move to, if any:
//
//   - queued longer than the queued limit: expired;
//   - running with no progress, and its processes not seen at work
//     (LastActivityAt), for the stall limit: recoverable_failed if
//     its turn had not started (nothing was done, a person or a retry can
//     safely run it again), else timed_out. A task awaiting a person's
//     reply is not stalled: it waits for the person, and its agent
//     declines the question when its own approval timeout passes (a
//     silent agent loses its lease as any other); nor is a parked one,
//     which waits for its limit to reset.
//
// A terminal task is left alone: nothing overwrites a terminal phase.
func Watch(t *Task, now time.Time, lim Limits) (Ending, bool) {
	lim = lim.withDefaults()
	switch {
	case t.Phase == PhaseQueued:
		if waited := now.Sub(t.queuedSince()); waited > lim.Queued {
			why := fmt.Sprintf("the control plane's watchdog: queued for %s, limit %s", waited.Round(time.Second), lim.Queued)
			if t.Unroutable != "" {
				why += "; unroutable: " + t.Unroutable
			}
			return Ending{PhaseExpired, why}, true
		}
	case t.Phase.Running():
		last := t.LastProgressAt
		if last.IsZero() {
			last = t.UpdatedAt
		}
		if t.LastActivityAt.After(last) {
			// Its processes were at work, silent: not stalled yet.
			last = t.LastActivityAt
		}
		if c := t.Current(); c != nil && c.Status == AttemptPending && now.Before(c.NotBefore) {
			return Ending{}, false // waiting out a retry's backoff is not a stall
		}
		if t.Phase == PhaseAwaitingReply || t.Phase == PhaseParked {
			// A parked task waits for its limit to reset, and then for
			// a slot of its agent's: no process of it runs to stall.
			return Ending{}, false
		}
		if quiet := now.Sub(last); quiet > lim.Stall {
			reason := fmt.Sprintf("the control plane's watchdog: no progress for %s, limit %s", quiet.Round(time.Second), lim.Stall)
			if t.Phase.TurnStarted() {
				return Ending{PhaseTimedOut, reason}, true
			}
			return Ending{PhaseRecoverableFailed, reason + ", before the turn started"}, true
		}
	}
	return Ending{}, false
}
