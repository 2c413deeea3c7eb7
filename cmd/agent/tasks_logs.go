package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newTasksLogsCmd() *cobra.Command {
	var (
		src     sourceFlags
		attempt int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a task's executor output, every attempt or one; -f follows it until the task ends; --remote reads it from the control plane",
		Long: `logs prints the executor's output of a task, as the agent keeps it in its
data directory. With -f it follows the task: it waits for a task the agent
has not claimed yet, prints the output as it comes with a line for each
change of phase or progress ("-- turn_started  step 2 of 3 (66%)"), and
stops after the line of the task's final phase; with --attempt N, once
attempt N has ended (the tmux view's windows show this).

With --remote it reads the output the control plane keeps (its events,
page after page), from any machine, with -f and --attempt alike. The
control plane keeps --max-attempt-output of each attempt (8 MiB by
default) and marks where it cut.`,
		Example: `  agent tasks logs t-1a2b3c4d5e -f
  agent tasks logs t-1a2b3c4d5e --remote -f --control-plane https://cp.example:8443 --token-file ~/.config/agent/operator-token`,
		Args: taskIDArg("logs ID"),

		ValidArgsFunction: completeTaskIDs(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 {
				return usagef("--attempt %d: attempts count from 1", attempt)
			}
			id := args[0]
			out := cmd.OutOrStdout()
			// A CLI's colours are for a terminal of its own: the text is shown.
			print := func(l string) { fmt.Fprintln(out, taskview.Visible(state.PlainText(l))) }
			if !src.remote {
				return taskfollow.LocalLogs(cmd.Context(), src.dataDir, id, attempt, follow, print, func() {
					cmd.PrintErrf("agent: waiting for task %s: the agent in %s has not claimed it yet\n", taskview.Visible(id), src.dataDir)
				})
			}
			c, err := src.cp.client()
			if err != nil {
				return err
			}
			return taskfollow.RemoteLogs(cmd.Context(), c, id, attempt, follow, print)
		},
	}
	src.add(cmd)
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt (default: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the task runs, with its phase and progress; wait for it if it has not started; stop when it ends (with --attempt, when that attempt ends)")
	return cmd
}
