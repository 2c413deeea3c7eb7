package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksLsCmd() *cobra.Command {
	var (
		src    sourceFlags
		asJSON bool
		q      tasksource.Query
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
			if err := q.Check(); errors.As(err, &tasksource.UnknownOrderError{}) {
				return usageError{err}
			} else if err != nil {
				return err
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			tasks, err := tasksource.List(cmd.Context(), s, q.Order, q.Filter, q.Limit)
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
				return writeJSON(cmd.OutOrStdout(), tasksource.Views(tasks))
			}
			return taskview.Table(cmd.OutOrStdout(), taskview.PaletteFor(cmd.OutOrStdout()), tasks, time.Now())
		},
	}
	src.add(cmd)
	cmd.Flags().StringVar(&q.Phase, "phase", "", "only the tasks in this phase (queued, running, completed, failed, …)")
	cmd.Flags().StringVar(&q.Filter.Agent, "agent", "", "only the tasks whose lease this agent holds")
	cmd.Flags().StringVar(&q.Filter.Repo, "repo", "", "only the tasks on this repository")
	cmd.Flags().BoolVar(&q.Filter.Live, "live", false, "only the tasks that have not ended")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "list at most this many (0: all)")
	cmd.Flags().StringVar(&q.Order, "order", tasksource.OrderPeople, "people (those that need a person first, then the newest), newest or oldest")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as a JSON array: each task as the control plane shows it (its fields, progress_card, output_cut_lines and output_cut_bytes), local or --remote")
	return cmd
}
