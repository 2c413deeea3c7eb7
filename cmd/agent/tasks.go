package main

import "github.com/spf13/cobra"

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Show, follow, cancel, retry and continue tasks: this agent's (the data directory) or the control plane's (--remote)",
		Long: `The tasks commands read the agent's data directory by default, without
taking its lock, so they work while the agent runs; with --remote, ls, show
and watch read the control plane instead (--control-plane, --token-file).
cancel, retry, continue, reply and inbox always go through the control plane,
which owns the assignment of tasks.`,
	}
	cmd.AddCommand(newTasksLsCmd(), newTasksShowCmd(), newTasksWatchCmd(), newTasksLogsCmd(), newTasksCancelCmd(), newTasksRetryCmd(), newTasksContinueCmd(), newTasksReplyCmd(), newTasksInboxCmd())
	return cmd
}
