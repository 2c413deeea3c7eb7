package taskview

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/state"
)

// Hint makes the commands a view suggests to a person ("run it again
// with: …") work as printed: the binary as invoked and the control plane
// flags the suggesting command knows.
type Hint interface {
	// Tasks is `agent tasks VERB ID ARGS` with the control plane flags.
	Tasks(verb, id, args string) string
	// Placeholders explains the placeholders of the hint's commands, ""
	// when there are none.
	Placeholders() string
}

// Show prints a task for a person (tasks show): what it is, where it
// stands, its progress card and its attempt timeline, and what a person
// may do about it, as commands h makes.
func Show(w io.Writer, p Palette, h Hint, t *state.Task, now time.Time) {
	fmt.Fprintf(w, "%s  %s\n", Visible(t.ID), Visible(t.Title))
	hinted := false // a hint was printed: its placeholders need saying
	phase := p.Phase(t.Phase)
	if t.PhaseReason != "" {
		phase += " (" + Visible(t.PhaseReason) + ")"
	}
	fmt.Fprintf(w, "phase:    %s\n", phase)
	fmt.Fprintf(w, "created:  %s (%s)\n", t.CreatedAt.Local().Format(time.DateTime), Ago(now, t.CreatedAt))
	if t.Progress.Message != "" {
		fmt.Fprintf(w, "progress: %d%% %s\n", t.Progress.Percent, Visible(t.Progress.Message))
	}
	if t.Liveness != "" && t.Phase.Running() {
		fmt.Fprintf(w, "liveness: %s, its processes at work %s, no event since %s\n", Visible(t.Liveness), Ago(now, t.LastActivityAt), Ago(now, t.LastProgressAt))
	}
	switch {
	case t.Phase == state.PhaseParked:
		fmt.Fprintf(w, "parked:   %s\n", Visible(state.ParkedText(t)))
		if t.Parked != nil && t.Parked.Reason == state.ParkBudget {
			fmt.Fprintf(w, "  raise it and continue, or cancel it: %s, %s\n", h.Tasks("budget", t.ID, "--add-tokens N|--add-time D"), h.Tasks("cancel", t.ID, ""))
		} else {
			fmt.Fprintf(w, "  continue it now, or cancel it: %s, %s\n", h.Tasks("continue", t.ID, ""), h.Tasks("cancel", t.ID, ""))
		}
		hinted = true
	case !t.NextRetryAt.IsZero():
		fmt.Fprintf(w, "retry:    at %s\n", t.NextRetryAt.Local().Format(time.TimeOnly))
	}
	if r := t.AwaitingReply; r != nil {
		fmt.Fprintf(w, "awaiting: a person's answer, asked %s\n", Ago(now, cmp.Or(r.Asked, t.UpdatedAt)))
		for _, l := range ApprovalLines(r, now, 0) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if t.Reply != nil {
			fmt.Fprintf(w, "  answered: %s, %s; the agent takes it at its next heartbeat\n", t.Reply.Decision, Ago(now, t.Reply.At))
		} else {
			fmt.Fprintf(w, "  answer with one of --accept, --decline: %s\n", h.Tasks("reply", t.ID, "--accept|--decline"))
			hinted = true
		}
	}
	if r := t.ApprovalExpired; r != nil {
		fmt.Fprintf(w, "expired:  request %s went unanswered and was declined: %s\n", Visible(r.ID), Visible(r.What()))
	}
	for i, l := range state.DeniedLines(t) {
		head := "          "
		if i == 0 {
			head = "denied:   " + state.DeniedText(t.Denied) + "\n          "
		}
		fmt.Fprintf(w, "%s%s\n", head, Visible(l))
	}
	if t.Repo != "" {
		repo := t.Repo
		if t.Base != "" {
			repo += " at " + t.Base
		}
		fmt.Fprintf(w, "repo:     %s\n", Visible(repo))
	}
	if c := state.CheckoutOf(t); c != nil {
		fmt.Fprintf(w, "checkout: %s\n", Visible(state.CheckoutText(c)))
	}
	// Routing by capability.
	if len(t.Requires) > 0 {
		fmt.Fprintf(w, "requires: %s\n", Visible(state.RequirementsText(t.Requires)))
	}
	if t.Unroutable != "" && t.Phase == state.PhaseQueued {
		fmt.Fprintf(w, "routing:  unroutable: %s\n", Visible(t.Unroutable))
	}
	// Subtasks: what the delegation rules let it submit.
	for i, l := range state.DelegationLines(t) {
		head := "          "
		if i == 0 {
			head = "delegate: "
		}
		fmt.Fprintf(w, "%s%s\n", head, Visible(l))
	}
	// budgets: what the attempts spent, beside what they may
	if u := t.Usage(now); u.TotalTokens > 0 || t.HasBudget() {
		usage := state.UsageText(u)
		if t.HasBudget() {
			usage += "; budget " + t.BudgetText()
		}
		fmt.Fprintf(w, "usage:    %s\n", usage)
	}
	if t.Phase == state.PhaseRecoverableFailed {
		fmt.Fprintf(w, "decide:   a person decides; run it again with: %s\n", h.Tasks("retry", t.ID, ""))
		hinted = true
	}
	if Continuable(t) {
		fmt.Fprintf(w, "continue: resume attempt %d's session with: %s\n", t.SessionAttempt().Number, h.Tasks("continue", t.ID, ""))
		hinted = true
	}
	if s := h.Placeholders(); hinted && s != "" {
		fmt.Fprintf(w, "          %s\n", s)
	}
	if t.Result != nil && t.Result.Summary != "" {
		fmt.Fprintf(w, "result:   %s\n", Visible(t.Result.Summary))
	}
	if t.Result != nil {
		for i, l := range state.ChangesLines(t.Result.Changes) {
			head := "          "
			if i == 0 {
				head = "changes:  "
			}
			fmt.Fprintf(w, "%s%s\n", head, Visible(l))
		}
		if s := state.PushText(t.Result.Changes); s != "" {
			fmt.Fprintf(w, "push:     %s\n", Visible(s))
			if t.Result.Changes.PushError != "" {
				fmt.Fprintf(w, "          on the agent's machine, try again with: agent tasks push %s\n", Visible(t.ID))
			}
		}
		if c := t.Result.Changes; c != nil && c.PullRequest != "" {
			fmt.Fprintf(w, "request:  %s\n", Visible(c.PullRequest))
		}
	}
	fmt.Fprintln(w)
	for _, s := range state.ProgressCard(t) {
		fmt.Fprintf(w, "  %s\n", p.Step(s))
	}
	if len(t.Attempts) > 0 {
		fmt.Fprintln(w)
		for _, l := range p.Timeline(t, now) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// Continuable reports whether a person may continue t: it ended without
// completing, and an attempt has a session to resume (the control plane
// decides whether an agent is known to keep it).
func Continuable(t *state.Task) bool {
	if c := t.Current(); c != nil && c.Error != nil && c.Error.Code == state.CodeBudgetExceeded {
		return false // budgets: nothing is left to spend
	}
	switch t.Phase {
	case state.PhaseFailed, state.PhaseRecoverableFailed, state.PhaseTimedOut, state.PhaseCancelled:
		return t.SessionAttempt() != nil
	}
	return false
}
