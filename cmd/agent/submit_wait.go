package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Exit codes of submit --wait, by how the task ended.
const (
	exitCompleted   = 0
	exitFailed      = 1
	exitNeedsPerson = 3 // recoverable_failed: a person decides
	exitTimedOut    = 4 // timed_out or expired
	exitCancelled   = 5
)

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
// or attempts change, then its attempt timeline. It returns the final task.
func waitTask(ctx context.Context, c *controlplane.Client, id string, out io.Writer, quiet bool) (api.TaskView, error) {
	start, last := time.Now(), ""
	t, err := followTask(ctx, remoteSource{c}, id, nil, func(t *state.Task) error {
		if line := taskLine(t); line != last && !quiet {
			last = line
			fmt.Fprintf(out, "%6.1fs  %s\n", time.Since(start).Seconds(), visible(line))
		}
		return nil
	})
	if err != nil {
		return api.TaskView{}, err
	}
	if !quiet {
		printTimeline(out, t, "  ")
	}
	return viewOf(t), nil
}
