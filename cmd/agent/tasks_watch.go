package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newTasksWatchCmd() *cobra.Command {
	var (
		src       sourceFlags
		recent    int
		untilDone bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "A live view of the tasks: running ones with their progress cards, scheduled retries, recent endings with their timelines",
		Long: `watch shows the tasks as they run, until you stop it (q or Ctrl-C): each
running task with its progress card and latest progress, each scheduled
retry with its countdown, queued tasks (--remote only: the queue is the
control plane's, and an agent's data directory holds only the tasks it
claimed), and the tasks that ended last with their attempt timelines.

It reads the agent's data directory (without taking its lock, so it works
while the agent runs), redrawn as the files change; with --remote it polls
the control plane instead. On a terminal it redraws in place; otherwise
(piped, redirected) it prints one line per change, and a task's timeline
when it ends.

With --until-done it ends, exit 0, once no task it sees is running, waiting
out a retry or queued; --timeout bounds that wait: when it passes first the
watch ends with exit 7, and the tasks go on.`,
		Example: `  agent tasks watch
  agent tasks watch --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks watch | tee watch.log
  agent tasks watch --until-done --timeout 30m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recent < 0 {
				return usagef("--recent %d: want 0 or more", recent)
			}
			switch {
			case timeout < 0:
				return usagef("--timeout %s: want 0 (no bound) or more", timeout)
			case timeout > 0 && !untilDone:
				return usagef("--timeout bounds --until-done: give both")
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			ctx, cancel := waitOptions{Timeout: timeout}.bound(cmd.Context(), "")
			defer cancel()
			var wake <-chan struct{}
			if !src.remote {
				// A data directory the agent never used (a typo) is an
				// error, not an empty view forever.
				if err := datadir.CheckTaskState(src.dataDir); err != nil {
					return err
				}
				w, err := newDirWatch()
				if err != nil {
					return err
				}
				defer w.Close()
				w.Add(datadir.Layout{Dir: src.dataDir}.Tasks())
				wake = w.Wake()
			}
			out := cmd.OutOrStdout()
			left := 0 // tasks not ended when the watch ended
			if f, ok := out.(*os.File); ok && taskview.IsTerminal(out) {
				err = watchScreen(ctx, s, wake, f, recent, newHint(&src.cp), untilDone, &left)
			} else {
				err = watchLines(ctx, s, wake, out, cmd.ErrOrStderr(), recent, untilDone, &left)
			}
			if waitErrCode(waitEnded(ctx, err)) == exitWaitTimeout {
				cmd.PrintErrf("agent: tasks watch: --timeout %s passed; %d tasks had not ended (they go on)\n", timeout, left)
				return exitCode(exitWaitTimeout)
			}
			if errors.Is(err, context.Canceled) {
				return nil // stopped by the person
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&untilDone, "until-done", false, "end (exit 0) once no task is running, waiting out a retry or queued")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --until-done, end with exit 7 when the tasks have not all ended within this long (they go on); 0: no bound")
	src.add(cmd)
	cmd.Flags().IntVar(&recent, "recent", 5, "how many of the tasks that ended last to show")
	return cmd
}

// watchLines prints one line per change of a task, and its timeline
// when it ends (taskview.Changes): the watch's form for a pipe or a file.
// With untilDone it ends once no task is left unended; left says how
// many were when it ended.
func watchLines(ctx context.Context, s taskSource, wake <-chan struct{}, out, errOut io.Writer, recent int, untilDone bool, left *int) error {
	var changes taskview.Changes
	warned := ""
	seen := newWatchList(s)
	p := newPalette(out)
	return follow(ctx, wake, func() (bool, error) {
		tasks, err := seen.tasks(ctx)
		if err != nil {
			if tasks == nil && !s.Transient(err) {
				return false, err
			}
			if msg := oneLine(err.Error()); msg != warned {
				warned = msg
				fmt.Fprintf(errOut, "agent: tasks watch: warning: %s\n", taskview.Visible(msg))
			}
		}
		changes.Print(out, p, tasks, recent, time.Now())
		return doneWatching(tasks, err, untilDone, left), nil
	})
}

// doneWatching reports whether a watch --until-done may end: the tasks
// were read, and none is left unended. left counts those.
func doneWatching(tasks []*state.Task, err error, untilDone bool, left *int) bool {
	if err != nil && tasks == nil {
		return false // not read: nothing is known to have ended
	}
	*left = taskview.NewBoard(tasks, 0).Unended()
	return untilDone && *left == 0
}

// watchScreen redraws the board in place on a terminal, on the alternate
// screen, until ctx ends or the person presses q (or Ctrl-C). The terminal
// is given back as it was, whatever ends the watch; when --until-done
// ended it, the last board stays on it.
func watchScreen(ctx context.Context, s taskSource, wake <-chan struct{}, out *os.File, recent int, h hint, untilDone bool, left *int) error {
	screen, ctx := taskview.OpenScreen(ctx, out, os.Stdin)
	defer screen.Close()
	problem := ""
	seen := newWatchList(s)
	return follow(ctx, wake, func() (bool, error) {
		tasks, err := seen.tasks(ctx)
		switch {
		case err != nil && tasks == nil && !s.Transient(err):
			return false, err
		case err != nil:
			problem = oneLine(err.Error())
		default:
			problem = ""
		}
		if tasks == nil && problem != "" && screen.Drawn() {
			return false, nil // keep what was shown; the header will say why it is old
		}
		width, height := screen.Size()
		b := taskview.NewBoard(tasks, recent)
		b.QueueKnown = s.KnowsQueue()
		lines := b.Render(s.String(), problem, newPalette(out), h, time.Now(), width, height)
		screen.Draw(lines)
		done := doneWatching(tasks, err, untilDone, left)
		if done {
			screen.Keep(lines)
		}
		return done, nil
	})
}

// watchList is what each round of a watch shows. From a data directory,
// every task. From the control plane, the tasks that have not ended and
// those the watch saw end (each asked for once, as it leaves the live
// list): a round costs what is live, not the whole history.
type watchList struct {
	s     taskSource
	live  map[string]bool
	ended map[string]*state.Task
}

func newWatchList(s taskSource) *watchList {
	return &watchList{s: s, live: map[string]bool{}, ended: map[string]*state.Task{}}
}

func (w *watchList) tasks(ctx context.Context) ([]*state.Task, error) {
	if !w.s.KnowsQueue() {
		return w.s.Tasks(ctx, api.TaskFilter{}, 0)
	}
	live, err := w.s.Tasks(ctx, api.TaskFilter{Live: true}, 0)
	if err != nil {
		return nil, err
	}
	now := make(map[string]bool, len(live))
	for _, t := range live {
		now[t.ID] = true
		delete(w.ended, t.ID) // a person's retry brought it back
	}
	for id := range w.live {
		if now[id] {
			continue
		}
		t, err := w.s.Task(ctx, id)
		if err != nil {
			if errors.Is(err, errNoTask) {
				continue // removed meanwhile (retention)
			}
			return nil, err // asked again next round: it is still in w.live
		}
		w.ended[id] = t
	}
	w.live = now
	out := slices.Clone(live)
	for _, t := range w.ended {
		out = append(out, t)
	}
	return out, nil
}
