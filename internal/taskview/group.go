package taskview

import (
	"slices"

	"github.com/edgeagent/agent/state"
)

// Group is how a phase reads to a person, and the colour it is shown in:
// the console's card outcome (data-outcome) and the terminal's colour are
// both chosen by it.
type Group string

// The groups.
const (
	// Queued: submitted, no agent has it yet.
	Queued Group = "queued"
	// Running: an agent works on it (claimed to completing).
	Running Group = "running"
	// Waiting: it stands still until a person acts: a question to answer
	// (awaiting_reply) or a stop to decide on (recoverable_failed). These
	// are the phases that put a task on top of tasks ls and in the
	// console's "needs a person" section (api.NeedsPersonPhases).
	Waiting Group = "waiting"
	// Parked: it waits for a limit to reset, or for a person to raise its
	// budget.
	Parked Group = "parked"
	// Completed: it did its work.
	Completed Group = "completed"
	// Failed: it ended for good without doing its work (failed, timed_out,
	// expired).
	Failed Group = "failed"
	// Cancelled: a person ended it.
	Cancelled Group = "cancelled"
)

// GroupOf is the group phase ph is shown in.
//
// recoverable_failed is Waiting, not Failed: the task stopped where a
// person decides whether it runs again, so it reads as the other phase
// that waits for a person (and is listed with it), not as an end.
func GroupOf(ph state.Phase) Group {
	switch {
	case ph == state.PhaseQueued:
		return Queued
	case ph == state.PhaseAwaitingReply || ph == state.PhaseRecoverableFailed:
		return Waiting
	case ph == state.PhaseParked:
		return Parked
	case ph.Running():
		return Running
	case ph == state.PhaseCompleted:
		return Completed
	case ph == state.PhaseCancelled:
		return Cancelled
	}
	return Failed
}

// Failure reports whether a task that reached phase ph ended without
// doing its work, not by a person's hand: the Failed group, and a stop
// that waits for a person's decision (recoverable_failed, shown Waiting
// because a person decides, but a failure to hear of all the same). The
// notifications tell a person of these as failures.
func Failure(ph state.Phase) bool {
	return GroupOf(ph) == Failed && slices.Contains(state.Phases, ph) || ph == state.PhaseRecoverableFailed
}
