package outbox

import (
	"maps"
	"testing"
	"time"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestPurgeDead(t *testing.T) {
	t.Parallel()
	day0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		cutoff     time.Time
		wantPurged []uint64 // of the dead seqs 1 (died day 0) and 3 (died day 5)
	}{
		{"zero cutoff purges every dead record", time.Time{}, []uint64{1, 3}},
		{"only those dead before the cutoff", day0.Add(72 * time.Hour), []uint64{1}},
		{"none dead before the cutoff", day0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := &clock{day0}
			o := openT(t, dir, Options{Now: clk.now})
			for i := range 4 {
				mustAppend(t, o, rec("t-1", KindPhase, i))
			}
			if err := o.MarkDead("terminal", 1); err != nil {
				t.Fatal(err)
			}
			clk.t = day0.Add(5 * 24 * time.Hour)
			if err := o.MarkDead("terminal", 3); err != nil {
				t.Fatal(err)
			}
			// A compaction on day 9 must not make the dead records young.
			clk.t = day0.Add(9 * 24 * time.Hour)
			if _, err := o.Compact(nil); err != nil {
				t.Fatal(err)
			}
			o.Close()
			o = openT(t, dir, Options{Now: clk.now})

			res, err := o.PurgeDead(tc.cutoff)
			if err != nil {
				t.Fatal(err)
			}
			if res.Purged != len(tc.wantPurged) || res.Kept != 2-len(tc.wantPurged) {
				t.Errorf("PurgeDead = %+v, want %d purged, %d kept", res, len(tc.wantPurged), 2-len(tc.wantPurged))
			}
			if res.Purged > 0 && res.Bytes <= 0 {
				t.Errorf("purged %d records of %d bytes", res.Purged, res.Bytes)
			}
			if got := pendingSeqs(t, o); len(got) != 2 || got[0] != 2 || got[1] != 4 {
				t.Errorf("pending after purge = %v, want [2 4]", got)
			}
			if st := o.Stats(); st.Dead != 2-len(tc.wantPurged) {
				t.Errorf("dead after purge = %d", st.Dead)
			}

			// What a reader sees, before and after the next compaction and
			// a reopen: purged records are gone, the others untouched.
			o.Close()
			for _, step := range []string{"reopened", "compacted"} {
				o = openT(t, dir, Options{Now: clk.now})
				if step == "compacted" {
					if _, err := o.Compact(nil); err != nil {
						t.Fatal(err)
					}
				}
				if st := o.Stats(); st.Dead != 2-len(tc.wantPurged) || st.Pending != 2 {
					t.Errorf("%s: pending %d dead %d", step, st.Pending, st.Dead)
				}
				o.Close()
				snap, err := Inspect(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range snap.Items {
					purged := false
					for _, s := range tc.wantPurged {
						purged = purged || it.Seq == s
					}
					if purged && it.State != StateSent {
						t.Errorf("%s: purged seq %d is %s", step, it.Seq, it.State)
					}
					if step == "compacted" && purged {
						t.Errorf("compacted: purged seq %d still in the file", it.Seq)
					}
				}
			}
		})
	}
}

func TestPendingByTask(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	for i, task := range []string{"a", "a", "b", "c"} {
		mustAppend(t, o, rec(task, KindProgress, i))
	}
	if err := o.MarkSent(3); err != nil { // b's only record
		t.Fatal(err)
	}
	if err := o.MarkDead("terminal", 4); err != nil { // c's: it will never be sent
		t.Fatal(err)
	}
	if got, want := o.PendingByTask(), map[string]int{"a": 2}; !maps.Equal(got, want) {
		t.Errorf("PendingByTask = %v, want %v", got, want)
	}
}
