package state

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func copyFixtures(t *testing.T, dst string, names ...string) {
	t.Helper()
	for _, n := range names {
		src, err := os.Open(filepath.Join("..", "testdata", "state", n))
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(n)
		out, err := os.Create(filepath.Join(dst, base))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(out, src)
		src.Close()
		out.Close()
	}
}

func TestStoreRoundTripIsPrivateAndVersioned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks")
	s, err := OpenStore(dir)
	must(t, err)
	task := claimed(t)
	task.StartFirstAttempt("a1", []string{"gpt-5"}, t0)
	must(t, task.BindSession("a1", "s1"))
	must(t, task.Observe("a1", Activity{Output: true, Progress: &Progress{Message: "half", Percent: 50}}, t0.Add(time.Second)))
	must(t, s.Save(task))
	got, err := s.Load("t-1")
	must(t, err)
	if got.Current().SessionID != "s1" || !got.Current().Facts.Output || got.Progress.Percent != 50 || got.Phase != PhaseExecutorStarting {
		t.Errorf("loaded %+v", got)
	}
	raw, _ := os.ReadFile(s.Path("t-1"))
	var m map[string]any
	json.Unmarshal(raw, &m)
	if m["schema_version"] != float64(SchemaVersion) {
		t.Errorf("schema_version %v", m["schema_version"])
	}
	for _, f := range []string{"phase", "last_progress_at", "recoverable", "current_attempt_id", "attempts"} {
		if _, ok := m[f]; !ok {
			t.Errorf("file lacks %q", f)
		}
	}
	info, _ := os.Stat(s.Path("t-1"))
	dinfo, _ := os.Stat(dir)
	if info.Mode().Perm() != 0o600 || dinfo.Mode().Perm() != 0o700 {
		t.Errorf("modes: file %v, dir %v", info.Mode().Perm(), dinfo.Mode().Perm())
	}
	// Saving again replaces the file whole and leaves no temporary behind.
	must(t, task.Transition(PhaseCancelled, "", t0))
	must(t, s.Save(task))
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files after two saves", len(entries))
	}
}

func TestLegacyFilesAreNormalized(t *testing.T) {
	cases := map[string]Phase{
		"queued": PhaseQueued, "running": PhaseClaimed, "completed": PhaseCompleted, "failed": PhaseFailed,
		"cancelled": PhaseCancelled, "canceled": PhaseCancelled, "timed_out": PhaseTimedOut, "expired": PhaseExpired,
		"recoverable_failed": PhaseRecoverableFailed,
	}
	dir := t.TempDir()
	for status := range cases {
		copyFixtures(t, dir, "legacy/old-"+status+".json")
	}
	s, _ := OpenStore(dir)
	tasks, err := s.LoadAll()
	must(t, err)
	if len(tasks) != len(cases) {
		t.Fatalf("loaded %d of %d", len(tasks), len(cases))
	}
	for _, task := range tasks {
		status := strings.TrimPrefix(task.ID, "old-")
		if task.Phase != cases[status] {
			t.Errorf("status %s became phase %s, want %s", status, task.Phase, cases[status])
		}
		if task.Prompt != "fix the flaky test" || task.CreatedAt.IsZero() {
			t.Errorf("%s lost fields: %+v", status, task)
		}
		if status == "failed" && task.PhaseReason != "exit status 1" {
			t.Errorf("failed: reason %q", task.PhaseReason)
		}
		if status == "running" && task.LastProgressAt.IsZero() {
			t.Errorf("running: no last progress, the watchdog could not judge it")
		}
		// A normalized task saves in the current format and loads again.
		must(t, s.Save(task))
		again, err := s.Load(task.ID)
		if err != nil || again.Phase != task.Phase {
			t.Errorf("%s: reload %v %v", status, err, again)
		}
	}
}

