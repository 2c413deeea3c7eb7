package taskfollow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/state"
)

// agentDir is a data directory as an agent keeps it, with task id
// running its attempt 1; finish ends it completed.
type agentDir struct {
	t     *testing.T
	dir   string
	store *state.Store
	task  *state.Task
}

func newAgentDir(t *testing.T, id string) *agentDir {
	t.Helper()
	dir := t.TempDir()
	st, err := state.OpenStore(datadir.Layout{Dir: dir}.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	task := state.NewTask(id, "count the files", now)
	task.Title = "count the files"
	must(t, task.Transition(state.PhaseClaimed, "", now))
	_, err = task.StartFirstAttempt(id+"-a1", []string{"model-a"}, now)
	must(t, err)
	must(t, task.Transition(state.PhaseTurnStarted, "", now))
	must(t, st.Save(task))
	return &agentDir{t: t, dir: dir, store: st, task: task}
}

func (a *agentDir) finish() {
	now := time.Now()
	must(a.t, a.task.FinalizeAttempt(a.task.ID+"-a1", state.Outcome{Status: state.AttemptCompleted}, now))
	must(a.t, a.task.Transition(state.PhaseCompleted, "", now))
	must(a.t, a.store.Save(a.task))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// watchDir is a DirWatch of dir's task files, closed with the test.
func watchDir(t *testing.T, dir string) *DirWatch {
	w, err := WatchTasks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// A watch of a data directory until done: a line for the running task,
// then, once the agent saved it completed, its line and timeline, and the
// watch ends with nothing left. Bounded, it ends with the timeout and
// counts what was left.
func TestWatchLinesUntilDone(t *testing.T) {
	t.Parallel()
	a := newAgentDir(t, "t-1")
	src := tasksource.Local{DataDir: a.dir}

	ctx, cancel := Bound(context.Background(), 200*time.Millisecond, "")
	defer cancel()
	w := &Watch{Source: src, Recent: 5, UntilDone: true}
	var out, errOut strings.Builder
	if err := Ended(ctx, w.Lines(ctx, &out, &errOut)); ErrCode(err) != ExitWaitTimeout || w.Left != 1 {
		t.Fatalf("a bounded watch of a running task: %v, %d left", err, w.Left)
	}

	// As tasks watch --until-done --timeout: the timeout said on errOut,
	// exit 7; stopped by the person, no error.
	out.Reset()
	errOut.Reset()
	if code, err := (&Watch{Source: src, Recent: 5, UntilDone: true}).Run(context.Background(), &out, &errOut, nil, a.dir, 100*time.Millisecond); err != nil || code != ExitWaitTimeout ||
		errOut.String() != "agent: tasks watch: --timeout 100ms passed; 1 tasks had not ended (they go on)\n" || !strings.Contains(out.String(), "t-1") {
		t.Errorf("Run, bounded: %d %v; out %q, errOut %q", code, err, out.String(), errOut.String())
	}
	cctx, stop := context.WithCancel(context.Background())
	stop()
	if code, err := (&Watch{Source: src}).Run(cctx, &out, &errOut, nil, a.dir, 0); err != nil || code != 0 {
		t.Errorf("Run, stopped: %d %v", code, err)
	}
	errOut.Reset()

	w = &Watch{Source: src, Wake: watchDir(t, a.dir).Wake(), Recent: 5, UntilDone: true}
	pr, pw := io.Pipe()
	defer pr.Close()
	ended := make(chan error, 1)
	go func() {
		err := w.Lines(context.Background(), pw, &errOut)
		pw.Close()
		ended <- err
	}()
	lines := bufio.NewScanner(pr)
	readUntil(t, lines, "t-1  count the files")
	a.finish()
	if got := readUntil(t, lines, "Attempt 1"); !strings.Contains(got, "completed") {
		t.Errorf("the watch printed:\n%s", got)
	}
	if lines.Scan() {
		t.Errorf("the watch printed more: %q", lines.Text())
	}
	if err := <-ended; err != nil || w.Left != 0 {
		t.Fatalf("the watch ended with %v, %d left", err, w.Left)
	}
	if errOut.String() != "" {
		t.Errorf("warnings: %s", errOut.String())
	}
	// Without UntilDone, a watch ends only with its context.
	if err := (&Watch{Source: src}).Lines(cctx, &out, &errOut); !errors.Is(err, context.Canceled) {
		t.Errorf("a stopped watch: %v", err)
	}
	// A data directory that cannot be read is an error, not an empty view.
	if err := (&Watch{Source: tasksource.Local{DataDir: t.TempDir()}}).Lines(context.Background(), &out, &errOut); err == nil {
		t.Error("a watch of an empty directory did not fail")
	}
	if _, err := WatchTasks(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no task state in data directory") {
		t.Errorf("a watch of a directory the agent never used: %v", err)
	}
}

// tasks logs -f of a local task: it waits for a task not claimed yet,
// prints its output as it comes and its changes of phase, and ends after
// the line of its final phase.
func TestLocalLogsFollow(t *testing.T) {
	t.Parallel()
	a := newAgentDir(t, "t-1")
	l := datadir.Layout{Dir: a.dir}
	must(t, l.AppendLog("t-1", 1, []byte(datadir.LogLine("12:00:00.000", "stdout", "counting")+"\n")))
	pr, pw := io.Pipe()
	defer pr.Close()
	print := func(s string) { fmt.Fprintln(pw, s) }
	ended := make(chan error, 1)
	go func() {
		err := LocalLogs(context.Background(), a.dir, "t-1", 0, true, print, func() { t.Error("waiting for a task that is there") })
		pw.Close()
		ended <- err
	}()
	lines := bufio.NewScanner(pr)
	if got := readUntil(t, lines, "-- turn_started"); !strings.Contains(got, "counting") {
		t.Errorf("the output before the phase line:\n%s", got)
	}
	must(t, l.AppendLog("t-1", 1, []byte(datadir.LogLine("12:00:01.000", "stdout", "counted 7")+"\n")))
	a.finish()
	if got := readUntil(t, lines, "-- completed"); !strings.Contains(got, "counted 7") {
		t.Errorf("the follow printed:\n%s", got)
	}
	if lines.Scan() {
		t.Errorf("the follow printed after the final phase: %q", lines.Text())
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	print = func(s string) { fmt.Fprintln(&out, s) }

	waited := false
	err := LocalLogs(context.Background(), a.dir, "t-2", 0, false, print, func() { waited = true })
	if err == nil || waited {
		t.Errorf("logs of an unknown task without -f: %v (waited %v)", err, waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := LocalLogs(ctx, a.dir, "t-2", 0, true, print, func() { waited = true }); err != nil || !waited {
		t.Errorf("a follow of a task not claimed yet, stopped: %v (waited %v)", err, waited)
	}
}

// The follow of one attempt ends once that attempt has ended and what
// follows it is known.
func TestAttemptOver(t *testing.T) {
	t.Parallel()
	running := state.Attempt{Number: 1, Status: state.AttemptRunning}
	failed := state.Attempt{Number: 1, Status: state.AttemptFailed}
	for _, tc := range []struct {
		name string
		t    *state.Task
		n    int
		want bool
	}{
		{"the attempt runs", &state.Task{Phase: state.PhaseTurnStarted, Attempts: []state.Attempt{running}}, 1, false},
		{"a later attempt began", &state.Task{Phase: state.PhaseTurnStarted, Attempts: []state.Attempt{failed, running}}, 1, true},
		{"the task ended", &state.Task{Phase: state.PhaseFailed, Attempts: []state.Attempt{failed}}, 1, true},
		{"ended, queued again", &state.Task{Phase: state.PhaseQueued, Attempts: []state.Attempt{failed}}, 1, true},
		{"not begun", &state.Task{Phase: state.PhaseTurnStarted, Attempts: []state.Attempt{running}}, 2, false},
	} {
		if got := AttemptOver(tc.t, tc.n); got != tc.want {
			t.Errorf("%s: AttemptOver = %v, want %v", tc.name, got, tc.want)
		}
	}
}
