package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// logged is a logger whose lines a test reads.
type logged struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logged) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logged) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func openLogged(t *testing.T, dir string, log *logged) *Store {
	t.Helper()
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	must(t, err)
	must(t, s.Recover(func(*state.Task, []Missed) error { return nil }))
	return s
}

// fleetOf stores n tasks: every third ended (completed, failed, then
// recoverable_failed in turn), the others claimed by agent A or queued.
// It returns them as stored.
func fleetOf(t *testing.T, s *Store, n int) []*state.Task { return fleetFrom(t, s, 0, n) }

// fleetFrom is fleetOf's tasks from..n.
func fleetFrom(t *testing.T, s *Store, from, n int) []*state.Task {
	t.Helper()
	ctx := t.Context()
	var out []*state.Task
	for i := from; i < n; i++ {
		task := state.NewTask(taskID(i), "p", t0.Add(time.Duration(i)*time.Second))
		task.Repo = []string{"r1", "r2"}[i%2]
		must(t, s.Create(ctx, task))
		switch i % 3 {
		case 0:
			task = task.Clone()
			must(t, task.Transition(state.PhaseClaimed, "", t0.Add(time.Hour)))
			task.Lease = &state.Lease{ID: "l-" + task.ID, AgentID: "A", ExpiresAt: t0.Add(2 * time.Hour)}
			phase := []state.Phase{state.PhaseCompleted, state.PhaseFailed, state.PhaseRecoverableFailed}[i/3%3]
			must(t, task.Transition(phase, "", t0.Add(time.Hour+time.Duration(i)*time.Second)))
			saveTask(t, s, task)
		case 1:
			task = task.Clone()
			must(t, task.Transition(state.PhaseClaimed, "", t0.Add(time.Hour)))
			task.Lease = &state.Lease{ID: "l-" + task.ID, AgentID: "A", ExpiresAt: t0.Add(2 * time.Hour)}
			saveTask(t, s, task)
		}
		out = append(out, task)
	}
	return out
}

func taskID(i int) string { return "t" + string(rune('a'+i/26%26)) + string(rune('a'+i%26)) }

func saveTask(t *testing.T, s *Store, task *state.Task) {
	t.Helper()
	must(t, s.Update(t.Context(), []string{task.ID}, func(tx store.Tx) error {
		if tx.Task(task.ID) == nil {
			t.Fatalf("Tx.Task(%s) is nil", task.ID)
		}
		tx.Save(task.Clone())
		return nil
	}))
}

// checkAll checks that s holds want, in the lists, by id, in the counts,
// and that ended tasks are in ended/ and the others in tasks/.
func checkAll(t *testing.T, s *Store, dir string, want []*state.Task) {
	t.Helper()
	ctx := t.Context()
	got, next, err := s.Tasks(ctx, store.Query{})
	must(t, err)
	if next != "" || len(got) != len(want) {
		t.Fatalf("Tasks: %d tasks (next %q), want %d", len(got), next, len(want))
	}
	count := map[state.Phase]int{}
	for i, w := range want {
		count[w.Phase]++
		if got[i].ID != w.ID || got[i].Phase != w.Phase || got[i].Repo != w.Repo {
			t.Errorf("Tasks[%d] = %s %s, want %s %s", i, got[i].ID, got[i].Phase, w.ID, w.Phase)
		}
		in, notIn := "tasks", "ended"
		if w.Phase.Terminal() {
			in, notIn = notIn, in
		}
		if _, err := os.Stat(filepath.Join(dir, in, w.ID+".json")); err != nil {
			t.Errorf("task %s (%s): %v", w.ID, w.Phase, err)
		}
		if _, err := os.Stat(filepath.Join(dir, notIn, w.ID+".json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("task %s (%s) has a file in %s/ too", w.ID, w.Phase, notIn)
		}
	}
	n, err := s.Count(ctx)
	must(t, err)
	if len(n) != len(count) {
		t.Errorf("Count = %v, want %v", n, count)
	}
	for p, c := range count {
		if n[p] != c {
			t.Errorf("Count = %v, want %v", n, count)
		}
	}
	// Every filter: what the refs select is what the tasks say.
	for _, q := range []store.Query{{Phase: state.PhaseCompleted}, {Agent: "A"}, {Repo: "r2"}, {Live: true}, {Agent: "A", Live: true}} {
		got, _, err := s.Tasks(ctx, q)
		must(t, err)
		var ids, wantIDs []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		for _, w := range want {
			if q.Match(w) {
				wantIDs = append(wantIDs, w.ID)
			}
		}
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("Tasks(%+v) = %v, want %v", q, ids, wantIDs)
		}
	}
}

