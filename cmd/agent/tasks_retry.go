package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Cancel, retry and continue change a task where it is assigned: the
// control plane owns assignment (an agent runs only what it holds a lease
// on), so these always go through it. --remote is accepted, for symmetry with ls and
// show, and changes nothing.

func newTasksRetryCmd() *cobra.Command {
	return taskActionCmd(taskAction{
		use:       "retry ID",
		completes: recoverableTask,
		short:     "Run a recoverable_failed task again, a person having decided (through the control plane)",
		long: `retry starts a new attempt of a task that ended recoverable_failed: the
safety gate stopped an automatic retry (the attempt had output, used a tool
or had a side effect), or the task was stopped, and a person decides. The
control plane puts the task back in the queue, keeping its attempts; the
agent that claims it runs the next attempt, and the timeline records that a
person retried it. The attempt replays the prompt from the start, in a
workspace reset to its base when the task names a repository; to resume
the last session where it stopped instead, use agent tasks continue.

It always goes through the control plane (--control-plane, --token-file),
which owns the assignment of tasks; --remote is accepted and changes nothing.
A task in any other phase is refused (exit 1).`,
		example: `  agent tasks retry t-0123456789 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		call:    (*controlplane.Client).RetryTask,
		done: func(v api.TaskView) string {
			return fmt.Sprintf("queued again for attempt %d; the next agent to claim it runs it", len(v.Attempts)+1)
		},
	})
}

func newTasksContinueCmd() *cobra.Command {
	return taskActionCmd(taskAction{
		use:       "continue ID",
		completes: func(t *state.Task) bool { return taskview.Continuable(t) || t.Phase == state.PhaseParked },
		short:     "Continue a task's session on the agent that keeps it, a person having decided (through the control plane)",
		long: `continue resumes the session of a task that ended failed,
recoverable_failed, timed_out or cancelled: the agent that keeps the CLI's
session (the one that ran the task last) runs the next attempt, which
resumes that session with a short follow-up instead of the prompt, in the
task's workspace as the session left it. The conversation, and any work
in the workspace, go on from where they stopped.

retry is the other way: it replays the prompt from the start, on any
agent, in a workspace reset to its base (a replay). Continue when the
attempt got far and what it did should be kept; retry when it should be
done again from scratch.

The control plane puts the task back in the queue for that agent alone;
other agents do not claim it. Should the agent not come back, the task
waits in the queue until the queued limit (--queued-limit of the control
plane, 1 h) expires it. A task that completed, has not ended, or has no
attempt whose session the executor can resume is refused (exit 1), as is
one whose session no agent is known to keep.

A parked task (waiting for a usage limit to reset) is continued now
rather than at its resumes_at: its agent, which holds it, hears so at its
next heartbeat and resumes its session at once.

It always goes through the control plane (--control-plane, --token-file),
which owns the assignment of tasks; --remote is accepted and changes nothing.`,
		example: `  agent tasks continue t-0123456789 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		call:    (*controlplane.Client).ContinueTask,
		done:    continuedLine,
	})
}

