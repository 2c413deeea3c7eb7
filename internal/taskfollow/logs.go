package taskfollow

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// LocalLogs prints task id's output as the agent keeps it in dataDir
// (attempt's alone when it is above 0), each line to print. With follow it
// follows the task (Logs), waking as the data directory changes, and
// waits for a task the agent has not claimed yet, calling waiting once.
func LocalLogs(ctx context.Context, dataDir, id string, attempt int, follow bool, print func(string), waiting func()) error {
	src := tasksource.Local{DataDir: dataDir}
	_, err := src.Task(ctx, id)
	if err != nil && (!follow || !errors.Is(err, tasksource.ErrNoTask)) {
		return err
	}
	if err != nil {
		waiting()
	}
	r, err := datadir.NewLogReader(dataDir, id, attempt)
	if err != nil {
		return err
	}
	if !follow {
		return r.Next(print)
	}
	w, err := NewDirWatch()
	if err != nil {
		return err
	}
	defer w.Close()
	w.Add(datadir.Layout{Dir: dataDir}.Tasks())
	return Logs(ctx, src, id, attempt, w.Wake(), print, func() error {
		w.Add(r.Dir()) // once the first line made it
		return r.Next(print)
	})
}

// RemoteLogs prints task id's output as the control plane keeps it
// (tasksource.RemoteLog), and with follow follows the task (Logs).
func RemoteLogs(ctx context.Context, c *controlplane.Client, id string, attempt int, follow bool, print func(string)) error {
	src := tasksource.Remote{Client: c}
	if _, err := src.Task(ctx, id); err != nil {
		return fmt.Errorf("tasks logs %s: %w", taskview.Visible(id), err)
	}
	r := tasksource.NewRemoteLog(c, id, attempt, print)
	if !follow {
		return r.Next(ctx)
	}
	return Logs(ctx, src, id, attempt, nil, print, func() error { return r.Next(ctx) })
}

// Logs follows task id to its end (tasks logs -f), or attempt's end when
// attempt is above 0, calling next for the output written meanwhile before
// each line of a change of phase or progress ("-- turn_started  step 2 of
// 3"), the final phase last of all. ctx ending is no error: the person
// stopped it.
func Logs(ctx context.Context, src tasksource.Source, id string, attempt int, wake <-chan struct{}, print func(string), next func() error) error {
	last := ""
	_, err := Task(ctx, src, id, wake, func(t *state.Task) error {
		// The output first: it was written before the change the task's
		// state shows, the final phase last of all.
		if err := next(); err != nil {
			return err
		}
		if line := taskview.Line(t); line != last {
			last = line
			print("-- " + line)
		}
		if attempt > 0 && AttemptOver(t, attempt) {
			return errAttemptOver
		}
		return nil
	})
	if errors.Is(err, ctx.Err()) || errors.Is(err, errAttemptOver) {
		return nil // stopped by the person, or the attempt followed ended
	}
	return err
}

// errAttemptOver ends the follow of one attempt.
var errAttemptOver = errors.New("the attempt ended")

// AttemptOver reports whether attempt n of t has ended, and what follows
// it is known: a later attempt exists, or the task has ended, or (a task
// that no longer runs) attempt n has a final status.
func AttemptOver(t *state.Task, n int) bool {
	switch {
	case t.Phase.Terminal() || len(t.Attempts) > n:
		return true
	case len(t.Attempts) == n:
		return t.Attempts[n-1].Status.Final() && !t.Phase.Running()
	}
	return false
}