func TestBadFilesAreNamedAndTheRestStillLoad(t *testing.T) {
	dir := t.TempDir()
	bad := []string{"garbage", "truncated", "unknown-status", "future-schema", "wrong-id", "broken-invariant"}
	for _, b := range bad {
		copyFixtures(t, dir, "bad/"+b+".json")
	}
	copyFixtures(t, dir, "legacy/old-queued.json", "legacy/old-running.json")
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a task"), 0o600)
	s, _ := OpenStore(dir)
	tasks, err := s.LoadAll()
	if len(tasks) != 2 {
		t.Errorf("loaded %d good tasks, want 2", len(tasks))
	}
	if err == nil {
		t.Fatal("no error for the bad files")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(bad) {
		t.Errorf("%d errors for %d bad files:\n%v", len(lines), len(bad), err)
	}
	for _, b := range bad {
		if !strings.Contains(err.Error(), filepath.Join(dir, b+".json")) {
			t.Errorf("no error names %s.json:\n%v", b, err)
		}
	}
	for want, in := range map[string]string{"schema version 7": "future-schema", `holds task "someone-else"`: "wrong-id", `unknown status "paused"`: "unknown-status"} {
		if _, err := s.Load(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", in, err, want)
		}
	}
}

func TestTaskIDsCannotEscapeTheStore(t *testing.T) {
	s, _ := OpenStore(t.TempDir())
	for _, id := range []string{"", "..", ".", "../etc/passwd", "a/b", `a\b`, ".hidden", "-flag", "a b", strings.Repeat("x", 129), "t\x00"} {
		if err := ValidateID(id); !errors.Is(err, ErrBadID) {
			t.Errorf("%q accepted", id)
		}
		if _, err := s.Load(id); !errors.Is(err, ErrBadID) {
			t.Errorf("Load(%q): %v", id, err)
		}
		task := NewTask(id, "p", t0)
		if err := s.Save(task); !errors.Is(err, ErrBadID) {
			t.Errorf("Save(%q): %v", id, err)
		}
	}
	for _, id := range []string{"t-1", "T_2.retry", "0abc", "01JD3F9ZQ"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
}

func TestSaveRefusesABrokenTask(t *testing.T) {
	s, _ := OpenStore(t.TempDir())
	task := claimed(t)
	task.StartFirstAttempt("a1", nil, t0)
	task.CurrentAttemptID = "forged"
	if err := s.Save(task); err == nil {
		t.Error("a task whose projection is wrong was saved")
	}
}

// A FIFO or a symbolic link planted in tasks/ is skipped with an error
// naming it: loading never blocks and never follows the link.
func TestStoreSkipsWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	good := NewTask("t-good", "x", time.Now())
	if err := st.Save(good); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "t-fifo.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := st.Save(NewTask("elsewhere", "x", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "elsewhere.json"), secret); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "t-link.json")); err != nil {
		t.Fatal(err)
	}
	tasks, err := st.LoadAll()
	if len(tasks) != 1 || tasks[0].ID != "t-good" {
		t.Fatalf("loaded %d tasks, want only t-good", len(tasks))
	}
	if err == nil || !strings.Contains(err.Error(), "t-fifo.json") || !strings.Contains(err.Error(), "t-link.json") {
		t.Fatalf("error %v does not name the skipped files", err)
	}
	if _, err := st.Load("t-fifo"); err == nil {
		t.Fatal("Load read a FIFO")
	}
}

// A store of the control plane keeps its own keys beside the task's in
// the task's file (SaveWith, LoadWith, LoadAllWith): the task's keys are
// written as Save writes them, the task reads as ever, and keys that are
// not an object are refused.
func TestStoreKeepsACallersOwnKeysBesideTheTask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks")
	s, err := OpenStore(dir)
	must(t, err)
	task := claimed(t)
	must(t, s.Save(task))
	plain, err := os.ReadFile(s.Path(task.ID))
	must(t, err)
	type books struct {
		Applied int   `json:"events_applied"`
		Bytes   int64 `json:"events_bytes,omitempty"`
	}
	must(t, s.SaveWith(task, books{Applied: 3, Bytes: 99}))
	with, err := os.ReadFile(s.Path(task.ID))
	must(t, err)
	want := strings.TrimSuffix(string(plain), "\n}\n") + ",\n  \"events_applied\": 3,\n  \"events_bytes\": 99\n}\n"
	if string(with) != want {
		t.Errorf("the file with the keys beside the task's:\n%s\nwant\n%s", with, want)
	}
	var b books
	got, err := s.LoadWith(task.ID, &b)
	must(t, err)
	if b != (books{3, 99}) || got.ID != task.ID || got.Phase != task.Phase {
		t.Errorf("LoadWith: %+v, %+v", got, b)
	}
	all := map[string]*books{}
	list, err := s.LoadAllWith(func(t *Task) any { all[t.ID] = new(books); return all[t.ID] })
	must(t, err)
	if len(list) != 1 || all[task.ID] == nil || *all[task.ID] != (books{3, 99}) {
		t.Errorf("LoadAllWith: %d tasks, %+v", len(list), all)
	}
	if back, err := s.Load(task.ID); err != nil || back.ID != task.ID {
		t.Errorf("Load of a file with keys of a store's own: %v", err)
	}
	// No keys of its own: the file Save writes.
	must(t, s.SaveWith(task, struct {
		Applied int `json:"events_applied,omitempty"`
	}{}))
	if again, _ := os.ReadFile(s.Path(task.ID)); string(again) != string(plain) {
		t.Errorf("SaveWith of no keys:\n%s\nwant\n%s", again, plain)
	}
	if err := s.SaveWith(task, 5); err == nil || !strings.Contains(err.Error(), "not an object") {
		t.Errorf("SaveWith of a number: %v", err)
	}
}
