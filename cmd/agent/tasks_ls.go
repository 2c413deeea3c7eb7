package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
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
			if !slices.Contains(listOrders, order) {
				return usagef("--order %q: want people, newest or oldest", taskview.Visible(order))
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			tasks, err := listTasks(cmd.Context(), s, order, filter, limit)
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
			return taskview.Table(cmd.OutOrStdout(), newPalette(cmd.OutOrStdout()), tasks, time.Now())
		},
	}
	src.add(cmd)
	cmd.Flags().StringVar(&phase, "phase", "", "only the tasks in this phase (queued, running, completed, failed, …)")
	cmd.Flags().StringVar(&filter.Agent, "agent", "", "only the tasks whose lease this agent holds")
	cmd.Flags().StringVar(&filter.Repo, "repo", "", "only the tasks on this repository")
	cmd.Flags().BoolVar(&filter.Live, "live", false, "only the tasks that have not ended")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	cmd.Flags().StringVar(&order, "order", orderPeople, "people (those that need a person first, then the newest), newest or oldest")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the tasks as a JSON array: each task as the control plane shows it (its fields, progress_card, output_cut_lines and output_cut_bytes), local or --remote")
	return cmd
}

// The orders of tasks ls.
const (
	// orderPeople: the tasks that need a person on top, then the newest
	// (api.ForPeople).
	orderPeople = "people"
	orderNewest = string(api.OrderNewest)
	orderOldest = string(api.OrderOldest)
)

var listOrders = []string{orderPeople, orderNewest, orderOldest}

// listTasks is the tasks f selects, in order, at most limit (0: all). In
// the people's order a remote list asks the control plane first for the
// tasks that need a person (each phase of them, newest first), then for
// the newest of the rest, so that a limit never leaves out one that needs
// a person for a newer one that does not.
func listTasks(ctx context.Context, s taskSource, order string, f api.TaskFilter, limit int) ([]*state.Task, error) {
	r, remote := s.(remoteSource)
	if !remote {
		tasks, err := s.Tasks(ctx, f, 0)
		switch order {
		case orderPeople:
			slices.SortStableFunc(tasks, api.ForPeople)
		case orderNewest:
			slices.SortStableFunc(tasks, func(a, b *state.Task) int { return oldestFirst(b, a) })
		default:
			slices.SortStableFunc(tasks, oldestFirst)
		}
		if limit > 0 && len(tasks) > limit {
			tasks = tasks[:limit]
		}
		return tasks, err
	}
	if order != orderPeople {
		return r.tasksIn(ctx, api.TaskOrder(order), f, limit, nil)
	}
	var (
		tasks []*state.Task
		seen  = map[string]bool{}
	)
	for _, p := range api.NeedsPersonPhases {
		if f.Phase != "" && f.Phase != p || limit > 0 && len(tasks) >= limit {
			continue
		}
		g := f
		g.Phase = p
		more, err := r.tasksIn(ctx, api.OrderNewest, g, left(limit, tasks), nil)
		if err != nil {
			return nil, err
		}
		for _, t := range more {
			seen[t.ID] = true
		}
		tasks = append(tasks, more...)
	}
	if limit > 0 && len(tasks) >= limit {
		return tasks[:limit], nil
	}
	rest, err := r.tasksIn(ctx, api.OrderNewest, f, left(limit, tasks), seen)
	if err != nil {
		return nil, err
	}
	// A task the lists above hold is not listed again, though it moved.
	return append(tasks, rest...), nil
}

// left is how many more tasks a list of limit (0: all) takes after
// tasks: 0 again for all.
func left(limit int, tasks []*state.Task) int {
	if limit == 0 {
		return 0
	}
	return limit - len(tasks)
}

// oldestFirst orders tasks by when each was submitted, then by id.
func oldestFirst(a, b *state.Task) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
}
