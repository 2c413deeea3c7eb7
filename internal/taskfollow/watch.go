package taskfollow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Watch is a live view of the tasks (tasks watch).
type Watch struct {
	Source tasksource.Source
	// Wake, if set, fires when the source may have changed (a DirWatch
	// of a data directory); the source is polled every Poll besides.
	Wake <-chan struct{}
	// Recent is how many of the tasks that ended last to show.
	Recent int
	// UntilDone ends the watch once no task it sees is running, waiting
	// out a retry or queued.
	UntilDone bool
	// Palette colours what is printed; Hint makes the commands the board
	// suggests.
	Palette taskview.Palette
	Hint    taskview.Hint

	// Left is how many tasks had not ended when the watch ended.
	Left int
}

// Lines prints one line per change of a task to out, and its timeline
// when it ends (taskview.Changes): the watch's form for a pipe or a file.
// A read that failed but may pass is a warning on errOut, once until
// another.
func (w *Watch) Lines(ctx context.Context, out, errOut io.Writer) error {
	var changes taskview.Changes
	warned := ""
	seen := NewWatchList(w.Source)
	return Loop(ctx, w.Wake, func() (bool, error) {
		tasks, err := seen.Tasks(ctx)
		if err != nil {
			if tasks == nil && !w.Source.Transient(err) {
				return false, err
			}
			if msg := oneLine(err.Error()); msg != warned {
				warned = msg
				fmt.Fprintf(errOut, "agent: tasks watch: warning: %s\n", taskview.Visible(msg))
			}
		}
		changes.Print(out, w.Palette, tasks, w.Recent, time.Now())
		return w.done(tasks, err), nil
	})
}

// Screen redraws the board in place on the terminal out, on the alternate
// screen, until ctx ends or the person presses q (or Ctrl-C) on in. The
// terminal is given back as it was, whatever ends the watch; when
// UntilDone ended it, the last board stays on it.
func (w *Watch) Screen(ctx context.Context, out, in *os.File) error {
	screen, ctx := taskview.OpenScreen(ctx, out, in)
	defer screen.Close()
	problem := ""
	seen := NewWatchList(w.Source)
	return Loop(ctx, w.Wake, func() (bool, error) {
		tasks, err := seen.Tasks(ctx)
		switch {
		case err != nil && tasks == nil && !w.Source.Transient(err):
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
		b := taskview.NewBoard(tasks, w.Recent)
		b.QueueKnown = w.Source.KnowsQueue()
		lines := b.Render(w.Source.String(), problem, w.Palette, w.Hint, time.Now(), width, height)
		screen.Draw(lines)
		done := w.done(tasks, err)
		if done {
			screen.Keep(lines)
		}
		return done, nil
	})
}

// done reports whether a watch may end: UntilDone, the tasks were read,
// and none is left unended. Left counts those.
func (w *Watch) done(tasks []*state.Task, err error) bool {
	if err != nil && tasks == nil {
		return false // not read: nothing is known to have ended
	}
	w.Left = taskview.NewBoard(tasks, 0).Unended()
	return w.UntilDone && w.Left == 0
}

// oneLine keeps an error message to one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// WatchList is what each round of a watch shows. From a data directory,
// every task. From the control plane, the tasks that have not ended and
// those the watch saw end (each asked for once, as it leaves the live
// list): a round costs what is live, not the whole history.
type WatchList struct {
	s     tasksource.Source
	live  map[string]bool
	ended map[string]*state.Task
}

// NewWatchList starts a watch's list of s's tasks.
func NewWatchList(s tasksource.Source) *WatchList {
	return &WatchList{s: s, live: map[string]bool{}, ended: map[string]*state.Task{}}
}

// Tasks is the round's tasks.
func (w *WatchList) Tasks(ctx context.Context) ([]*state.Task, error) {
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
			if errors.Is(err, tasksource.ErrNoTask) {
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

// Run is agent tasks watch: it watches the tasks on out, redrawn in
// place on a terminal (its keys read from in), else a line per change;
// dataDir, if set, is the local source's data directory, whose changes
// wake it. timeout (0: none) bounds it: when that passes first, Run says
// so on errOut and returns ExitWaitTimeout. A watch the person stopped
// (ctx cancelled) ends with no error.
func (w *Watch) Run(ctx context.Context, out, errOut io.Writer, in *os.File, dataDir string, timeout time.Duration) (int, error) {
	ctx, cancel := Bound(ctx, timeout, "")
	defer cancel()
	if dataDir != "" {
		dw, err := WatchTasks(dataDir)
		if err != nil {
			return 0, err
		}
		defer dw.Close()
		w.Wake = dw.Wake()
	}
	var err error
	if f, ok := out.(*os.File); ok && taskview.IsTerminal(out) {
		err = w.Screen(ctx, f, in)
	} else {
		err = w.Lines(ctx, out, errOut)
	}
	if ErrCode(Ended(ctx, err)) == ExitWaitTimeout {
		fmt.Fprintf(errOut, "agent: tasks watch: --timeout %s passed; %d tasks had not ended (they go on)\n", timeout, w.Left)
		return ExitWaitTimeout, nil
	}
	if errors.Is(err, context.Canceled) {
		return 0, nil
	}
	return 0, err
}
