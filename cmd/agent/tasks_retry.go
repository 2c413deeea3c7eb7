package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
)

// Cancel and retry change a task where it is assigned: the control plane
// owns assignment (an agent runs only what it holds a lease on), so these
// two always go through it. --remote is accepted, for symmetry with ls and
// show, and changes nothing.

func newTasksRetryCmd() *cobra.Command {
	return taskActionCmd(taskAction{
		use:   "retry ID",
		short: "Run a recoverable_failed task again, a person having decided (through the control plane)",
		long: `retry starts a new attempt of a task that ended recoverable_failed: the
safety gate stopped an automatic retry (the attempt had output, used a tool
or had a side effect), or the task was stopped, and a person decides. The
control plane puts the task back in the queue, keeping its attempts; the
agent that claims it runs the next attempt, and the timeline records that a
person retried it.

It always goes through the control plane (--control-plane, --token-file),
which owns the assignment of tasks; --remote is accepted and changes nothing.
A task in any other phase is refused (exit 1).`,
		example: `  agent tasks retry t-0123456789 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		call:    (*controlplane.Client).RetryTask,
		done:    "queued again for attempt %d; the next agent to claim it runs it",
		attempt: func(v api.TaskView) int { return len(v.Attempts) + 1 },
	})
}

func newTasksCancelCmd() *cobra.Command {
	return taskActionCmd(taskAction{
		use:   "cancel ID",
		short: "Cancel a task (through the control plane)",
		long: `cancel ends a task: a queued one at once, a running one when its agent
hears of it at its next heartbeat (its executor is stopped, the attempt ends
cancelled). It always goes through the control plane (--control-plane,
--token-file); --remote is accepted and changes nothing. A task that has
already ended is refused (exit 1).`,
		example: `  agent tasks cancel t-0123456789 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		call:    (*controlplane.Client).CancelTask,
		done:    "cancel requested (attempt %d); its agent stops it at its next heartbeat",
		attempt: func(v api.TaskView) int { return len(v.Attempts) },
	})
}

// taskAction is a command that asks the control plane to do something to
// one task.
type taskAction struct {
	use, short, long, example string
	call                      func(c *controlplane.Client, ctx context.Context, id string) (api.TaskView, error)
	done                      string // printf format of the success line, with the attempt number
	attempt                   func(api.TaskView) int
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
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cp.client()
			if err != nil {
				return err
			}
			v, err := a.call(c, cmd.Context(), args[0])
			if err != nil {
				// The control plane's words, made safe to print.
				return fmt.Errorf("%s %s: %s", cmd.Name(), visible(args[0]), visible(err.Error()))
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			if v.Phase.Terminal() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", visible(v.ID), visible(string(v.Phase)))
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: "+a.done+"\n", visible(v.ID), a.attempt(v))
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&remote, "remote", false, "accepted, as with ls and show: "+cmd.Name()+" always goes through the control plane")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as the control plane answered, as JSON")
	return cmd
}
