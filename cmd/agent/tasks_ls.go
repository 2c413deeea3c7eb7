package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/state"
)

func newTasksLsCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tasks in the data directory, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tasks, err := agent.LoadTasks(dataDir)
			if tasks == nil && err != nil {
				return err
			}
			if err != nil {
				cmd.PrintErrln("agent: tasks ls: warning:", oneLine(err.Error()))
			}
			if asJSON {
				if tasks == nil {
					tasks = []*state.Task{}
				}
				return writeJSON(cmd.OutOrStdout(), tasks)
			}
			if len(tasks) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no tasks")
				return nil
			}
			now := time.Now()
			tw := newTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "ID\tTITLE\tPHASE\tATTEMPTS\tMODEL\tPROGRESS\tUPDATED")
			for _, t := range tasks {
				model, progress := "-", "-"
				if c := t.Current(); c != nil && c.Model != "" {
					model = c.Model
				}
				if t.Progress.Message != "" || t.Progress.Percent > 0 {
					progress = fmt.Sprintf("%d%% %s", t.Progress.Percent, t.Progress.Message)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", visible(t.ID), visible(truncateMiddle(t.Title, 40)), t.Phase, len(t.Attempts), visible(model),
					visible(truncateMiddle(progress, 30)), ago(now, t.UpdatedAt))
			}
			return tw.Flush()
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as a JSON array (the task files' schema)")
	return cmd
}
