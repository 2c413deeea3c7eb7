package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

// seedDead makes a data directory whose outbox holds two pending records
// and two dead ones: seq 1 marked dead ten days ago, seq 3 just now.
func seedDead(t *testing.T) string {
	t.Helper()
	dataDir := t.TempDir()
	now := time.Now().Add(-10 * 24 * time.Hour)
	o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for range 4 {
		if _, err := o.Append(outbox.Record{Kind: outbox.KindPhase, TaskID: "t-1", Attempt: 1, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	must(t, o.MarkDead("terminal", 1))
	now = time.Now()
	must(t, o.MarkDead("terminal", 3))
	return dataDir
}

func TestOutboxPurgeDead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		args      []string
		wantOut   string
		wantItems string // seq:state after the purge
	}{
		{"every dead record", nil, "purged 2 dead records", "2:pending,4:pending"},
		{"only the old ones", []string{"--older-than", "72h"}, "purged 1 dead records (", "2:pending,3:dead,4:pending"},
		{"none old enough", []string{"--older-than", "720h"}, "purged 0 dead records (0 B); 2 dead for less than 720h0m0s kept", "1:dead,2:pending,3:dead,4:pending"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := seedDead(t)
			r := runAgent(t, append([]string{"outbox", "purge", "--dead", "--data-dir", dataDir}, tc.args...)...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, tc.wantOut) || strings.Count(r.stdout, "\n") != 1 {
				t.Fatalf("purge: %+v, want a line starting %q", r, tc.wantOut)
			}
			r = runAgent(t, "outbox", "ls", "--json", "--data-dir", dataDir)
			var items []outbox.Item
			if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
				t.Fatalf("ls --json: %v: %s", err, r.stdout)
			}
			var got []string
			for _, it := range items {
				got = append(got, strconv.FormatUint(it.Seq, 10)+":"+string(it.State))
			}
			if strings.Join(got, ",") != tc.wantItems {
				t.Errorf("after purge: %v, want %s", got, tc.wantItems)
			}
		})
	}
}

func TestOutboxPurgeJSON(t *testing.T) {
	t.Parallel()
	dataDir := seedDead(t)
	r := runAgent(t, "outbox", "purge", "--dead", "--json", "--data-dir", dataDir)
	var res struct {
		Purged, Kept int
		Bytes        int64
		Compaction   outbox.CompactResult
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("purge --json: %v: %+v", err, r)
	}
	if res.Purged != 2 || res.Kept != 0 || res.Bytes <= 0 || res.Compaction.BytesAfter >= res.Compaction.BytesBefore {
		t.Errorf("purge --json = %+v", res)
	}
}

func TestOutboxPurgeRefuses(t *testing.T) {
	t.Parallel()
	dataDir := seedDead(t)
	t.Run("without --dead", func(t *testing.T) {
		wantOneLineError(t, runAgent(t, "outbox", "purge", "--data-dir", dataDir), 2, "--dead")
	})
	t.Run("a negative age", func(t *testing.T) {
		wantOneLineError(t, runAgent(t, "outbox", "purge", "--dead", "--older-than", "-1h", "--data-dir", dataDir), 2, "--older-than")
	})
	t.Run("no outbox", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing")
		wantOneLineError(t, runAgent(t, "outbox", "purge", "--dead", "--data-dir", missing), 1, "no outbox")
	})
	t.Run("while the agent runs", func(t *testing.T) {
		o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		wantOneLineError(t, runAgent(t, "outbox", "purge", "--dead", "--data-dir", dataDir), 1, "stop the agent first")
	})
	// Nothing was lost to the refusals.
	snap, err := outbox.Inspect(outboxview.Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stats.Dead != 2 || snap.Stats.Pending != 2 {
		t.Errorf("after refusals: %d dead, %d pending", snap.Stats.Dead, snap.Stats.Pending)
	}
}
