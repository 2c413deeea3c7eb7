package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksShowCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task: phase, progress card and attempt timeline (--remote: as the control plane has it)",
		Args:  taskIDArg("show ID"),

		ValidArgsFunction: completeTaskIDs(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := src.source()
			if err != nil {
				return err
			}
			t, err := s.Task(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("tasks show %s: %w", taskview.Visible(args[0]), err)
			}
			now := time.Now()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), tasksource.ShownOf(t, now))
			}
			taskview.Show(cmd.OutOrStdout(), taskview.PaletteFor(cmd.OutOrStdout()), newHint(&src.cp), t, now)
			// Subtasks: the task's parent and subtasks.
			taskview.SubtaskTree(cmd.Context(), cmd.OutOrStdout(), taskview.PaletteFor(cmd.OutOrStdout()), t, s.Task)
			return nil
		},
	}
	src.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"task", "progress_card", "timeline"} as JSON`)
	return cmd
}
