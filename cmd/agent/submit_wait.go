package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Exit codes of submit --wait, by how the task ended.
const (
	exitCompleted   = 0
	exitFailed      = 1
	exitNeedsPerson = 3 // recoverable_failed: a person decides
	exitTimedOut    = 4 // timed_out or expired
	exitCancelled   = 5
	// exitUnroutable: no online agent can take the task (it stays queued;
	// --wait-queued waits on).
	exitUnroutable = 6
	// exitWaitTimeout: --timeout passed before the task ended (it goes on).
	exitWaitTimeout = 7
)

// waitOptions bound a wait for a task's end.
type waitOptions struct {
	// Timeout, if set, ends the wait (errWaitTimeout) while the task goes on.
	Timeout time.Duration
	// Queued waits on while the task is queued with no agent able to take
	// it; otherwise the wait ends at once (errUnroutable).
	Queued bool
	// Quiet prints nothing (--json).
	Quiet bool
}

// errUnroutable ends a wait on a task no online agent can take.
type errUnroutable struct{ id, why string }

func (e errUnroutable) Error() string {
	return fmt.Sprintf("task %s is queued and no online agent can take it: %s (it stays queued; --wait-queued waits for one)", e.id, e.why)
}

// errWaitTimeout ends a wait that --timeout bounds.
type errWaitTimeout struct {
	id      string
	timeout time.Duration
}

func (e errWaitTimeout) Error() string {
	return fmt.Sprintf("task %s has not ended within --timeout %s; it goes on (agent tasks show %s)", e.id, e.timeout, e.id)
}

// waitErrCode is the exit code of a wait that ended before its task did:
// exitUnroutable or exitWaitTimeout, else 0 (another error).
func waitErrCode(err error) int {
	var u errUnroutable
	var w errWaitTimeout
	switch {
	case errors.As(err, &u):
		return exitUnroutable
	case errors.As(err, &w):
		return exitWaitTimeout
	}
	return 0
}

// bound bounds ctx by o.Timeout, the cause naming the task.
func (o waitOptions) bound(ctx context.Context, id string) (context.Context, context.CancelFunc) {
	if o.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, o.Timeout, errWaitTimeout{id: id, timeout: o.Timeout})
}

// waitEnded turns a follow that ctx's --timeout ended into errWaitTimeout.
func waitEnded(ctx context.Context, err error) error {
	var w errWaitTimeout
	if err != nil && errors.As(context.Cause(ctx), &w) {
		return w
	}
	return err
}

// waitExitCode is the exit code for a task's terminal phase.
func waitExitCode(p state.Phase) int {
	switch p {
	case state.PhaseCompleted:
		return exitCompleted
	case state.PhaseRecoverableFailed:
		return exitNeedsPerson
	case state.PhaseTimedOut, state.PhaseExpired:
		return exitTimedOut
	case state.PhaseCancelled:
		return exitCancelled
	}
	return exitFailed
}

// waitTask follows a task to its end: a line whenever its phase, progress
// or attempts change, then its attempt timeline. It returns the final task,
// or the task as last seen with errUnroutable (unless o.Queued) or
// errWaitTimeout (o.Timeout).
func waitTask(ctx context.Context, c *controlplane.Client, id string, out io.Writer, o waitOptions) (api.TaskView, error) {
	ctx, cancel := o.bound(ctx, id)
	defer cancel()
	start, last := time.Now(), ""
	var seen *state.Task
	t, err := followTask(ctx, remoteSource{c}, id, nil, func(t *state.Task) error {
		seen = t
		if line := taskview.Line(t); line != last && !o.Quiet {
			last = line
			fmt.Fprintf(out, "%6.1fs  %s\n", time.Since(start).Seconds(), taskview.Visible(line))
		}
		if !o.Queued && t.Phase == state.PhaseQueued && t.Unroutable != "" {
			return errUnroutable{id: t.ID, why: taskview.Visible(t.Unroutable)}
		}
		return nil
	})
	if err = waitEnded(ctx, err); err != nil {
		if seen != nil && waitErrCode(err) != 0 {
			return viewOf(seen), err
		}
		return api.TaskView{}, err
	}
	if !o.Quiet {
		taskview.PrintTimeline(out, newPalette(out), t, time.Now(), "  ")
	}
	return viewOf(t), nil
}