// continuedLine says what a continue queued: the next attempt, whose
// session it resumes and where.
func continuedLine(v api.TaskView) string {
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

func newTasksCancelCmd() *cobra.Command {
	return taskActionCmd(taskAction{
		use:       "cancel ID",
		completes: unendedTask,
		short:     "Cancel a task (through the control plane)",
		long: `cancel ends a task: a queued one at once, a running one as soon as its agent
hears of it, which is at once on the claim it holds open (within a
second; an agent from before that hears at its next heartbeat): its
executor is stopped, the attempt and the task end cancelled, "cancelled by
a person" on both sides. A task whose agent had already finished it when
the cancel came stays as it ended, and its timeline says the cancel came
after. It always goes through the control plane (--control-plane,
--token-file); --remote is accepted and changes nothing. A task that has
already ended is refused (exit 1).`,
		example: `  agent tasks cancel t-0123456789 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		call:    (*controlplane.Client).CancelTask,
		done: func(v api.TaskView) string {
			return fmt.Sprintf("cancel requested (attempt %d); its agent stops it now", len(v.Attempts))
		},
	})
}

// taskAction is a command that asks the control plane to do something to
// one task.
type taskAction struct {
	use, short, long, example string
	call                      func(c *controlplane.Client, ctx context.Context, id string) (api.TaskView, error)
	done                      func(api.TaskView) string // the success line, after the task's id
	completes                 func(*state.Task) bool    // the tasks of the data directory its id completes from
	// flags, if set, adds the command's own flags; check, if set, says
	// what is wrong with them (before the control plane is asked).
	flags func(*cobra.Command)
	check func() error
}

func newTasksBudgetCmd() *cobra.Command {
	var req api.BudgetRequest
	var addTime time.Duration
	return taskActionCmd(taskAction{
		use: "budget ID",
		completes: func(t *state.Task) bool {
			return t.Phase == state.PhaseParked && t.Parked != nil && t.Parked.Reason == state.ParkBudget
		},
		short: "Raise the budget of a task parked at it, and continue its session (through the control plane)",
		long: `budget raises the token or time budget of a task that reached it and
parked (phase parked, reason budget; agent run --on-budget park, the
default): --add-tokens N adds N tokens to the token budget it reached,
--add-time D adds D to its time budget (the task's own, or its agent's
--default-max-tokens and --default-max-time). Its agent, which holds it,
hears so at its next heartbeat and continues the session with one
follow-up turn; a raise that leaves it with nothing to spend keeps it
parked, and its log says so.

A task that did not park at its budget is refused (exit 1), as is a raise
of a budget it has not (--add-tokens for a task that reached its time
budget). agent tasks cancel ends a parked task instead. It always goes
through the control plane (--control-plane, --token-file).`,
		example: `  agent tasks budget t-0123456789 --add-tokens 200000 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks budget t-0123456789 --add-time 20m --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		flags: func(cmd *cobra.Command) {
			cmd.Flags().Int64Var(&req.AddTokens, "add-tokens", 0, "tokens to add to the token budget the task reached")
			cmd.Flags().DurationVar(&addTime, "add-time", 0, "wall time to add to the time budget the task reached (e.g. 20m)")
		},
		check: func() error {
			switch {
			case req.AddTokens < 0 || addTime < 0:
				return errors.New("--add-tokens and --add-time cannot be below zero")
			case req.AddTokens == 0 && addTime == 0:
				return errors.New("say how much to add: --add-tokens N, --add-time D or both")
			}
			return nil
		},
		call: func(c *controlplane.Client, ctx context.Context, id string) (api.TaskView, error) {
			req.AddTime = state.Duration(addTime)
			return c.BudgetTask(ctx, id, req)
		},
		done: func(v api.TaskView) string {
			return "budget raised to " + state.BudgetText(v.MaxTokens, v.MaxTime.D()) + "; its agent continues it at its next heartbeat"
		},
	})
}

func taskActionCmd(a taskAction) *cobra.Command {
	var (
		cp             cpFlags
		remote, asJSON bool
	)
	cmd := &cobra.Command{
		Use:     a.use,
		Short:   a.short,
		Long:    a.long,
		Example: a.example,
		Args:    taskIDArg(a.use),

		ValidArgsFunction: completeTaskIDs(a.completes),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.check != nil {
				if err := a.check(); err != nil {
					return usageError{err}
				}
			}
			c, err := cp.client()
			if err != nil {
				return err
			}
			v, err := a.call(c, cmd.Context(), args[0])
			if err != nil {
				// The control plane's words, made safe to print.
				return fmt.Errorf("%s %s: %s", cmd.Name(), taskview.Visible(args[0]), taskview.Visible(err.Error()))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			if v.Phase.Terminal() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", taskview.Visible(v.ID), taskview.Visible(string(v.Phase)))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", taskview.Visible(v.ID), taskview.Visible(a.done(v)))
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&remote, "remote", false, "accepted, as with ls and show: "+cmd.Name()+" always goes through the control plane")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as the control plane answered, as JSON")
	if a.flags != nil {
		a.flags(cmd)
	}
	return cmd
}
