package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// pruneBed is a data directory with real files, a real outbox and a clock
// the test moves.
type pruneBed struct {
	t    *testing.T
	now  time.Time
	busy map[string]bool
	r    *retention
}

func newPruneBed(t *testing.T, rules state.Retention) *pruneBed {
	t.Helper()
	b := &pruneBed{t: t, now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), busy: map[string]bool{}}
	l := datadir.Layout{Dir: t.TempDir()}
	store, err := state.OpenStore(l.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(l.Outbox(), outbox.Options{Now: func() time.Time { return b.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	b.r = &retention{layout: l, workRoot: filepath.Join(l.Dir, "work"), store: store, outbox: o, rules: rules,
		now: func() time.Time { return b.now }, log: quiet(), running: newRunningTasks(false), held: func(id string) bool { return b.busy[id] }}
	return b
}

// task saves a task that ended endedAgo, with a log and a work directory
// of workBytes.
func (b *pruneBed) task(id string, phase state.Phase, endedAgo time.Duration, workBytes int) {
	b.t.Helper()
	ended := b.now.Add(-endedAgo)
	must(b.t, b.r.store.Save(&state.Task{ID: id, Prompt: "p", Phase: phase, CreatedAt: ended.Add(-time.Minute), UpdatedAt: ended,
		Recoverable: phase == state.PhaseRecoverableFailed, Attempts: []state.Attempt{}}))
	must(b.t, b.r.layout.AppendLog(id, 1, []byte("12:00:00.000 stdout   hello\n")))
	must(b.t, os.MkdirAll(filepath.Join(b.r.workRoot, id, "src"), 0o700))
	must(b.t, os.WriteFile(filepath.Join(b.r.workRoot, id, "src", "big"), make([]byte, workBytes), 0o600))
	must(b.t, os.MkdirAll(filepath.Join(b.r.workRoot, runner.SessionDirName, id), 0o700))
	must(b.t, os.WriteFile(filepath.Join(b.r.workRoot, runner.SessionDirName, id, "session.json"), []byte("{}"), 0o600))
}

// kept reports whether task id is still there, whole or not at all.
func (b *pruneBed) kept(id string) bool {
	b.t.Helper()
	paths := []string{b.r.store.Path(id), b.r.layout.Logs(id), filepath.Join(b.r.workRoot, id), filepath.Join(b.r.workRoot, runner.SessionDirName, id)}
	var there int
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			there++
		} else if !errors.Is(err, fs.ErrNotExist) {
			b.t.Fatal(err)
		}
	}
	if there != 0 && there != len(paths) {
		b.t.Fatalf("task %s is half pruned: %d of %v remain", id, there, paths)
	}
	return there == len(paths)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPruneByAge(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	b := newPruneBed(t, state.Retention{})
	b.task("old", state.PhaseCompleted, 8*day, 100)
	b.task("person", state.PhaseRecoverableFailed, 8*day, 100)
	b.task("new", state.PhaseFailed, 6*day, 100)
	b.task("running", state.PhaseTurnStarted, 30*day, 100)
	b.task("retried", state.PhaseCompleted, 8*day, 100) // the agent runs it again
	b.busy["retried"] = true
	b.task("unsent", state.PhaseCompleted, 8*day, 100)
	seq, err := b.r.outbox.Append(outbox.Record{Kind: outbox.KindComplete, TaskID: "unsent", Attempt: 1, Payload: json.RawMessage(`{}`)})
	must(t, err)
	// A prune a crash cut short left this behind.
	must(t, os.MkdirAll(filepath.Join(b.r.layout.Dir, "logs", trashPrefix+"gone", "x"), 0o700))

	res := b.r.prune(context.Background())
	if res.tasks != 2 {
		t.Errorf("pruned %d tasks, want 2 (old, person)", res.tasks)
	}
	for id, want := range map[string]bool{"old": false, "person": false, "new": true, "running": true, "retried": true, "unsent": true} {
		if got := b.kept(id); got != want {
			t.Errorf("task %s kept = %v, want %v", id, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(b.r.layout.Dir, "logs", trashPrefix+"gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover of a cut-short prune still there: %v", err)
	}

	// Once its reports are delivered, the unsent task goes too; a day
	// later, so does new.
	must(t, b.r.outbox.MarkSent(seq))
	b.now = b.now.Add(day)
	b.busy["retried"] = false
	b.r.prune(context.Background())
	for _, id := range []string{"unsent", "new", "retried"} {
		if b.kept(id) {
			t.Errorf("task %s kept after it was delivered / aged", id)
		}
	}
	if !b.kept("running") {
		t.Error("running task pruned")
	}
}

func TestPruneBySize(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	b := newPruneBed(t, state.Retention{MaxBytes: 25_000})
	b.task("b", state.PhaseCompleted, 2*day, 10_000)
	b.task("a", state.PhaseCompleted, 3*day, 10_000)
	b.task("c", state.PhaseCompleted, 1*day, 10_000)
	b.task("person", state.PhaseRecoverableFailed, 4*day, 10_000)
	b.task("running", state.PhaseTurnStarted, 5*day, 100_000) // not finished: not counted

	res := b.r.prune(context.Background())
	// 40 KB of finished tasks: a and b, the oldest the cap may take, go;
	// person is older but waits for a person.
	if res.tasks != 2 || res.taskBytes < 20_000 {
		t.Errorf("pruned %+v, want 2 tasks of over 20 kB", res)
	}
	for id, want := range map[string]bool{"a": false, "b": false, "c": true, "person": true, "running": true} {
		if got := b.kept(id); got != want {
			t.Errorf("task %s kept = %v, want %v", id, got, want)
		}
	}
}

func TestPruneWorkDirectoryLinkIsNotFollowed(t *testing.T) {
	t.Parallel()
	b := newPruneBed(t, state.Retention{})
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "precious"), []byte("x"), 0o600))
	b.task("old", state.PhaseCompleted, 8*24*time.Hour, 10)
	must(t, os.Symlink(outside, filepath.Join(b.r.workRoot, "old", "link")))
	b.r.prune(context.Background())
	if b.kept("old") {
		t.Fatal("old task kept")
	}
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Errorf("a file a work directory linked to was removed: %v", err)
	}
}

