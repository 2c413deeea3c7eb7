package outbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestPendingFollowsTheCursor sends records from the front, kills some and
// leaves some pending in between, past the index's tidying, and checks each
// Pending against a model of what must be pending.
func TestPendingFollowsTheCursor(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{CompactMinBytes: 1 << 40})
	const n = 5000
	var model []uint64
	for i := range n {
		model = append(model, mustAppend(t, o, rec("t", KindProgress, i)))
	}
	for round := 0; len(model) > 0; round++ {
		want := slices.Clone(model)
		got, err := o.Pending(300, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != min(300, len(want)) {
			t.Fatalf("round %d: %d records, want %d", round, len(got), min(300, len(want)))
		}
		var sent, dead []uint64
		for i, r := range got {
			if r.Seq != want[i] {
				t.Fatalf("round %d: record %d is seq %d, want %d", round, i, r.Seq, want[i])
			}
			switch {
			case round%3 == 1 && i%7 == 0:
				dead = append(dead, r.Seq)
			case round%4 == 2 && i%5 == 0:
				// left pending: the cursor must not pass it
			default:
				sent = append(sent, r.Seq)
			}
		}
		if err := o.MarkSent(sent...); err != nil {
			t.Fatal(err)
		}
		if err := o.MarkDead("terminal", dead...); err != nil {
			t.Fatal(err)
		}
		model = slices.DeleteFunc(model, func(s uint64) bool { return slices.Contains(sent, s) || slices.Contains(dead, s) })
		if round%4 == 2 && len(model) > 0 {
			// What was left pending goes next round; the rest stays in order.
			if st := o.Stats(); st.Pending != len(model) {
				t.Fatalf("round %d: stats say %d pending, model %d", round, st.Pending, len(model))
			}
		}
		if round > n {
			t.Fatal("no progress")
		}
	}
	if st := o.Stats(); st.Pending != 0 || st.Dead == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPendingReadsEveryLayout: lines laid out as Append writes them are
// read without a parse, with their keys (made by the outbox or given);
// lines laid out otherwise (another writer's order of fields, escaped
// strings) are decoded in full, to the same records.
func TestPendingReadsEveryLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	want := []Record{
		{Kind: KindLog, TaskID: "t-1", Attempt: 2, Payload: json.RawMessage(`{"a":1}`)},
		{Kind: KindLog, TaskID: "t-1", Attempt: 2, Key: "given-key", Payload: json.RawMessage(`[1,2]`)},
		{Kind: KindPhase, TaskID: `t "quoted" <&>`, Key: "k\u2028é", Payload: json.RawMessage(`"s"`)},
	}
	for i := range want {
		want[i].Seq = mustAppend(t, o, want[i])
	}
	o.Close()
	// A line of another writer: seq first, a space in the payload.
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	other := Record{Seq: 10, Key: "other", Kind: KindLog, TaskID: "t-2", Attempt: 1, CreatedAt: time.Date(2026, 11, 21, 12, 0, 0, 5, time.UTC), Payload: json.RawMessage(`{"b": 2}`)}
	if _, err := f.Write(seal(fmt.Appendf(nil, `{"seq":10,"key":"other","kind":"log","task_id":"t-2","attempt":1,"created_at":%q,"payload":{"b": 2}`,
		other.CreatedAt.Format(TimeFormat)))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want = append(want, other)

	o = openT(t, dir, Options{})
	got, err := o.Pending(100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if w.Key == "" {
			w.Key = fmt.Sprintf("%s:%s:%s:%d", w.TaskID, w.Kind, g.CreatedAt.Format(TimeFormat), w.Seq)
		}
		if g.Seq != w.Seq || g.Key != w.Key || g.Kind != w.Kind || g.TaskID != w.TaskID || g.Attempt != w.Attempt ||
			string(g.Payload) != string(w.Payload) || g.CreatedAt.IsZero() {
			t.Errorf("record %d: got %+v\nwant %+v", i, g, w)
		}
	}
}

// TestPendingAfterSkipsTheBatchInFlight: the batch after a given seq is
// what Pending returns once the batch up to that seq is sent.
func TestPendingAfterSkipsTheBatchInFlight(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	for i := range 10 {
		mustAppend(t, o, rec("t", KindProgress, i))
	}
	seqs := func(recs []Record, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		var s []uint64
		for _, r := range recs {
			s = append(s, r.Seq)
		}
		return fmt.Sprint(s)
	}
	cases := []struct {
		after uint64
		want  string
	}{{0, "[1 2 3 4]"}, {4, "[5 6 7 8]"}, {8, "[9 10]"}, {10, "[]"}, {99, "[]"}}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.after), func(t *testing.T) {
			if got := seqs(o.PendingAfter(c.after, 4, 1<<20)); got != c.want {
				t.Errorf("PendingAfter(%d) = %s, want %s", c.after, got, c.want)
			}
		})
	}
	o.MarkSent(1, 2, 3, 4, 5)
	if got := seqs(o.PendingAfter(2, 4, 1<<20)); got != "[6 7 8 9]" {
		t.Errorf("after sends: %s", got)
	}
}