// A store of the layout from before the archive (every task in tasks/)
// opens: its first start moves the ended tasks to ended/ and says so
// once; what it holds is the same.
func TestAnOldLayoutOpensAndMovesItsEndedTasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	want := fleetOf(t, s, 30)
	must(t, s.Close())
	// The old layout: every task file in tasks/, no index.
	ended, err := os.ReadDir(filepath.Join(dir, "ended"))
	must(t, err)
	for _, e := range ended {
		from := filepath.Join(dir, "ended", e.Name())
		if strings.HasSuffix(e.Name(), ".json") {
			must(t, os.Rename(from, filepath.Join(dir, "tasks", e.Name())))
		} else {
			must(t, os.Remove(from))
		}
	}
	must(t, os.Remove(filepath.Join(dir, "ended")))

	var log logged
	s = openLogged(t, dir, &log)
	checkAll(t, s, dir, want)
	if n := strings.Count(log.String(), "moved from tasks/ to the archive"); n != 1 || !strings.Contains(log.String(), "tasks=10") {
		t.Errorf("the first start's log says the move %d times:\n%s", n, log.String())
	}
	must(t, s.Close())
	var again logged
	s = openLogged(t, dir, &again)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the second start read %d ended tasks' files", reads)
	}
	checkAll(t, s, dir, want)
	if strings.Contains(again.String(), "moved") {
		t.Errorf("the second start moved tasks:\n%s", again.String())
	}
	if info, err := os.Stat(filepath.Join(dir, "ended")); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("ended/: %v %v, want 0700", info.Mode(), err)
	}
	if info, err := os.Stat(filepath.Join(dir, "ended", indexName)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the index: %v %v, want 0600", info.Mode(), err)
	}
}

// A crash in the middle of a move leaves two copies of a task; the start
// keeps the newer by UpdatedAt, the archived one when they are equal,
// and removes the other.
func TestACrashInAMoveLeavesTwoCopiesTheStartKeepsOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for _, id := range []string{"ends", "equal", "retried"} {
		must(t, s.Create(ctx, state.NewTask(id, "p", t0)))
	}
	live := map[string][]byte{}
	for _, id := range []string{"ends", "equal"} {
		b, err := os.ReadFile(filepath.Join(dir, "tasks", id+".json"))
		must(t, err)
		live[id] = b
	}
	end := func(id string, at time.Time, p state.Phase) *state.Task {
		task, err := s.Task(ctx, id)
		must(t, err)
		must(t, task.Transition(state.PhaseClaimed, "", t0))
		must(t, task.Transition(p, "", at))
		saveTask(t, s, task)
		return task
	}
	ends := end("ends", t0.Add(time.Minute), state.PhaseCancelled)
	equal := end("equal", t0, state.PhaseCancelled)
	retried := end("retried", t0.Add(time.Minute), state.PhaseRecoverableFailed)
	archived, err := os.ReadFile(filepath.Join(dir, "ended", "retried.json"))
	must(t, err)
	retried = retried.Clone()
	must(t, retried.RetryByPerson(t0.Add(2*time.Minute)))
	saveTask(t, s, retried)
	must(t, s.Close())

	// The crashes: the file in tasks/ of the task that ended, not removed;
	// the file in ended/ of the task retried, not removed (and the index
	// line that says it left, not written).
	for id, b := range live {
		must(t, os.WriteFile(filepath.Join(dir, "tasks", id+".json"), b, 0o600))
	}
	must(t, os.WriteFile(filepath.Join(dir, "ended", "retried.json"), archived, 0o600))
	trimIndex(t, dir, func(l string) bool { return strings.Contains(l, `"id":"retried","live":true`) })

	s = open(t, dir)
	checkAll(t, s, dir, []*state.Task{ends, equal, retried})
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the start after the repair read %d ended tasks' files", reads)
	}
	checkAll(t, s, dir, []*state.Task{ends, equal, retried})
}

