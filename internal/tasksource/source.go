// Package tasksource reads tasks where the tasks commands find them: an
// agent's data directory (Local, read without taking the agent's lock, so
// it works while the agent runs) or the control plane (Remote, page after
// page). Both answer through Source, so a command, a follow or a watch is
// written once for either; List puts them in the order people read them,
// RemoteLog reads a task's output as the control plane keeps it, and
// Local.Diff a task's workspace as it is now.
//
// It knows nothing of commands or flags; text that came from a task or
// the network goes through taskview.Visible before it is put in an error.
package tasksource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Source is where the tasks commands read tasks.
type Source interface {
	// Tasks lists the tasks f selects, oldest first, at most limit of
	// them (0: all). A non-nil list with an error is a partial answer
	// (some task files could not be read).
	Tasks(ctx context.Context, f api.TaskFilter, limit int) ([]*state.Task, error)
	// Task reads one task; an unknown one is ErrNoTask.
	Task(ctx context.Context, id string) (*state.Task, error)
	// Transient reports whether a failed read may succeed if tried again.
	Transient(err error) bool
	// String says where the tasks are, for people.
	String() string
	// KnowsQueue reports whether the source sees the tasks waiting to be
	// claimed: the control plane does; an agent's data directory holds
	// only the tasks it claimed.
	KnowsQueue() bool
}

// ErrNoTask: the source does not know the task (yet).
var ErrNoTask = errors.New("no such task")

// noTaskError says where a task is not; it is ErrNoTask.
type noTaskError string

func (e noTaskError) Error() string        { return string(e) }
func (e noTaskError) Is(target error) bool { return target == ErrNoTask }

// Local reads an agent's data directory.
type Local struct{ DataDir string }

// Tasks reads every task file and keeps those f selects.
func (s Local) Tasks(_ context.Context, f api.TaskFilter, limit int) ([]*state.Task, error) {
	tasks, err := datadir.LoadTasks(s.DataDir)
	tasks = slices.DeleteFunc(tasks, func(t *state.Task) bool { return !f.Match(t) })
	if limit > 0 && len(tasks) > limit {
		tasks = tasks[:limit]
	}
	return tasks, err
}

// Task reads one task file; a missing one is ErrNoTask.
func (s Local) Task(_ context.Context, id string) (*state.Task, error) {
	t, err := datadir.LoadTask(s.DataDir, id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noTaskError(err.Error()) // not there yet, maybe: transient
	}
	return t, err
}

// Transient: a local read that failed fails again, but for a task not
// there yet.
func (s Local) Transient(err error) bool { return errors.Is(err, ErrNoTask) }

func (s Local) String() string { return s.DataDir }

// KnowsQueue is false: the agent's directory holds what it claimed.
func (Local) KnowsQueue() bool { return false }

// Remote reads the control plane.
type Remote struct{ Client *controlplane.Client }

// Tasks asks for one page after another, until limit.
func (s Remote) Tasks(ctx context.Context, f api.TaskFilter, limit int) ([]*state.Task, error) {
	return s.TasksIn(ctx, api.OrderOldest, f, limit, nil)
}

// TasksIn asks for one page after another in order o, until limit,
// leaving out the tasks skip names.
func (s Remote) TasksIn(ctx context.Context, o api.TaskOrder, f api.TaskFilter, limit int, skip map[string]bool) ([]*state.Task, error) {
	tasks, after := []*state.Task{}, ""
	for {
		size := api.MaxTasksPage
		if limit > 0 {
			size = min(size, limit-len(tasks)+len(skip))
		}
		views, next, err := s.Client.TasksIn(ctx, o, f, after, size)
		if err != nil {
			return nil, err
		}
		for i := range views {
			if !skip[views[i].ID] && (limit == 0 || len(tasks) < limit) {
				tasks = append(tasks, views[i].Task())
			}
		}
		if next == "" || next == after || limit > 0 && len(tasks) >= limit {
			return tasks, nil
		}
		after = next
	}
}

// Task asks for one task; one the control plane does not know is
// ErrNoTask.
func (s Remote) Task(ctx context.Context, id string) (*state.Task, error) {
	v, err := s.Client.Task(ctx, id)
	if ae := (*controlplane.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, noTaskError(fmt.Sprintf("no task %s at %s", taskview.Visible(id), s.Client.URL()))
	}
	if err != nil {
		return nil, err
	}
	return v.Task(), nil
}

// Transient: the network and the control plane's 5xx pass.
func (s Remote) Transient(err error) bool {
	return !errors.Is(err, ErrNoTask) && controlplane.Transient(err)
}

func (s Remote) String() string { return s.Client.URL() }

// KnowsQueue is true: the control plane holds the queue.
func (Remote) KnowsQueue() bool { return true }
