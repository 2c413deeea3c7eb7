package main

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// stepMarks are the progress card's marks.
var stepMarks = map[state.StepStatus]string{state.StepDone: "[x]", state.StepActive: "[>]", state.StepPending: "[ ]", state.StepFailed: "[!]", state.StepSkipped: "[-]"}

func newTasksShowCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task: phase, progress card and attempt timeline (--remote: as the control plane has it)",
		Args:  taskIDArg("show ID"),

		ValidArgsFunction: completeTaskIDs(anyTask),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := src.source()
			if err != nil {
				return err
			}
			t, err := s.Task(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("tasks show %s: %w", visible(args[0]), err)
			}
			now := time.Now()
			if asJSON {
				// The task as every command shows one (viewOf); the card
				// beside it too, where scripts have read it.
				v := viewOf(t)
				return writeJSON(cmd.OutOrStdout(), struct {
					Task         api.TaskView `json:"task"`
					ProgressCard []state.Step `json:"progress_card"`
					Timeline     []string     `json:"timeline"`
				}{v, v.ProgressCard, state.Timeline(t, now)})
			}
			printTask(cmd.OutOrStdout(), newPalette(cmd.OutOrStdout()), newHint(&src.cp), t, now)
			// Subtasks: the task's parent and subtasks.
			subtaskTree(cmd.Context(), cmd.OutOrStdout(), t, s.Task)
			return nil
		},
	}
	src.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"task", "progress_card", "timeline"} as JSON`)
	return cmd
}

// printTask prints a task for a person: what it is, where it stands, its
// progress card and its attempt timeline, and what a person may do about
// it, as commands h makes.
func printTask(w io.Writer, p palette, h hint, t *state.Task, now time.Time) {
	fmt.Fprintf(w, "%s  %s\n", visible(t.ID), visible(t.Title))
	hinted := false // a hint was printed: its placeholders need saying
	phase := p.phase(t.Phase)
	if t.PhaseReason != "" {
		phase += " (" + visible(t.PhaseReason) + ")"
	}
	fmt.Fprintf(w, "phase:    %s\n", phase)
	fmt.Fprintf(w, "created:  %s (%s)\n", t.CreatedAt.Local().Format(time.DateTime), ago(now, t.CreatedAt))
	if t.Progress.Message != "" {
		fmt.Fprintf(w, "progress: %d%% %s\n", t.Progress.Percent, visible(t.Progress.Message))
	}
	if t.Liveness != "" && t.Phase.Running() {
		fmt.Fprintf(w, "liveness: %s, its processes at work %s, no event since %s\n", visible(t.Liveness), ago(now, t.LastActivityAt), ago(now, t.LastProgressAt))
	}
	switch {
	case t.Phase == state.PhaseParked:
		fmt.Fprintf(w, "parked:   %s\n", visible(state.ParkedText(t)))
		if t.Parked != nil && t.Parked.Reason == state.ParkBudget {
			fmt.Fprintf(w, "  raise it and continue, or cancel it: %s, %s\n", h.tasks("budget", t.ID, "--add-tokens N|--add-time D"), h.tasks("cancel", t.ID, ""))
		} else {
			fmt.Fprintf(w, "  continue it now, or cancel it: %s, %s\n", h.tasks("continue", t.ID, ""), h.tasks("cancel", t.ID, ""))
		}
		hinted = true
	case !t.NextRetryAt.IsZero():
		fmt.Fprintf(w, "retry:    at %s\n", t.NextRetryAt.Local().Format(time.TimeOnly))
	}
	if r := t.AwaitingReply; r != nil {
		fmt.Fprintf(w, "awaiting: a person's answer, asked %s\n", ago(now, cmp.Or(r.Asked, t.UpdatedAt)))
		for _, l := range approvalLines(r, now, 0) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if t.Reply != nil {
			fmt.Fprintf(w, "  answered: %s, %s; the agent takes it at its next heartbeat\n", t.Reply.Decision, ago(now, t.Reply.At))
		} else {
			fmt.Fprintf(w, "  answer with one of --accept, --decline: %s\n", h.tasks("reply", t.ID, "--accept|--decline"))
			hinted = true
		}
	}
	if r := t.ApprovalExpired; r != nil {
		fmt.Fprintf(w, "expired:  request %s went unanswered and was declined: %s\n", visible(r.ID), visible(r.What()))
	}
	for i, l := range state.DeniedLines(t) {
		head := "          "
		if i == 0 {
			head = "denied:   " + state.DeniedText(t.Denied) + "\n          "
		}
		fmt.Fprintf(w, "%s%s\n", head, visible(l))
	}
	if t.Repo != "" {
		repo := t.Repo
		if t.Base != "" {
			repo += " at " + t.Base
		}
		fmt.Fprintf(w, "repo:     %s\n", visible(repo))
	}
	if c := state.CheckoutOf(t); c != nil {
		fmt.Fprintf(w, "checkout: %s\n", visible(state.CheckoutText(c)))
	}
	// Routing by capability.
	if len(t.Requires) > 0 {
		fmt.Fprintf(w, "requires: %s\n", visible(state.RequirementsText(t.Requires)))
	}
	if t.Unroutable != "" && t.Phase == state.PhaseQueued {
		fmt.Fprintf(w, "routing:  unroutable: %s\n", visible(t.Unroutable))
	}
	// Subtasks: what the delegation rules let it submit.
	for i, l := range state.DelegationLines(t) {
		head := "          "
		if i == 0 {
			head = "delegate: "
		}
		fmt.Fprintf(w, "%s%s\n", head, visible(l))
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
		fmt.Fprintf(w, "decide:   a person decides; run it again with: %s\n", h.tasks("retry", t.ID, ""))
		hinted = true
	}
	if continuable(t) {
		fmt.Fprintf(w, "continue: resume attempt %d's session with: %s\n", t.SessionAttempt().Number, h.tasks("continue", t.ID, ""))
		hinted = true
	}
	if s := h.placeholders(); hinted && s != "" {
		fmt.Fprintf(w, "          %s\n", s)
	}
	if t.Result != nil && t.Result.Summary != "" {
		fmt.Fprintf(w, "result:   %s\n", visible(t.Result.Summary))
	}
	if t.Result != nil {
		for i, l := range state.ChangesLines(t.Result.Changes) {
			head := "          "
			if i == 0 {
				head = "changes:  "
			}
			fmt.Fprintf(w, "%s%s\n", head, visible(l))
		}
		if s := state.PushText(t.Result.Changes); s != "" {
			fmt.Fprintf(w, "push:     %s\n", visible(s))
			if t.Result.Changes.PushError != "" {
				fmt.Fprintf(w, "          on the agent's machine, try again with: agent tasks push %s\n", visible(t.ID))
			}
		}
		if c := t.Result.Changes; c != nil && c.PullRequest != "" {
			fmt.Fprintf(w, "request:  %s\n", visible(c.PullRequest))
		}
	}
	fmt.Fprintln(w)
	for _, s := range state.ProgressCard(t) {
		fmt.Fprintf(w, "  %s\n", p.step(s))
	}
	if len(t.Attempts) > 0 {
		fmt.Fprintln(w)
		for _, l := range p.timeline(t, now) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// continuable reports whether a person may continue t: it ended without
// completing, and an attempt has a session to resume (the control plane
// decides whether an agent is known to keep it).
func continuable(t *state.Task) bool {
	if c := t.Current(); c != nil && c.Error != nil && c.Error.Code == state.CodeBudgetExceeded {
		return false // budgets: nothing is left to spend
	}
	switch t.Phase {
	case state.PhaseFailed, state.PhaseRecoverableFailed, state.PhaseTimedOut, state.PhaseCancelled:
		return t.SessionAttempt() != nil
	}
	return false
}
