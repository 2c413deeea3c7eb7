package outboxview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/outbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seed makes a data directory whose outbox holds five records of two
// tasks: 1 and 2 sent, 3 dead, 4 failed once, 5 pending. The outbox is
// left open as its writer, as a running agent holds it.
func seed(t *testing.T) (string, *outbox.Outbox) {
	t.Helper()
	dataDir := t.TempDir()
	o, err := outbox.Open(Dir(dataDir), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	for i, task := range []string{"t-1", "t-1", "t-1", "t-2", "t-2"} {
		if _, err := o.Append(outbox.Record{Kind: outbox.KindProgress, TaskID: task, Attempt: 1, Payload: json.RawMessage(`{"n":` + string(rune('1'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{o.MarkSent(1, 2), o.MarkDead("terminal", 3), o.MarkFailed("connection refused", 4)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dataDir, o
}

// The table has a row a record, its state, and for a dead one why; the
// stats count each state; the summary line says what is left to send.
func TestItemsStatsAndSummary(t *testing.T) {
	t.Parallel()
	dataDir, _ := seed(t)
	snap, err := outbox.Inspect(Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteItems(&b, snap.Items, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "SEQ") || !strings.Contains(lines[3], "dead: terminal") || !strings.Contains(lines[4], "connection refused") {
		t.Errorf("items table:\n%s", b.String())
	}
	b.Reset()
	if err := WriteItems(&b, nil, time.Now()); err != nil || b.String() != "no records\n" {
		t.Errorf("no items: %q %v", b.String(), err)
	}
	b.Reset()
	if err := WriteStats(&b, snap.Stats, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pending:", "sent (not yet compacted):", "dead:", "last compaction:", "never", "next seq:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("stats lack %q:\n%s", want, b.String())
		}
	}
	if got := Summary(dataDir); got != "2 records pending, 1 dead" {
		t.Errorf("summary %q", got)
	}
	if got := Summary(t.TempDir()); got != "none yet (the agent has not run here)" {
		t.Errorf("summary of a data directory without an outbox: %q", got)
	}
}

// Tail gives the last n records, then, following, each one appended,
// through a compaction that renames a new file in, until its context
// ends.
func TestTailFollowsAppendsAndCompaction(t *testing.T) {
	t.Parallel()
	dataDir, o := seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan uint64, 16)
	done := make(chan error)
	go func() { done <- Tail(ctx, Dir(dataDir), 2, true, func(r outbox.Record) { got <- r.Seq }) }()
	expect := func(seq uint64) {
		t.Helper()
		if s := <-got; s != seq {
			t.Fatalf("got record %d, want %d", s, seq)
		}
	}
	expect(4)
	expect(5)
	if _, err := o.Append(outbox.Record{Kind: outbox.KindLog, TaskID: "t-3", Attempt: 1, Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	expect(6)
	if _, err := o.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Append(outbox.Record{Kind: outbox.KindLog, TaskID: "t-3", Attempt: 1, Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	expect(7)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var all []uint64
	if err := Tail(context.Background(), Dir(dataDir), 0, false, func(r outbox.Record) { all = append(all, r.Seq) }); err != nil || len(all) != 0 {
		t.Errorf("tail -n 0: %v %v", all, err)
	}
	if err := Tail(context.Background(), Dir(t.TempDir()), 1, false, func(outbox.Record) {}); !errors.Is(err, outbox.ErrNoOutbox) {
		t.Errorf("tail of no outbox: %v", err)
	}
}

// Compaction and purges by hand need the agent stopped and an outbox
// there; a purge takes the dead records older than its cutoff only, and
// compacts after.
func TestMaintenanceByHand(t *testing.T) {
	t.Parallel()
	dataDir, o := seed(t)
	if _, err := PurgeDead(dataDir, time.Time{}); err == nil || !strings.HasSuffix(err.Error(), "; stop the agent first") {
		t.Errorf("purge while the agent holds the outbox: %v", err)
	}
	if _, err := Compact(dataDir, nil); err == nil || !strings.HasSuffix(err.Error(), "; stop the agent first") {
		t.Errorf("compact while the agent holds the outbox: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := PurgeDead(dataDir, time.Now().Add(-time.Hour))
	if err != nil || res.Purged != 0 || res.Kept != 1 || res.Line(time.Hour) != "purged 0 dead records (0 B); 1 dead for less than 1h0m0s kept" {
		t.Errorf("purge of records dead for less than the cutoff: %+v %q %v", res, res.Line(time.Hour), err)
	}
	res, err = PurgeDead(dataDir, time.Time{})
	if err != nil || res.Purged != 1 || res.Compaction.BytesAfter == 0 || !strings.Contains(res.Line(0), "; outbox compacted from ") {
		t.Errorf("purge of every dead record: %+v %v", res, err)
	}
	cres, err := Compact(dataDir, nil)
	if err != nil || cres.Records != 2 || !strings.HasPrefix(CompactLine(cres), "compacted ") {
		t.Errorf("compact: %+v %v", cres, err)
	}
	empty := t.TempDir()
	for _, err := range []error{Require(empty), func() error { _, err := Compact(empty, nil); return err }()} {
		if err == nil || err.Error() != "no outbox in data directory "+empty+" (is --data-dir right?)" {
			t.Errorf("no outbox: %v", err)
		}
	}
}