// trimIndex removes the index's lines drop selects.
func trimIndex(t *testing.T, dir string, drop func(string) bool) {
	t.Helper()
	path := filepath.Join(dir, "ended", indexName)
	b, err := os.ReadFile(path)
	must(t, err)
	var keep []string
	for l := range strings.Lines(string(b)) {
		if !drop(l) {
			keep = append(keep, l)
		}
	}
	must(t, os.WriteFile(path, []byte(strings.Join(keep, "")), 0o600))
}

// A torn last line of the index (a crash in the middle of an append) is
// cut off: the task it was for is read from its file once and indexed.
func TestATornIndexLineIsCutOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	want := fleetOf(t, s, 9)
	must(t, s.Close())
	path := filepath.Join(dir, "ended", indexName)
	b, err := os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, b[:len(b)-10], 0o600)) // the last task's line, torn

	s = open(t, dir)
	if reads := s.ArchiveReads(); reads != 1 {
		t.Errorf("the start read %d ended tasks' files, want the one whose line was torn", reads)
	}
	checkAll(t, s, dir, want)
	more := fleetFrom(t, s, 9, 12) // appended after the cut
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the next start read %d ended tasks' files", reads)
	}
	checkAll(t, s, dir, append(want, more...))
}

// A person's retry brings an ended task back: in memory, in tasks/, in
// the live lists; a restart agrees; ending again archives it again.
func TestARetriedTaskComesBackLive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	want := fleetOf(t, s, 9)
	task := want[6] // the third ended: recoverable_failed
	if task.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("fleet: %s is %s", task.ID, task.Phase)
	}
	line := []byte(`{"key":"k1"}`)
	must(t, s.Update(ctx, []string{task.ID}, func(tx store.Tx) error {
		// A late event of the ended task: its keys and events.
		tx.Append(task.ID, "k1", state.EventProgress, 1, line)
		return nil
	}))
	retried := task.Clone()
	must(t, retried.RetryByPerson(t0.Add(3*time.Hour)))
	saveTask(t, s, retried)
	want[6] = retried
	check := func(s *Store) {
		t.Helper()
		checkAll(t, s, dir, want)
		var live []string
		must(t, s.Live(ctx, func(t *state.Task) error { live = append(live, t.ID); return nil }))
		if !slices.Contains(live, task.ID) {
			t.Errorf("Live = %v, without the retried task", live)
		}
		must(t, s.Update(ctx, []string{task.ID}, func(tx store.Tx) error {
			ok, err := tx.Seen(task.ID, "k1")
			if !ok || err != nil {
				t.Errorf("Seen(k1) = %v, %v", ok, err)
			}
			return nil
		}))
		lines, _, err := s.Events(ctx, task.ID, 0, 10, 1<<20)
		must(t, err)
		if len(lines) != 1 || !bytes.Equal(lines[0].Line, line) {
			t.Errorf("Events = %v", lines)
		}
	}
	check(s)
	must(t, s.Close())
	s = open(t, dir)
	check(s)
	// It ends again: archived again.
	again := retried.Clone()
	must(t, again.Transition(state.PhaseCancelled, "", t0.Add(4*time.Hour)))
	saveTask(t, s, again)
	want[6] = again
	checkAll(t, s, dir, want)
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the start read %d ended tasks' files", reads)
	}
	checkAll(t, s, dir, want)
}

// A crash between the events appended to an ended task (a late
// completion) and its file: the index line that says check makes the
// start read that task and bring it up to date.
func TestALateEventOfAnEndedTaskIsRecovered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	want := fleetOf(t, s, 3)
	task := want[0]
	appendOne := func(key string, n int, title string) {
		must(t, s.Update(ctx, []string{task.ID}, func(tx store.Tx) error {
			c := tx.Task(task.ID)
			c.Title = title
			tx.Append(task.ID, key, state.EventProgress, n, []byte(`{"key":"`+key+`"}`))
			tx.Save(c)
			return nil
		}))
	}
	appendOne("first", 1, "")
	stale, err := os.ReadFile(filepath.Join(dir, "ended", task.ID+".json"))
	must(t, err)
	appendOne("late", 2, "late")
	must(t, s.Close())
	// The crash: the file from before, and no line after the check.
	must(t, os.WriteFile(filepath.Join(dir, "ended", task.ID+".json"), stale, 0o600))
	b, err := os.ReadFile(filepath.Join(dir, "ended", indexName))
	must(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	must(t, os.WriteFile(filepath.Join(dir, "ended", indexName), []byte(strings.Join(lines[:len(lines)-2], "")), 0o600))
	if !strings.Contains(lines[len(lines)-3], `"check":true`) {
		t.Fatalf("the index's line before the last: %s", lines[len(lines)-3])
	}

	s, err = Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	defer s.Close()
	var replayed []string
	must(t, s.Recover(func(t *state.Task, missed []Missed) error {
		for _, m := range missed {
			replayed = append(replayed, t.ID+":"+m.Key)
		}
		t.Title = "replayed"
		return nil
	}))
	if !slices.Equal(replayed, []string{task.ID + ":late"}) {
		t.Errorf("replayed %v", replayed)
	}
	got, err := s.Task(ctx, task.ID)
	must(t, err)
	if got.Title != "replayed" || got.Phase != task.Phase {
		t.Errorf("after the start: %q %s", got.Title, got.Phase)
	}
	checkAll(t, s, dir, want)
}

