package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

func newTasksLsCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tasks, oldest first: this agent's (the data directory) or, with --remote, the control plane's",
		Example: `  agent tasks ls
  agent tasks ls --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := src.source()
			if err != nil {
				return err
			}
			tasks, err := s.Tasks(cmd.Context())
			if tasks == nil && err != nil {
				return fmt.Errorf("tasks ls: %w", err)
			}
			if err != nil {
				cmd.PrintErrln("agent: tasks ls: warning:", oneLine(err.Error()))
			}
			if asJSON {
				// One shape for a task as shown, local or remote: the
				// control plane's view (the task, its progress card, what
				// was cut of its output).
				views := make([]api.TaskView, len(tasks))
				for i, t := range tasks {
					views[i] = viewOf(t)
				}
				return writeJSON(cmd.OutOrStdout(), views)
			}
			return printTaskTable(cmd.OutOrStdout(), newPalette(cmd.OutOrStdout()), tasks, time.Now())
		},
	}
	src.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as a JSON array: each task as the control plane shows it (its fields, progress_card, output_cut_lines and output_cut_bytes), local or --remote")
	return cmd
}

// printTaskTable prints one row per task.
// With colour, every phase is coloured (if only plain), so the columns
// after it stay aligned.
func printTaskTable(w io.Writer, p palette, tasks []*state.Task, now time.Time) error {
	if len(tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return nil
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "ID\tTITLE\t%s\tATTEMPTS\tMODEL\tPROGRESS\tUPDATED\n", p.paint(colourPlain, "PHASE"))
	for _, t := range tasks {
		model, progress := "-", "-"
		if c := t.Current(); c != nil && c.Model != "" {
			model = c.Model
		}
		if t.Progress.Message != "" || t.Progress.Percent > 0 {
			progress = fmt.Sprintf("%d%% %s", t.Progress.Percent, t.Progress.Message)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", visible(t.ID), visible(truncateMiddle(t.Title, 40)), p.phase(t.Phase), len(t.Attempts), visible(model),
			visible(truncateMiddle(progress, 30)), ago(now, t.UpdatedAt))
	}
	return tw.Flush()
}