func TestPrunePurgesDeadRecordsAfterTheRetention(t *testing.T) {
	t.Parallel()
	b := newPruneBed(t, state.Retention{MaxAge: 48 * time.Hour})
	o := b.r.outbox
	var seqs []uint64
	for range 3 {
		seq, err := o.Append(outbox.Record{Kind: outbox.KindPhase, TaskID: "t-1", Attempt: 1, Payload: json.RawMessage(`{}`)})
		must(t, err)
		seqs = append(seqs, seq)
	}
	must(t, o.MarkDead("terminal", seqs[0]))
	b.now = b.now.Add(24 * time.Hour)
	must(t, o.MarkDead("terminal", seqs[1]))
	b.now = b.now.Add(25 * time.Hour) // the first died 49 h ago, the second 25 h ago

	if res := b.r.prune(context.Background()); res.deadPurged != 1 {
		t.Errorf("purged %d dead records, want 1", res.deadPurged)
	}
	snap, err := outbox.Inspect(o.Dir())
	must(t, err)
	var states []string
	for _, it := range snap.Items {
		states = append(states, string(it.State))
	}
	// The purge compacts: the purged record is gone from the file.
	if got := strings.Join(states, ","); got != "dead,pending" {
		t.Errorf("records after the purge: %s, want dead,pending", got)
	}
}

// signalOn is a slog handler that closes ch when a record with message msg
// is logged: a test waits for it, not for time to pass.
type signalOn struct {
	msg  string
	ch   chan struct{}
	once *sync.Once
}

func (h signalOn) Enabled(context.Context, slog.Level) bool { return true }
func (h signalOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}
func (h signalOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalOn) WithGroup(string) slog.Handler      { return h }

// TestRunPrunesAtStart: the agent prunes when it starts, with the limits of
// its Config: a task that ended before the retention goes, a young one stays.
func TestRunPrunesAtStart(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	cfg.Retention = time.Hour
	pruned := make(chan struct{})
	cfg.Logger = slog.New(signalOn{msg: "retention: finished tasks pruned, with their logs and work directories", ch: pruned, once: &sync.Once{}})
	l := datadir.Layout{Dir: cfg.DataDir}
	store, err := state.OpenStore(l.Tasks())
	must(t, err)
	ended := time.Now().Add(-2 * time.Hour)
	for _, id := range []string{"old", "young"} {
		if id == "young" {
			ended = time.Now()
		}
		must(t, store.Save(&state.Task{ID: id, Prompt: "p", Phase: state.PhaseCompleted, CreatedAt: ended, UpdatedAt: ended, Attempts: []state.Attempt{}}))
		must(t, os.MkdirAll(filepath.Join(cfg.DataDir, "work", id), 0o700))
	}
	a, err := New(cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	select {
	case <-pruned:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not prune at start within a minute")
	}
	cancel()
	must(t, <-errc)
	for id, want := range map[string]bool{"old": false, "young": true} {
		_, err := os.Stat(filepath.Join(cfg.DataDir, "work", id))
		if got := err == nil; got != want {
			t.Errorf("work directory of %s kept = %v, want %v", id, got, want)
		}
	}
}
