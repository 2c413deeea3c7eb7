package filestore

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

func testNote(id string) store.Notification {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return store.Notification{ID: id, Target: "hook", Body: []byte(`{"id":"` + id + `"}`), Created: t0, Due: t0}
}

func dueIDs(t *testing.T, s *Store) []string {
	t.Helper()
	ns, err := s.DueNotifications(t.Context(), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	return ids
}

// The queue is notify/log.jsonl, in a directory of 0700, the file 0600.
func TestNotifyLogIsPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	must(t, s.Notify(t.Context(), testNote("n1")))
	must(t, s.Close())
	for path, want := range map[string]os.FileMode{filepath.Join(dir, "notify"): 0o700, filepath.Join(dir, "notify", "log.jsonl"): 0o600} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s is %o, want %o", path, got, want)
		}
	}
}

// A torn last line (a crash in the middle of an append) and a damaged
// line are skipped, each with a warning, never a failed start; the log is
// written anew without them, and appends after it are read back.
func TestNotifyLogSkipsTornAndDamagedLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	must(t, s.Notify(t.Context(), testNote("n1"), testNote("n2")))
	must(t, s.Close())
	path := filepath.Join(dir, "notify", "log.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = append([]byte("{not json\n"), b...)
	b = append(b, `{"op":"add","n":{"id":"torn","tar`...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	var logged bytes.Buffer
	s, err = Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatalf("Open with a damaged notification log: %v", err)
	}
	must(t, s.Recover(func(*state.Task, []Missed) error { return nil }))
	if got := strings.Count(logged.String(), "level=WARN"); got != 2 {
		t.Errorf("%d warnings, want 2 (a damaged line, a torn one):\n%s", got, logged.String())
	}
	if got := dueIDs(t, s); fmt.Sprint(got) != "[n1 n2]" {
		t.Errorf("records after the start: %v, want [n1 n2]", got)
	}
	if got := lines(t, path); got != 2 {
		t.Errorf("the log holds %d lines after the start, want 2 (written anew)", got)
	}
	must(t, s.Notify(t.Context(), testNote("n3")))
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	if got := dueIDs(t, s); fmt.Sprint(got) != "[n1 n2 n3]" {
		t.Errorf("records after a second start: %v, want [n1 n2 n3]", got)
	}
}

// The log does not grow with the records done: it is written anew when
// dead lines outnumber the live records by far, and at the start.
func TestNotifyLogCompacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	must(t, s.Notify(t.Context(), testNote("kept")))
	for i := range 3 * compactAt {
		id := fmt.Sprintf("n%d", i)
		must(t, s.Notify(t.Context(), testNote(id)))
		must(t, s.NotificationRetry(t.Context(), id, "hook", time.Now(), "refused"))
		must(t, s.NotificationDone(t.Context(), id, "hook"))
	}
	path := filepath.Join(dir, "notify", "log.jsonl")
	if got := lines(t, path); got > 2+compactAt+3 {
		t.Errorf("the log holds %d lines for 1 record", got)
	}
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	if got := lines(t, path); got != 1 {
		t.Errorf("the log holds %d lines after a start, want 1", got)
	}
	if got := dueIDs(t, s); fmt.Sprint(got) != "[kept]" {
		t.Errorf("records: %v, want [kept]", got)
	}
}

// The gates and the fold records outlive the log's compactions, while
// running and at a start: the log written anew holds one gates line.
func TestNotifyLogCompactionKeepsTheGates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	must(t, s.Notify(t.Context(), testNote("held")))
	until := time.Date(2025, 3, 1, 13, 0, 0, 0, time.UTC)
	g := store.NotifyGate{Target: "hook", Key: "repeat/agent/agent.unhealthy/a1", Until: until, Sent: 1}
	must(t, s.FoldNotification(t.Context(), testNote("held"), g, func(n *store.Notification) { n.Gate, n.Due = g.Key, until }))
	must(t, s.PutNotifyGates(t.Context(), store.NotifyGate{Target: "hook", Key: "target", Until: until, Sent: 5}))
	for i := range 3 * compactAt {
		id := fmt.Sprintf("n%d", i)
		must(t, s.Notify(t.Context(), testNote(id)))
		must(t, s.NotificationDone(t.Context(), id, "hook"))
	}
	path := filepath.Join(dir, "notify", "log.jsonl")
	check := func(when string) {
		t.Helper()
		got, err := s.NotifyGates(t.Context(), "hook", []string{g.Key, "target"})
		must(t, err)
		if len(got) != 2 || got[0].Held != "held" || got[0].Rev != 1 || got[1].Sent != 5 || got[1].Rev != 1 {
			t.Errorf("%s: gates %+v", when, got)
		}
		ns, err := s.DueNotifications(t.Context(), until, 10)
		must(t, err)
		if len(ns) != 1 || ns[0].ID != "held" || ns[0].Gate != g.Key || !ns[0].Due.Equal(until) {
			t.Errorf("%s: records %+v, want the one held", when, ns)
		}
	}
	check("after compactions while running")
	must(t, s.Close())
	s = open(t, dir)
	defer s.Close()
	check("after a start")
	if got := lines(t, path); got != 2 {
		t.Errorf("the log holds %d lines after a start, want 2 (the record, the gates)", got)
	}
}
