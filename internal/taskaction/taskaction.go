// Package taskaction is what a person does to one task through the control
// plane, which owns the assignment of tasks (an agent runs only what it
// holds a lease on): cancel it, retry it, continue its session, raise its
// budget, answer its approval request; each asks the control plane and
// says in a line what came of it. Text from the control plane or a task
// goes through taskview.Visible before it is printed.
package taskaction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Action asks the control plane to do something to one task.
type Action struct {
	// Call asks it.
	Call func(c *controlplane.Client, ctx context.Context, id string) (api.TaskView, error)
	// Done says what it did to a task that has not ended, after the
	// task's id.
	Done func(api.TaskView) string
}

// Line is what a person reads of v, the task as the control plane
// answered the action: its id and what the action did, or the phase it
// ended in.
func (a Action) Line(v api.TaskView) string {
	if v.Phase.Terminal() {
		return fmt.Sprintf("%s: %s", taskview.Visible(v.ID), taskview.Visible(string(v.Phase)))
	}
	return fmt.Sprintf("%s: %s", taskview.Visible(v.ID), taskview.Visible(a.Done(v)))
}

// Cancel ends a task: a queued one at once, a running one as soon as its
// agent hears of it.
var Cancel = Action{
	Call: (*controlplane.Client).CancelTask,
	Done: func(v api.TaskView) string {
		return fmt.Sprintf("cancel requested (attempt %d); its agent stops it now", len(v.Attempts))
	},
}

// Retry starts a new attempt of a recoverable_failed task, replaying its
// prompt on any agent.
var Retry = Action{
	Call: (*controlplane.Client).RetryTask,
	Done: func(v api.TaskView) string {
		return fmt.Sprintf("queued again for attempt %d; the next agent to claim it runs it", len(v.Attempts)+1)
	},
}

// Continue resumes a task's session on the agent that keeps it.
var Continue = Action{Call: (*controlplane.Client).ContinueTask, Done: continued}

// continued says what a continue queued: the next attempt, whose session
// it resumes and where.
func continued(v api.TaskView) string {
	if v.Phase == state.PhaseParked {
		return "parked: its agent resumes it at its next heartbeat"
	}
	line := fmt.Sprintf("queued again for attempt %d", len(v.Attempts)+1)
	if s := v.Task().SessionAttempt(); s != nil {
		line += fmt.Sprintf(", continuing attempt %d's session", s.Number)
	}
	if r := v.PersonRetry; r != nil && r.Agent != "" {
		line += " on agent " + r.Agent
	}
	return line
}

// Budget raises the token budget of a task parked at it by addTokens and
// its time budget by addTime; a raise below zero, or of nothing, is
// refused before the control plane is asked.
func Budget(addTokens int64, addTime time.Duration) (Action, error) {
	switch {
	case addTokens < 0 || addTime < 0:
		return Action{}, errors.New("--add-tokens and --add-time cannot be below zero")
	case addTokens == 0 && addTime == 0:
		return Action{}, errors.New("say how much to add: --add-tokens N, --add-time D or both")
	}
	req := api.BudgetRequest{AddTokens: addTokens, AddTime: state.Duration(addTime)}
	return Action{
		Call: func(c *controlplane.Client, ctx context.Context, id string) (api.TaskView, error) {
			return c.BudgetTask(ctx, id, req)
		},
		Done: func(v api.TaskView) string {
			return "budget raised to " + state.BudgetText(v.MaxTokens, v.MaxTime.D()) + "; its agent continues it at its next heartbeat"
		},
	}, nil
}

// Replied prints what answering v's approval request d did: the request
// answered, and what the answer lets through or stops (the command and
// its directory, or the files and the first lines of their diff).
func Replied(w io.Writer, v api.TaskView, d api.Decision, now time.Time) {
	done := "accepted"
	if d == api.DecisionDecline {
		done = "declined"
	}
	fmt.Fprintf(w, "%s: %s request %s; the agent takes the answer at its next heartbeat\n", v.ID, done, taskview.Visible(v.Reply.RequestID))
	if r := v.AwaitingReply; r != nil && r.ID == v.Reply.RequestID {
		for _, l := range taskview.ApprovalLines(r, now, taskview.InboxDiffLines) {
			if !strings.HasPrefix(l, "declined:") {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
}
