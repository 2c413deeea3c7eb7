package server

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Retry reminders: when an agent schedules a task's next attempt after a
// backoff (its report of the pending attempt), the people the targets
// reach hear of it (task.retrying), once per attempt; the repeat gate
// folds one task's repeats into one per window (package notify). A task
// a person is cancelling is not reminded of.

// scheduledRetry is the number of the attempt a task's scheduled retry
// waits to start, 0 when none is scheduled.
func scheduledRetry(t *state.Task) int {
	c := t.Current()
	if c == nil || c.Status != state.AttemptPending || c.Number < 2 || t.Phase.Terminal() {
		return 0
	}
	return c.Number
}

// retryingNotes are the records of the retry t scheduled since before,
// if it scheduled one. The failure's message is its agent's words: quoted
// and said to be theirs.
func (rl *rules) retryingNotes(before taskMark, t *state.Task) []store.Notification {
	ev := api.NotifyRetrying
	n := scheduledRetry(t)
	if n == 0 || n == before.retry || t.CancelRequested || !rl.wanted(ev) || t.Phase == state.PhaseParked || before.phase == state.PhaseParked {
		// A park says its own (task.parked, task.resumed).
		return nil
	}
	next, failed := &t.Attempts[n-1], &t.Attempts[n-2]
	nt := &api.NotifiedTask{ID: t.ID, Title: api.Inert(t.Title, maxTitleRunes), Phase: t.Phase, Repo: t.Repo,
		Attempt: n, MaxAttempts: cmp.Or(next.MaxAttempts, t.MaxAttempts)}
	if t.Lease != nil {
		nt.Agent = t.Lease.AgentID
	}
	if failed.Error != nil {
		nt.ErrorCode = failed.Error.Code
		if !nt.ErrorCode.Known() {
			nt.ErrorCode = state.ErrorCode(api.Inert(string(nt.ErrorCode), 64))
		}
	}
	if failed.Retry != nil {
		nt.Gate = state.GateReason(api.Inert(string(failed.Retry.Gate), 64))
	}
	name := "Task " + api.Quoted(cmp.Or(t.Title, t.ID), maxTitleRunes)
	if t.Parent != "" {
		name = "Subtask " + api.Quoted(cmp.Or(t.Title, t.ID), maxTitleRunes) + " of task " + t.Parent
	}
	what := "replays"
	if next.Continues > 0 {
		what = fmt.Sprintf("continues attempt %d's session", next.Continues)
	}
	of := strconv.Itoa(n)
	if nt.MaxAttempts > 0 {
		of += "/" + strconv.Itoa(nt.MaxAttempts)
	}
	text := fmt.Sprintf("%s is retrying: attempt %s %s", name, of, what)
	if failed.Retry != nil {
		text += " in " + state.Compact(failed.Retry.Delay.D()) // as the timeline says it
	}
	if nt.ErrorCode != "" {
		text += ", after " + string(nt.ErrorCode)
	}
	var said *api.NotifySaid
	if nt.Agent != "" {
		by := "agent " + api.Name(nt.Agent)
		text += " (" + by + ")"
		if failed.Error != nil && failed.Error.Message != "" {
			if said = api.Said(by, failed.Error.Message); said != nil {
				text += "; " + by + " says: " + api.Quoted(failed.Error.Message, api.MaxSaidRunes)
			}
		}
	}
	note := api.Notification{ID: noteID(t.ID, string(ev), strconv.Itoa(n)), Event: ev, At: t.UpdatedAt,
		Text: text, Link: rl.link("/tasks/" + t.ID), Task: nt, Said: said}
	return rl.records(note)
}
