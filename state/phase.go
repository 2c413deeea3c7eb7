package state

import (
	"errors"
	"fmt"
	"strings"
)

// Phase is where a task stands.
type Phase string

// The phases, in the order a task runs through them, then the terminal ones.
const (
	PhaseQueued           Phase = "queued"
	PhaseClaimed          Phase = "claimed"
	PhaseExecutorStarting Phase = "executor_starting"
	PhaseTurnStarted      Phase = "turn_started"
	PhaseAwaitingReply    Phase = "awaiting_reply"
	PhaseCompleting       Phase = "completing"
	// PhaseParked: the task's attempt stopped at a limit (a usage limit
	// of the model's provider, with the time it resets) and the task
	// waits, held by its agent, to continue its session at
	// Task.ResumesAt. It is running (its agent holds it), but no process
	// of it runs.
	PhaseParked Phase = "parked"

	PhaseCompleted         Phase = "completed"
	PhaseFailed            Phase = "failed"
	PhaseRecoverableFailed Phase = "recoverable_failed"
	PhaseTimedOut          Phase = "timed_out"
	PhaseCancelled         Phase = "cancelled"
	PhaseExpired           Phase = "expired"
)

// Phases lists every phase, running ones first in order.
var Phases = []Phase{
	PhaseQueued, PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseAwaitingReply, PhaseCompleting, PhaseParked,
	PhaseCompleted, PhaseFailed, PhaseRecoverableFailed, PhaseTimedOut, PhaseCancelled, PhaseExpired,
}

// PhaseNames lists every phase's name, comma separated: for an error that
// says what a phase may be.
func PhaseNames() string {
	names := make([]string, len(Phases))
	for i, p := range Phases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// rank orders the non-terminal phases; terminal phases have none.
// Parked ranks last: any running phase may park, and a parked task leaves
// only for executor_starting (it resumes) or a terminal phase.
var rank = map[Phase]int{
	PhaseQueued: 0, PhaseClaimed: 1, PhaseExecutorStarting: 2, PhaseTurnStarted: 3, PhaseAwaitingReply: 4, PhaseCompleting: 5,
	PhaseParked: 6,
}

// Valid reports whether p is a known phase.
func (p Phase) Valid() bool {
	_, ok := rank[p]
	return ok || p.Terminal()
}

// Terminal reports whether p is final.
func (p Phase) Terminal() bool {
	switch p {
	case PhaseCompleted, PhaseFailed, PhaseRecoverableFailed, PhaseTimedOut, PhaseCancelled, PhaseExpired:
		return true
	}
	return false
}

// Running reports whether an agent holds the task: claimed up to completing.
func (p Phase) Running() bool {
	r, ok := rank[p]
	return ok && r >= rank[PhaseClaimed]
}

// TurnStarted reports whether the executor's turn had begun by phase p, so
// that work may have been done.
func (p Phase) TurnStarted() bool {
	r, ok := rank[p]
	return ok && r >= rank[PhaseTurnStarted]
}

// Errors of the model.
var (
	// ErrTerminal: the task is in a terminal phase, which is final.
	ErrTerminal = errors.New("task is terminal")
	// ErrTransition: the phase cannot follow the current one.
	ErrTransition = errors.New("illegal phase transition")
)

// checkTransition reports whether a task in phase from may move to phase
// to. Moving to the phase it is in is allowed and changes nothing.
//
//   - A terminal phase is final.
//   - From queued: claimed, or cancelled, expired, failed.
//   - Claimed may go back to queued (the lease lapsed before the executor
//     started, so nothing was done).
//   - Among running phases: forward; back to executor_starting for a new
//     attempt; awaiting_reply back to turn_started for the next turn.
//     Parked is last: every running phase may park, and a parked task
//     goes on only to executor_starting, as its session resumes.
//   - From a running phase: every terminal phase but expired, which is for
//     tasks never claimed.
func checkTransition(from, to Phase) error {
	switch {
	case !to.Valid():
		return fmt.Errorf("%w: unknown phase %q", ErrTransition, to)
	case from == to:
		return nil
	case from.Terminal():
		return fmt.Errorf("%w: %s cannot become %s", ErrTerminal, from, to)
	case from == PhaseQueued:
		switch to {
		case PhaseClaimed, PhaseCancelled, PhaseExpired, PhaseFailed:
			return nil
		}
	case to == PhaseQueued:
		if from == PhaseClaimed {
			return nil
		}
	case to.Terminal():
		if to != PhaseExpired {
			return nil
		}
	case to == PhaseExecutorStarting,
		from == PhaseAwaitingReply && to == PhaseTurnStarted,
		rank[to] > rank[from]:
		return nil
	}
	return fmt.Errorf("%w: %s cannot become %s", ErrTransition, from, to)
}
