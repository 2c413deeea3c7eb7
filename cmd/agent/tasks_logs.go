package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

func newTasksLogsCmd() *cobra.Command {
	var (
		dataDir string
		attempt int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a task's executor output, every attempt or one; -f follows it until the task ends",
		Long: `logs prints the executor's output of a task, as the agent keeps it in its
data directory. With -f it follows the task: it waits for a task the agent
has not claimed yet, prints the output as it comes with a line for each
change of phase or progress ("-- turn_started  step 2 of 3 (66%)"), and
stops after the line of the task's final phase; with --attempt N, once
attempt N has ended (the tmux view's windows show this).`,
		Args: taskIDArg("logs ID"),

		ValidArgsFunction: completeTaskIDs(anyTask),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 {
				return usagef("--attempt %d: attempts count from 1", attempt)
			}
			id := args[0]
			src := localSource{dataDir: dataDir}
			_, err := src.Task(cmd.Context(), id)
			if err != nil && (!follow || !errors.Is(err, errNoTask)) {
				return err
			}
			if err != nil {
				cmd.PrintErrf("agent: waiting for task %s: the agent in %s has not claimed it yet\n", visible(id), dataDir)
			}
			r, err := datadir.NewLogReader(dataDir, id, attempt)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			print := func(l string) { fmt.Fprintln(out, visible(l)) }
			if !follow {
				return r.Next(print)
			}
			w, err := newDirWatch()
			if err != nil {
				return err
			}
			defer w.Close()
			w.Add(datadir.Layout{Dir: dataDir}.Tasks())
			last := ""
			_, err = followTask(cmd.Context(), src, id, w.Wake(), func(t *state.Task) error {
				w.Add(r.Dir()) // once the first line made it
				// The output first: it was written before the change the
				// task's state shows, the final phase last of all.
				if err := r.Next(print); err != nil {
					return err
				}
				if line := taskLine(t); line != last {
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
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt (default: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the task runs, with its phase and progress; wait for it if it has not started; stop when it ends (with --attempt, when that attempt ends)")
	return cmd
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
