package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newTasksLogsCmd() *cobra.Command {
	var (
		src     sourceFlags
		attempt int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a task's executor output, every attempt or one; -f follows it until the task ends; --remote reads it from the control plane",
		Long: `logs prints the executor's output of a task, as the agent keeps it in its
data directory. With -f it follows the task: it waits for a task the agent
has not claimed yet, prints the output as it comes with a line for each
change of phase or progress ("-- turn_started  step 2 of 3 (66%)"), and
stops after the line of the task's final phase; with --attempt N, once
attempt N has ended (the tmux view's windows show this).

With --remote it reads the output the control plane keeps (its events,
page after page), from any machine, with -f and --attempt alike. The
control plane keeps --max-attempt-output of each attempt (8 MiB by
default) and marks where it cut.`,
		Example: `  agent tasks logs t-1a2b3c4d5e -f
  agent tasks logs t-1a2b3c4d5e --remote -f --control-plane https://cp.example:8443 --token-file ~/.config/agent/operator-token`,
		Args: taskIDArg("logs ID"),

		ValidArgsFunction: completeTaskIDs(anyTask),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 {
				return usagef("--attempt %d: attempts count from 1", attempt)
			}
			id := args[0]
			out := cmd.OutOrStdout()
			// A CLI's colours are for a terminal of its own: the text is shown.
			print := func(l string) { fmt.Fprintln(out, taskview.Visible(state.PlainText(l))) }
			if src.remote {
				return remoteLogs(cmd, &src, id, attempt, follow, print)
			}
			dataDir := src.dataDir
			lsrc := localSource{dataDir: dataDir}
			_, err := lsrc.Task(cmd.Context(), id)
			if err != nil && (!follow || !errors.Is(err, errNoTask)) {
				return err
			}
			if err != nil {
				cmd.PrintErrf("agent: waiting for task %s: the agent in %s has not claimed it yet\n", taskview.Visible(id), dataDir)
			}
			r, err := datadir.NewLogReader(dataDir, id, attempt)
			if err != nil {
				return err
			}
			if !follow {
				return r.Next(print)
			}
			w, err := newDirWatch()
			if err != nil {
				return err
			}
			defer w.Close()
			w.Add(datadir.Layout{Dir: dataDir}.Tasks())
			return followLogs(cmd, lsrc, id, attempt, w.Wake(), print, func() error {
				w.Add(r.Dir()) // once the first line made it
				return r.Next(print)
			})
		},
	}
	src.add(cmd)
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt (default: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the task runs, with its phase and progress; wait for it if it has not started; stop when it ends (with --attempt, when that attempt ends)")
	return cmd
}

// remoteLogs prints (and with follow, follows) a task's output as the
// control plane keeps it.
func remoteLogs(cmd *cobra.Command, src *sourceFlags, id string, attempt int, follow bool, print func(string)) error {
	c, err := src.cp.client()
	if err != nil {
		return err
	}
	rsrc := remoteSource{c}
	if _, err := rsrc.Task(cmd.Context(), id); err != nil {
		return fmt.Errorf("tasks logs %s: %w", taskview.Visible(id), err)
	}
	r := &remoteLog{c: c, id: id, only: attempt, printFn: print}
	if !follow {
		return r.Next(cmd.Context())
	}
	return followLogs(cmd, rsrc, id, attempt, nil, print, func() error { return r.Next(cmd.Context()) })
}

// followLogs follows a task to its end (or attempt's), calling next for
// the output written meanwhile before each line of a change of phase or
// progress, the final phase last of all.
func followLogs(cmd *cobra.Command, src taskSource, id string, attempt int, wake <-chan struct{}, print func(string), next func() error) error {
	last := ""
	_, err := followTask(cmd.Context(), src, id, wake, func(t *state.Task) error {
		// The output first: it was written before the change the task's
		// state shows, the final phase last of all.
		if err := next(); err != nil {
			return err
		}
		if line := taskview.Line(t); line != last {
			last = line
			print("-- " + line)
		}
		if attempt > 0 && attemptOver(t, attempt) {
			return errAttemptOver
		}
		return nil
	})
	if errors.Is(err, cmd.Context().Err()) || errors.Is(err, errAttemptOver) {
		return nil // stopped by the person, or the attempt followed ended
	}
	return err
}

// errAttemptOver ends the follow of one attempt.
var errAttemptOver = errors.New("the attempt ended")

// attemptOver reports whether attempt n of t has ended, and what follows
// it is known: a later attempt exists, or the task has ended, or (a task
// that no longer runs) attempt n has a final status.
func attemptOver(t *state.Task, n int) bool {
	switch {
	case t.Phase.Terminal() || len(t.Attempts) > n:
		return true
	case len(t.Attempts) == n:
		return t.Attempts[n-1].Status.Final() && !t.Phase.Running()
	}
	return false
}
