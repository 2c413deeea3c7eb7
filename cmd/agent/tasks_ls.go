package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newTasksLsCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
		filter api.TaskFilter
		phase  string
		limit  int
		order  string
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the tasks, those that need a person on top, then the newest: this agent's (the data directory) or, with --remote, the control plane's",
		Long: `ls lists the tasks: this agent's (its data directory) or, with --remote, the
control plane's, asked for a page at a time. Those that need a person come
first (a question to answer, awaiting_reply; then a stop to decide on,
recoverable_failed), then the others, newest first (--order people, the
default); --order newest lists all newest first, --order oldest oldest
first (as the API does by default). --phase, --agent, --repo and --live
narrow the list (the control plane selects, so a long history is not
sent); --limit stops after so many, the first so many of the order.`,
		Example: `  agent tasks ls
  agent tasks ls --live
  agent tasks ls --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks ls --remote --phase failed --repo api --limit 20`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if phase != "" {
				filter.Phase = state.Phase(phase)
				if !slices.Contains(state.Phases, filter.Phase) {
					return fmt.Errorf("--phase %q: want one of %s", taskview.Visible(phase), state.PhaseNames())
				}
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (all) or more", limit)
			}
			if !slices.Contains(tasksource.Orders, order) {
				return usagef("--order %q: want people, newest or oldest", taskview.Visible(order))
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			tasks, err := tasksource.List(cmd.Context(), s, order, filter, limit)
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
					views[i] = api.ViewOf(t)
				}
				return writeJSON(cmd.OutOrStdout(), views)
			}
			return taskview.Table(cmd.OutOrStdout(), taskview.PaletteFor(cmd.OutOrStdout()), tasks, time.Now())
		},
	}
	src.add(cmd)
	cmd.Flags().StringVar(&phase, "phase", "", "only the tasks in this phase (queued, running, completed, failed, …)")
	cmd.Flags().StringVar(&filter.Agent, "agent", "", "only the tasks whose lease this agent holds")
	cmd.Flags().StringVar(&filter.Repo, "repo", "", "only the tasks on this repository")
	cmd.Flags().BoolVar(&filter.Live, "live", false, "only the tasks that have not ended")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	cmd.Flags().StringVar(&order, "order", tasksource.OrderPeople, "people (those that need a person first, then the newest), newest or oldest")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as a JSON array: each task as the control plane shows it (its fields, progress_card, output_cut_lines and output_cut_bytes), local or --remote")
	return cmd
}
