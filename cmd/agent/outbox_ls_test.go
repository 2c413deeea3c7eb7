package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func TestOutboxLsTable(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	r := runAgent(t, "outbox", "ls", "--data-dir", dataDir)
	if r.code != 0 {
		t.Fatalf("ls: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("want a header and 5 rows:\n%s", r.stdout)
	}
	// Columns are aligned: every row's STATE starts where the header's does.
	col := strings.Index(lines[0], "STATE")
	wantStates := []string{"sent", "sent", "dead", "pending", "pending"}
	for i, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], wantStates[i]) {
			t.Errorf("row %d: state column %q, want %q", i+1, l[col:], wantStates[i])
		}
		if !strings.Contains(l, " ago ") {
			t.Errorf("row %d has no age: %q", i+1, l)
		}
	}
	if !strings.Contains(lines[3], "dead: terminal") || !strings.Contains(lines[4], "connection refused") {
		t.Errorf("dead reason or last error missing:\n%s", r.stdout)
	}
}

func TestOutboxLsFiltersAndJSON(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	cases := []struct {
		args []string
		seqs []uint64
	}{
		{[]string{"--pending"}, []uint64{4, 5}},
		{[]string{"--sent"}, []uint64{1, 2}},
		{[]string{"--dead"}, []uint64{3}},
		{[]string{"--dead", "--pending"}, []uint64{3, 4, 5}},
		{[]string{"--task", "t-2"}, []uint64{4, 5}},
		{[]string{"--kind", "progress"}, []uint64{2, 5}},
		{[]string{"--limit", "2"}, []uint64{1, 2}},
		{[]string{"--task", "none"}, nil},
	}
	for _, c := range cases {
		r := runAgent(t, append([]string{"outbox", "ls", "--json", "--data-dir", dataDir}, c.args...)...)
		var items []outbox.Item
		if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || r.code != 0 {
			t.Fatalf("%v: %v %+v", c.args, err, r)
		}
		var seqs []uint64
		for _, it := range items {
			seqs = append(seqs, it.Seq)
		}
		if len(seqs) != len(c.seqs) || (len(seqs) > 0 && !equalSeqs(seqs, c.seqs)) {
			t.Errorf("%v: seqs %v, want %v", c.args, seqs, c.seqs)
		}
	}
	// The JSON field names are the documented, stable ones.
	r := runAgent(t, "outbox", "ls", "--json", "--dead", "--data-dir", dataDir)
	var raw []map[string]any
	json.Unmarshal([]byte(r.stdout), &raw)
	for _, f := range []string{"seq", "key", "kind", "task_id", "attempt", "created_at", "state", "send_attempts", "dead_reason", "bytes"} {
		if _, ok := raw[0][f]; !ok {
			t.Errorf("ls --json lacks %q: %s", f, r.stdout)
		}
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOutboxLsExplainsABadDataDir(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	wantOneLineError(t, runAgent(t, "outbox", "ls", "--data-dir", missing), 1, "no outbox in data directory "+missing)

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	wantOneLineError(t, runAgent(t, "outbox", "ls", "--data-dir", file), 1, "not a directory")

	// An outbox file that cannot be read (a directory in its place stands
	// in for wrong permissions, which root, running tests, ignores).
	dataDir := t.TempDir()
	os.MkdirAll(filepath.Join(outboxview.Dir(dataDir), outbox.FileName), 0o700)
	wantOneLineError(t, runAgent(t, "outbox", "ls", "--data-dir", dataDir), 1, "outbox.jsonl")
}

func TestOutboxLsWorksWhileAWriterHoldsTheLock(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	r := runAgent(t, "outbox", "ls", "--pending", "--data-dir", dataDir)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 {
		t.Errorf("ls while locked: %+v", r)
	}
}
