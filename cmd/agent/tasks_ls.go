package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

func newTasksLsCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
		filter api.TaskFilter
		phase  string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tasks, oldest first: this agent's (the data directory) or, with --remote, the control plane's",
		Long: `ls lists the tasks, oldest first: this agent's (its data directory) or, with
--remote, the control plane's, asked for a page at a time. --phase, --agent,
--repo and --live narrow the list (the control plane selects, so a long
history is not sent); --limit stops after so many.`,
		Example: `  agent tasks ls
  agent tasks ls --live
  agent tasks ls --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks ls --remote --phase failed --repo api --limit 20`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if phase != "" {
				filter.Phase = state.Phase(phase)
				if !slices.Contains(state.Phases, filter.Phase) {
					return fmt.Errorf("--phase %q: want one of %s", visible(phase), state.PhaseNames())
				}
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (all) or more", limit)
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			tasks, err := s.Tasks(cmd.Context(), filter, limit)
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
	cmd.Flags().StringVar(&phase, "phase", "", "only the tasks in this phase (queued, running, completed, failed, …)")
	cmd.Flags().StringVar(&filter.Agent, "agent", "", "only the tasks whose lease this agent holds")
	cmd.Flags().StringVar(&filter.Repo, "repo", "", "only the tasks on this repository")
	cmd.Flags().BoolVar(&filter.Live, "live", false, "only the tasks that have not ended")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
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
		model, progress, width := "-", "-", 30
		if c := t.Current(); c != nil && c.Model != "" {
			model = c.Model
		}
		switch {
		case t.Progress.Message != "" || t.Progress.Percent > 0:
			progress = fmt.Sprintf("%d%% %s", t.Progress.Percent, t.Progress.Message)
		case t.Phase == state.PhaseQueued && t.Unroutable != "": // routing by capability
			progress, width = "unroutable: "+t.Unroutable, 60
		case t.Phase == state.PhaseQueued && len(t.Requires) > 0:
			progress, width = "requires "+state.RequirementsText(t.Requires), 60
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", visible(t.ID), visible(truncateMiddle(t.Title, 40)), p.phase(t.Phase), len(t.Attempts), visible(model),
			visible(truncateMiddle(progress, width)), ago(now, t.UpdatedAt))
	}
	return tw.Flush()
}
