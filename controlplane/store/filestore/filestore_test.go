package filestore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// The size of a task's events file and the count of its events are the
// store's (the task has no field for them): written into the task file,
// where a start reads them; a Save of the task keeps them.
func TestEventsBytesIsTheStoresOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	must(t, s.Create(ctx, state.NewTask("a", "p", t0)))
	line := []byte(`{"key":"k1","n":1}`)
	must(t, s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		task := tx.Task("a")
		if n := tx.LastSeq("a"); n != 0 {
			t.Errorf("a new task's LastSeq: %d", n)
		}
		tx.Append("a", "k1", state.EventProgress, 1, line)
		if n := tx.LastSeq("a"); n != 1 {
			t.Errorf("LastSeq after an append: %d", n)
		}
		tx.Save(task)
		return nil
	}))
	must(t, s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		task := tx.Task("a")
		task.Title = "renamed"
		if n := tx.LastSeq("a"); n != 1 {
			t.Errorf("LastSeq in the next transaction: %d", n)
		}
		tx.Save(task)
		return nil
	}))
	b, err := os.ReadFile(filepath.Join(dir, "tasks", "a.json"))
	must(t, err)
	var file struct {
		EventsApplied *int  `json:"events_applied"`
		EventsBytes   int64 `json:"events_bytes"`
	}
	must(t, json.Unmarshal(b, &file))
	if want := int64(len(line) + 1); file.EventsBytes != want || file.EventsApplied == nil || *file.EventsApplied != 1 {
		t.Errorf("the task file says events_bytes %d, events_applied %v, want %d and 1:\n%s", file.EventsBytes, file.EventsApplied, want, b)
	}
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	lines, _, err := s.Events(ctx, "a", 0, 10, 1<<20)
	must(t, err)
	if len(lines) != 1 || string(lines[0].Line) != string(line) {
		t.Errorf("Events after a reopen: %+v", lines)
	}
}

// The cut keys of a commit whose task file a crash kept from being saved
// go with it: sent again, those events are counted again. Those of the
// commits before stay.
func TestCutKeysOfAnUnsavedCommitGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	must(t, s.Create(ctx, state.NewTask("a", "p", t0)))
	commit := func(n int, key, cut string) {
		must(t, s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
			tx.Append("a", key, state.EventProgress, n, []byte(`{"key":"`+key+`"}`))
			tx.Append("a", cut, state.EventLog, 0, nil)
			tx.Save(tx.Task("a"))
			return nil
		}))
	}
	commit(1, "k1", "cut1")
	taskFile := filepath.Join(dir, "tasks", "a.json")
	stale, err := os.ReadFile(taskFile)
	must(t, err)
	commit(2, "k2", "cut2")
	must(t, s.Close())
	must(t, os.WriteFile(taskFile, stale, 0o600)) // the crash: the task file from before the second commit
	s = open(t, dir)
	defer s.Close()
	for key, want := range map[string]bool{"k1": true, "cut1": true, "k2": true, "cut2": false} {
		var got bool
		must(t, s.Update(ctx, []string{"a"}, func(tx store.Tx) (err error) {
			got, err = tx.Seen("a", key)
			return err
		}))
		if got != want {
			t.Errorf("Seen(%s) after the crash = %v, want %v", key, got, want)
		}
	}
}

// Transactions on different tasks do not wait for each other: an Update
// of b runs to its end while an Update of a is in its function.
func TestUpdatesOfDifferentTasksRunSideBySide(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	must(t, s.Create(ctx, state.NewTask("a", "p", t0)))
	must(t, s.Create(ctx, state.NewTask("b", "p", t0)))
	must(t, s.Update(ctx, []string{"a"}, func(store.Tx) error {
		done := make(chan error, 1)
		go func() {
			done <- s.Update(ctx, []string{"b"}, func(tx store.Tx) error {
				task := tx.Task("b")
				task.Title = "b's"
				tx.Save(task)
				return nil
			})
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Error("an Update of b waited 10s for an Update of a")
			return nil
		}
	}))
}

// A heartbeat writes no file of its own: the agents' records are written
// together, at most every agentsEvery and at Close. A crash (no Close)
// loses at most the records of the last agentsEvery.
func TestAgentsRecordsAreWrittenTogetherNowAndThen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := t0
	s, err := Open(dir, Options{Now: func() time.Time { return now }})
	must(t, err)
	ctx := t.Context()
	onDisk := func() []string {
		t.Helper()
		var m map[string]store.Agent
		b, err := os.ReadFile(filepath.Join(dir, "agents-seen.json"))
		must(t, err)
		must(t, json.Unmarshal(b, &m))
		var ids []string
		for id := range m {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	put := func(id string) {
		t.Helper()
		must(t, s.PutAgent(ctx, store.Agent{View: api.AgentView{AgentID: id, LastHeartbeat: now}}))
	}
	put("a") // the first: written
	now = now.Add(agentsEvery - time.Second)
	put("b") // within the interval: in memory only
	if got := onDisk(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("on disk after two heartbeats within %s: %v, want [a]", agentsEvery, got)
	}
	now = now.Add(time.Second)
	put("c")
	if got := onDisk(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("on disk after %s: %v, want [a b c]", agentsEvery, got)
	}
	put("d")
	must(t, s.Close())
	if got := onDisk(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("on disk after Close: %v, want [a b c d]", got)
	}
	if info, err := os.Stat(filepath.Join(dir, "agents-seen.json")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("agents-seen.json: %v %v, want 0600", info.Mode(), err)
	}
}

// A transaction knows it holds a completion (the crash points' "complete")
// by the kind it is handed, never by what an event's bytes hold: a line
// that spells a completion's kind in a progress event is none.
func TestACompletionIsKnownByItsKindNotItsBytes(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	defer s.Close()
	ctx := t.Context()
	must(t, s.Create(ctx, state.NewTask("a", "p", t0)))
	must(t, s.Update(ctx, []string{"a"}, func(stx store.Tx) error {
		x := stx.(*tx)
		x.Append("a", "k1", state.EventProgress, 1, []byte(`{"key":"k1","kind":"complete"}`))
		if x.complete {
			t.Error("a progress event whose bytes spell a completion's kind is taken for a completion")
		}
		x.Append("a", "k2", state.EventComplete, 2, []byte(`{"key":"k2"}`))
		if !x.complete {
			t.Error("a completion is not known as one")
		}
		return nil
	}))
}
