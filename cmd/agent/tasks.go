package main

import "github.com/spf13/cobra"

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Show the tasks this agent has run: state, progress card, attempt timeline, output",
	}
	cmd.AddCommand(newTasksLsCmd(), newTasksShowCmd(), newTasksLogsCmd(), newTasksReplyCmd())
	return cmd
}