// A start reads no ended task's file: with them unreadable it opens,
// counts and lists the live ones; reading one fails, saying which.
func TestAStartReadsNoEndedTaskFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	want := fleetOf(t, s, 30)
	must(t, s.Close())
	ended, err := filepath.Glob(filepath.Join(dir, "ended", "*.json"))
	must(t, err)
	if len(ended) != 10 {
		t.Fatalf("%d files in ended/, want 10", len(ended))
	}
	for _, f := range ended {
		// Not a task: a read (even root's, which ignores chmod) fails.
		must(t, os.WriteFile(f, []byte("not a task"), 0o600))
		must(t, os.Chmod(f, 0))
	}
	s = open(t, dir)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the start read %d ended tasks' files", reads)
	}
	n, err := s.Count(ctx)
	must(t, err)
	if n[state.PhaseCompleted]+n[state.PhaseFailed]+n[state.PhaseRecoverableFailed] != 10 || n[state.PhaseClaimed] != 10 || n[state.PhaseQueued] != 10 {
		t.Errorf("Count = %v", n)
	}
	live, _, err := s.Tasks(ctx, store.Query{Live: true})
	must(t, err)
	if len(live) != 20 {
		t.Errorf("Tasks(live): %d", len(live))
	}
	done, _, err := s.Tasks(ctx, store.Query{Phase: state.PhaseQueued, Limit: 3})
	must(t, err)
	if len(done) != 3 {
		t.Errorf("Tasks(queued, 3): %d", len(done))
	}
	if _, err := s.Task(ctx, want[0].ID); err == nil || !strings.Contains(err.Error(), "read ended task "+want[0].ID) {
		t.Errorf("Task of an unreadable ended task: %v", err)
	}
	if _, _, err := s.Tasks(ctx, store.Query{}); err == nil || !strings.Contains(err.Error(), "read ended task") {
		t.Errorf("Tasks over unreadable ended tasks: %v", err)
	}
	if err := s.Update(ctx, []string{want[0].ID}, func(store.Tx) error { return nil }); err == nil {
		t.Error("Update of an unreadable ended task: no error")
	}
	// Prune needs no read.
	if n, err := s.Prune(ctx, t0.Add(24*time.Hour), 100); n != 10 || err != nil {
		t.Errorf("Prune = %d, %v", n, err)
	}
}

// The index's dead lines (of pruned tasks) go at the start that finds
// most of its lines dead: it is written anew with the live ones.
func TestTheIndexIsCompactedAtAStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for i := range 1200 {
		task := state.NewTask(fmt.Sprintf("e%04d", i), "p", t0)
		must(t, task.Transition(state.PhaseCancelled, "", t0.Add(time.Duration(i)*time.Second)))
		must(t, s.Create(ctx, task))
	}
	if n, err := s.Prune(ctx, t0.Add(1190*time.Second), 2000); n != 1190 || err != nil {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	must(t, s.Close())
	var log logged
	s = openLogged(t, dir, &log)
	defer s.Close()
	b, err := os.ReadFile(filepath.Join(dir, "ended", indexName))
	must(t, err)
	if n := strings.Count(string(b), "\n"); n != 10 || !strings.Contains(log.String(), "compacted") {
		t.Errorf("the index after a start has %d lines, want 10:\n%s", n, log.String())
	}
	all, _, err := s.Tasks(ctx, store.Query{})
	must(t, err)
	if len(all) != 10 || all[0].ID != "e1190" {
		t.Errorf("Tasks after the compaction: %d", len(all))
	}
}
