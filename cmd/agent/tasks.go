package main

import "github.com/spf13/cobra"

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Show, follow, diff, push, cancel, retry and continue tasks: this agent's (the data directory) or the control plane's (--remote)",
		Long: `The tasks commands read the agent's data directory by default, without
taking its lock, so they work while the agent runs; with --remote, ls, show,
watch, logs and diff read the control plane instead (--control-plane,
--token-file). cancel, retry, continue, reply and inbox always go through
the control plane, which owns the assignment of tasks; push runs on the
agent's machine and tells the control plane.`,
	}
	cmd.AddCommand(newTasksLsCmd(), newTasksShowCmd(), newTasksWatchCmd(), newTasksLogsCmd(), newTasksDiffCmd(), newTasksPushCmd(), newTasksCancelCmd(), newTasksRetryCmd(), newTasksContinueCmd(), newTasksBudgetCmd(), newTasksReplyCmd(), newTasksInboxCmd())
	return cmd
}
