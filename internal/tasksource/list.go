package tasksource

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// The orders of tasks ls.
const (
	// OrderPeople: the tasks that need a person on top, then the newest
	// (api.ForPeople).
	OrderPeople = "people"
	OrderNewest = string(api.OrderNewest)
	OrderOldest = string(api.OrderOldest)
)

// Orders are the orders List knows.
var Orders = []string{OrderPeople, OrderNewest, OrderOldest}

// Query is what tasks ls asks for: the tasks Filter selects, and Phase
// (its name as given, "" for any), in Order, at most Limit (0: all).
type Query struct {
	Filter api.TaskFilter
	Phase  string
	Order  string
	Limit  int
}

// Check says what is wrong with q, and sets its filter's phase. An order
// List does not know is an UnknownOrderError.
func (q *Query) Check() error {
	if q.Phase != "" {
		q.Filter.Phase = state.Phase(q.Phase)
		if !slices.Contains(state.Phases, q.Filter.Phase) {
			return fmt.Errorf("--phase %q: want one of %s", taskview.Visible(q.Phase), state.PhaseNames())
		}
	}
	if q.Limit < 0 {
		return fmt.Errorf("--limit %d: want 0 (all) or more", q.Limit)
	}
	if !slices.Contains(Orders, q.Order) {
		return UnknownOrderError{q.Order}
	}
	return nil
}

// UnknownOrderError is an order List does not know.
type UnknownOrderError struct{ Order string }

func (e UnknownOrderError) Error() string {
	return fmt.Sprintf("--order %q: want people, newest or oldest", taskview.Visible(e.Order))
}

// Views are tasks as the control plane shows them (tasks ls --json), one
// shape for a task local or remote: [] for none.
func Views(tasks []*state.Task) []api.TaskView {
	views := make([]api.TaskView, len(tasks))
	for i, t := range tasks {
		views[i] = api.ViewOf(t)
	}
	return views
}

// List is the tasks f selects, in order, at most limit (0: all). In the
// people's order a remote list asks the control plane first for the tasks
// that need a person (each phase of them, newest first), then for the
// newest of the rest, so that a limit never leaves out one that needs a
// person for a newer one that does not.
func List(ctx context.Context, s Source, order string, f api.TaskFilter, limit int) ([]*state.Task, error) {
	r, remote := s.(Remote)
	if !remote {
		tasks, err := s.Tasks(ctx, f, 0)
		switch order {
		case OrderPeople:
			slices.SortStableFunc(tasks, api.ForPeople)
		case OrderNewest:
			slices.SortStableFunc(tasks, func(a, b *state.Task) int { return oldestFirst(b, a) })
		default:
			slices.SortStableFunc(tasks, oldestFirst)
		}
		if limit > 0 && len(tasks) > limit {
			tasks = tasks[:limit]
		}
		return tasks, err
	}
	if order != OrderPeople {
		return r.TasksIn(ctx, api.TaskOrder(order), f, limit, nil)
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
		more, err := r.TasksIn(ctx, api.OrderNewest, g, left(limit, tasks), nil)
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
	rest, err := r.TasksIn(ctx, api.OrderNewest, f, left(limit, tasks), seen)
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
