// Package taskfollow holds the loops that follow tasks as they run: Loop,
// the one loop under them all (a round every Poll, and at once when a
// DirWatch sees the data directory change); Task, which follows one task
// to its end; Wait (submit --wait), Logs (tasks logs -f), Watch (tasks
// watch) and Subtasks (subtask wait) on top; and how a wait's end maps to
// an exit code.
//
// It reads through a tasksource.Source, local or remote alike, and prints
// with internal/taskview to writers its caller owns; it knows nothing of
// commands or flags.
package taskfollow

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/state"
)

// Poll is how often a follow reads again when nothing woke it: the control
// plane is only polled, and a local follow also wakes on the data
// directory's changes.
const Poll = 500 * time.Millisecond

// Task follows one task to its end, for submit --wait and tasks logs -f:
// it reads the task every Poll, and at once when wake fires, calls seen
// with each read, and returns the task once its phase is terminal (and, in
// the control plane's view, its result in: see Settle). A read that fails
// transiently (the network; a task the local agent has not claimed yet)
// is tried again; another error, or one from seen, ends the follow.
func Task(ctx context.Context, src tasksource.Source, id string, wake <-chan struct{}, seen func(*state.Task) error) (*state.Task, error) {
	var t *state.Task
	var ended Settle
	err := Loop(ctx, wake, func() (bool, error) {
		got, err := src.Task(ctx, id)
		if err != nil {
			if src.Transient(err) {
				return false, nil
			}
			return false, err
		}
		t = got
		if err := seen(t); err != nil {
			return false, err
		}
		if !src.KnowsQueue() {
			// An agent's own task file: its phase and its result are
			// saved together.
			return t.Phase.Terminal(), nil
		}
		return ended.Done(t, time.Now()), nil
	})
	return t, err
}

// ResultGrace bounds how long a follow of the control plane's view waits,
// once a task's phase is terminal, for the completion that carries its
// result: an agent reports the terminal phase first and the completion
// after it, perhaps in its next batch, so a reader between the two sees a
// completed task with no result. A task no agent holds (cancelled in the
// queue) has none coming.
const ResultGrace = 5 * time.Second

// Settle tells when a followed task has ended for good: its phase
// terminal and its result in, or none to come, or ResultGrace passed.
// The zero value is ready.
type Settle struct{ since time.Time }

// Done reports whether t, read at now, has ended for good.
func (s *Settle) Done(t *state.Task, now time.Time) bool {
	if !t.Phase.Terminal() {
		s.since = time.Time{}
		return false
	}
	if t.Result != nil || t.Lease == nil {
		return true
	}
	if s.since.IsZero() {
		s.since = now
	}
	return now.Sub(s.since) >= ResultGrace
}

// Loop calls round every Poll, and at once when wake fires, until it says
// done, fails, or ctx ends. The one loop under every command that follows
// tasks: submit --wait, tasks logs -f, tasks watch and subtask wait.
func Loop(ctx context.Context, wake <-chan struct{}, round func() (done bool, err error)) error {
	tick := time.NewTicker(Poll)
	defer tick.Stop()
	for {
		if done, err := round(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
}

// DirWatch wakes a follow when files change in the directories it watches
// (fsnotify). A directory that does not exist yet is added once it does
// (Add again each round).
type DirWatch struct {
	w     *fsnotify.Watcher
	wake  chan struct{}
	added map[string]bool
	done  sync.WaitGroup
}

// NewDirWatch starts watching; Close ends it and its goroutine.
func NewDirWatch() (*DirWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	d := &DirWatch{w: w, wake: make(chan struct{}, 1), added: map[string]bool{}}
	d.done.Go(func() {
		for {
			select {
			case _, ok := <-w.Events:
				if !ok {
					return
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow lost events: a round reads everything anyway.
			}
			select {
			case d.wake <- struct{}{}:
			default:
			}
		}
	})
	return d, nil
}

// WatchTasks is a DirWatch of dataDir's task files, which must be there:
// a data directory the agent never used (a typo) is an error, not an
// empty view forever.
func WatchTasks(dataDir string) (*DirWatch, error) {
	if err := datadir.CheckTaskState(dataDir); err != nil {
		return nil, err
	}
	w, err := NewDirWatch()
	if err != nil {
		return nil, err
	}
	w.Add(datadir.Layout{Dir: dataDir}.Tasks())
	return w, nil
}

// Add watches dir if it exists and is not watched yet.
func (d *DirWatch) Add(dir string) {
	if d.added[dir] {
		return
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return
	}
	if d.w.Add(dir) == nil {
		d.added[dir] = true
	}
}

// Wake fires after a change.
func (d *DirWatch) Wake() <-chan struct{} { return d.wake }

// Close stops watching and waits for the goroutine.
func (d *DirWatch) Close() {
	d.w.Close()
	d.done.Wait()
}
