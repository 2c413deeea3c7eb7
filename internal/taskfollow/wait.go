package taskfollow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Exit codes of submit --wait, by how the task ended; tasks watch
// --until-done and subtask wait end with ExitWaitTimeout too.
const (
	ExitCompleted   = 0
	ExitFailed      = 1
	ExitNeedsPerson = 3 // recoverable_failed: a person decides
	ExitTimedOut    = 4 // timed_out or expired
	ExitCancelled   = 5
	// ExitUnroutable: no online agent can take the task (it stays queued;
	// --wait-queued waits on).
	ExitUnroutable = 6
	// ExitWaitTimeout: --timeout passed before the task ended (it goes on).
	ExitWaitTimeout = 7
)

// WaitOptions bound a wait for a task's end and say how it is shown.
type WaitOptions struct {
	// Timeout, if set, ends the wait (TimeoutError) while the task goes on.
	Timeout time.Duration
	// Queued waits on while the task is queued with no agent able to take
	// it; otherwise the wait ends at once (UnroutableError).
	Queued bool
	// Quiet prints nothing (--json).
	Quiet bool
	// Palette colours the timeline printed at the end.
	Palette taskview.Palette
}

// UnroutableError ends a wait on a task no online agent can take.
type UnroutableError struct{ ID, Why string }

func (e UnroutableError) Error() string {
	return fmt.Sprintf("task %s is queued and no online agent can take it: %s (it stays queued; --wait-queued waits for one)", e.ID, e.Why)
}

// TimeoutError ends a wait that --timeout bounds.
type TimeoutError struct {
	ID      string
	Timeout time.Duration
}

func (e TimeoutError) Error() string {
	return fmt.Sprintf("task %s has not ended within --timeout %s; it goes on (agent tasks show %s)", e.ID, e.Timeout, e.ID)
}

// ErrCode is the exit code of a wait that ended before its task did:
// ExitUnroutable or ExitWaitTimeout, else 0 (another error).
func ErrCode(err error) int {
	var u UnroutableError
	var w TimeoutError
	switch {
	case errors.As(err, &u):
		return ExitUnroutable
	case errors.As(err, &w):
		return ExitWaitTimeout
	}
	return 0
}

// Bound bounds ctx by timeout (none when 0), the cause naming what is
// waited for.
func Bound(ctx context.Context, timeout time.Duration, id string) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, timeout, TimeoutError{ID: id, Timeout: timeout})
}

// Ended turns a follow that ctx's timeout (Bound) ended into TimeoutError.
func Ended(ctx context.Context, err error) error {
	var w TimeoutError
	if err != nil && errors.As(context.Cause(ctx), &w) {
		return w
	}
	return err
}

// ExitCode is the exit code for a task's terminal phase.
func ExitCode(p state.Phase) int {
	switch p {
	case state.PhaseCompleted:
		return ExitCompleted
	case state.PhaseRecoverableFailed:
		return ExitNeedsPerson
	case state.PhaseTimedOut, state.PhaseExpired:
		return ExitTimedOut
	case state.PhaseCancelled:
		return ExitCancelled
	}
	return ExitFailed
}

// Wait follows a task to its end: a line to out whenever its phase,
// progress or attempts change, then its attempt timeline. It returns the
// final task, or the task as last seen with UnroutableError (unless
// o.Queued) or TimeoutError (o.Timeout).
func Wait(ctx context.Context, src tasksource.Source, id string, out io.Writer, o WaitOptions) (api.TaskView, error) {
	ctx, cancel := Bound(ctx, o.Timeout, id)
	defer cancel()
	start, last := time.Now(), ""
	var seen *state.Task
	t, err := Task(ctx, src, id, nil, func(t *state.Task) error {
		seen = t
		if line := taskview.Line(t); line != last && !o.Quiet {
			last = line
			fmt.Fprintf(out, "%6.1fs  %s\n", time.Since(start).Seconds(), taskview.Visible(line))
		}
		if !o.Queued && t.Phase == state.PhaseQueued && t.Unroutable != "" {
			return UnroutableError{ID: t.ID, Why: taskview.Visible(t.Unroutable)}
		}
		return nil
	})
	if err = Ended(ctx, err); err != nil {
		if seen != nil && ErrCode(err) != 0 {
			return api.ViewOf(seen), err
		}
		return api.TaskView{}, err
	}
	if !o.Quiet {
		taskview.PrintTimeline(out, o.Palette, t, time.Now(), "  ")
	}
	return api.ViewOf(t), nil
}

// Submitted follows a task just submitted to its end, as agent submit
// --wait does: it says so (unless o.Quiet), follows it (Wait), says on
// errOut why a wait ended before the task did (the task goes on), and
// returns the task as last seen with the exit code: by how it ended
// (ExitCode), or ExitUnroutable or ExitWaitTimeout.
func Submitted(ctx context.Context, src tasksource.Source, id string, out, errOut io.Writer, o WaitOptions) (api.TaskView, int, error) {
	if !o.Quiet {
		fmt.Fprintf(out, "%s submitted; waiting for it to end\n", id)
	}
	final, err := Wait(ctx, src, id, out, o)
	if code := ErrCode(err); code != 0 {
		fmt.Fprintln(errOut, "agent: "+err.Error())
		return final, code, nil
	}
	if err != nil {
		return final, 0, fmt.Errorf("waiting for %s: %w", id, err)
	}
	return final, ExitCode(final.Phase), nil
}

// Subtasks follows the subtasks ids until every one has ended, and
// returns them, by id (those ended so far, with ctx's error, when ctx ends
// first). Each retry a subtask schedules meanwhile is said on remind, once
// an attempt: the parent that waits hears of it as it comes.
func Subtasks(ctx context.Context, src tasksource.Source, ids []string, remind io.Writer) (map[string]*state.Task, error) {
	done := map[string]*state.Task{}
	reminded := map[string]int{} // the failed attempts said, by subtask
	distinct := map[string]bool{}
	ended := map[string]*Settle{}
	for _, id := range ids {
		ended[id] = &Settle{}
		distinct[id] = true
	}
	err := Loop(ctx, nil, func() (bool, error) {
		for _, id := range ids {
			if done[id] != nil {
				continue
			}
			t, err := src.Task(ctx, id)
			if err != nil {
				if src.Transient(err) {
					continue
				}
				return false, fmt.Errorf("%s: %w", taskview.Visible(id), err)
			}
			for n := reminded[id] + 1; n < len(t.Attempts); n++ {
				if r := state.RetryReminder(t, n); r != "" {
					fmt.Fprintf(remind, "subtask %s retrying: %s\n", taskview.Visible(id), taskview.Visible(r))
				}
				reminded[id] = n
			}
			if ended[id].Done(t, time.Now()) {
				done[id] = t
			}
		}
		return len(done) == len(distinct), nil
	})
	return done, err
}

// EndedOf counts the ids among done.
func EndedOf(ids []string, done map[string]*state.Task) int {
	n := 0
	for _, id := range ids {
		if done[id] != nil {
			n++
		}
	}
	return n
}
