package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/controlplane"
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

// waitPoll is how often submit --wait asks the control plane.
const waitPoll = 500 * time.Millisecond

// waitTask follows a task to its end: a line whenever its phase, progress
// or attempts change, then its attempt timeline. It returns the final task.
func waitTask(ctx context.Context, c *controlplane.Client, id string, out io.Writer, quiet bool) (controlplane.TaskView, error) {
	start, last := time.Now(), ""
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	for {
		v, err := c.Task(ctx, id)
		if err != nil && !controlplane.Transient(err) {
			return v, err
		}
		if err == nil {
			if line := waitLine(v); line != last && !quiet {
				last = line
				fmt.Fprintf(out, "%6.1fs  %s\n", time.Since(start).Seconds(), visible(line))
			}
			if v.Phase.Terminal() {
				if !quiet {
					for _, l := range state.Timeline(&v.Task, time.Now()) {
						fmt.Fprintf(out, "  %s\n", visible(l))
					}
				}
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-tick.C:
		}
	}
}

// waitLine is what submit --wait shows of a task.
func waitLine(v controlplane.TaskView) string {
	s := string(v.Phase)
	c := v.Current()
	switch {
	case v.Phase.Terminal() && v.PhaseReason != "":
		s += "  " + v.PhaseReason
	case c != nil && c.Status == state.AttemptPending:
		s += fmt.Sprintf("  attempt %d with %s after %s, at %s", c.Number, c.Model, v.LastErrorCode, c.NotBefore.Local().Format(time.TimeOnly))
	case v.AwaitingReply != nil:
		s += "  waiting for a person: " + v.AwaitingReply.Command
	case v.Progress.Message != "":
		s += "  " + v.Progress.Message
		if v.Progress.Percent > 0 {
			s += fmt.Sprintf(" (%d%%)", v.Progress.Percent)
		}
	case c != nil:
		s += fmt.Sprintf("  attempt %d with %s", c.Number, c.Model)
	}
	return s
}
