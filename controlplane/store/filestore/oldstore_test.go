package filestore

import (
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// copyDir copies the fixture directory src into dst, as a store's own:
// directories 0700, files 0600.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	must(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	}))
}

// A store written when the task carried the store's bookkeeping
// (testdata/v1-store: written by that code, a task "live" and an ended
// one "done", one event each; their files say events_applied and
// events_bytes among the task's keys) opens with this code: a crash's
// missed event is found and applied again with its seq, each task's
// LastSeq is what its file says, and the next append goes on from it.
func TestAStoreWrittenWhenTheTaskKeptTheBookkeepingOpens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyDir(t, filepath.Join("testdata", "v1-store"), dir)
	// A crash after a second event of "live" was stored, before its task
	// file was saved.
	at := time.Date(2026, 11, 1, 12, 1, 0, 0, time.UTC)
	line, err := json.Marshal(api.StoredEvent{Event: api.Event{Key: "k2", Kind: state.EventProgress, TaskID: "live", Attempt: 1, LeaseID: "l1",
		CreatedAt: at, Payload: json.RawMessage(`{"message":"two"}`)}, AgentID: "agent-1", ReceivedAt: at})
	must(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "events", "live.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write(append(line, '\n'))
	must(t, err)
	must(t, f.Close())

	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, err)
	var replayed []Missed
	must(t, s.Recover(func(task *state.Task, missed []Missed) error {
		if task.ID != "live" {
			t.Errorf("Recover handed task %s, which missed nothing", task.ID)
		}
		replayed = append(replayed, missed...)
		task.Progress.Message = "two"
		return nil
	}))
	if len(replayed) != 1 || replayed[0].Key != "k2" || replayed[0].Seq != 2 {
		t.Fatalf("missed after the crash: %+v, want k2 as seq 2", replayed)
	}
	ctx := t.Context()
	for id, want := range map[string]int{"live": 2, "done": 1} {
		must(t, s.Update(ctx, []string{id}, func(tx store.Tx) error {
			if got := tx.LastSeq(id); got != want {
				t.Errorf("LastSeq(%s) = %d, want %d", id, got, want)
			}
			seq := tx.LastSeq(id) + 1
			key := "k" + string(rune('0'+seq))
			tx.Append(id, key, state.EventProgress, seq, []byte(`{"key":"`+key+`"}`))
			tx.Save(tx.Task(id))
			return nil
		}))
	}
	must(t, s.Close())

	s = open(t, dir)
	defer s.Close()
	if task, err := s.Task(ctx, "live"); err != nil || task == nil || task.Progress.Message != "two" {
		t.Errorf("Task(live) after its recovery: %+v, %v", task, err)
	}
	for id, want := range map[string]int{"live": 3, "done": 2} {
		must(t, s.Update(ctx, []string{id}, func(tx store.Tx) error {
			if got := tx.LastSeq(id); got != want {
				t.Errorf("LastSeq(%s) after a reopen = %d, want %d", id, got, want)
			}
			return nil
		}))
		lines, _, err := s.Events(ctx, id, 0, 10, 1<<20)
		must(t, err)
		if len(lines) != want || lines[want-1].Seq != want {
			t.Errorf("Events(%s): %d lines, want %d", id, len(lines), want)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "ended", "done.json"))
	must(t, err)
	var file struct {
		EventsApplied *int `json:"events_applied"`
	}
	must(t, json.Unmarshal(b, &file))
	if file.EventsApplied == nil || *file.EventsApplied != 2 {
		t.Errorf("done's file says events_applied %v, want 2", file.EventsApplied)
	}
}
