package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

func (s suite) update(t *testing.T) {
	s.run(t, "fn sees the named tasks, and no others", func(t *testing.T, st store.Store) {
		a, b := full("a", 1), queued("b", 2)
		create(t, st, a, b)
		err := st.Update(t.Context(), []string{"a", "nope"}, func(tx store.Tx) error {
			same(t, "Tx.Task(a)", tx.Task("a"), a)
			if got := tx.Task("nope"); got != nil {
				t.Errorf("Tx.Task of an unknown id: %s", got.ID)
			}
			if got := tx.Task("b"); got != nil {
				t.Errorf("Tx.Task of a task not named: %s", got.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	})
	s.run(t, "of unknown ids runs fn with none", func(t *testing.T, st store.Store) {
		ran := false
		err := st.Update(t.Context(), []string{"nope"}, func(tx store.Tx) error {
			ran = true
			if got := tx.Task("nope"); got != nil {
				t.Errorf("Tx.Task of an unknown id: %s", got.ID)
			}
			return nil
		})
		if err != nil || !ran {
			t.Errorf("Update of an unknown id = %v, fn ran: %v; want nil, true", err, ran)
		}
	})
	s.run(t, "Save stores the task", func(t *testing.T, st store.Store) {
		a, b := queued("a", 1), queued("b", 2)
		create(t, st, a, b)
		a2, b2 := claimed(t, a, "A", 5), b.Clone()
		a2.Progress = state.Progress{Message: "working", Percent: 40, Step: "build"}
		b2.Title = "renamed"
		err := st.Update(t.Context(), []string{"a", "b"}, func(tx store.Tx) error {
			tx.Save(a2.Clone())
			tx.Save(b2.Clone())
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		same(t, "Task a", get(t, st, "a"), a2)
		same(t, "Task b", get(t, st, "b"), b2)
	})
	s.run(t, "Tx.Task gives the transaction's changes", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			task := tx.Task("a")
			task.Title = "renamed"
			tx.Save(task)
			if got := tx.Task("a"); got == nil || got.Title != "renamed" {
				t.Errorf("Tx.Task after Save: %+v, want the title renamed", got)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	})
	s.run(t, "what fn did not save is not stored", func(t *testing.T, st store.Store) {
		a, b := queued("a", 1), queued("b", 2)
		create(t, st, a, b)
		err := st.Update(t.Context(), []string{"a", "b"}, func(tx store.Tx) error {
			tx.Task("a").Title = "changed, not saved"
			task := tx.Task("b")
			task.Title = "saved"
			tx.Save(task)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		same(t, "Task a", get(t, st, "a"), a)
		b.Title = "saved"
		same(t, "Task b", get(t, st, "b"), b)
	})
	s.run(t, "an error from fn stores nothing and is returned", func(t *testing.T, st store.Store) {
		a := queued("a", 1)
		create(t, st, a)
		appendLines(t, st, "a", 1, `"before":true`)
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			tx.Save(claimed(t, a, "A", 5))
			tx.Append("a", "key-2", state.EventProgress, 2, line("key-2", `"lost":true`))
			tx.Append("a", "cut", state.EventLog, 0, nil)
			return fmt.Errorf("wrapped: %w", errFn)
		})
		if !errors.Is(err, errFn) {
			t.Errorf("Update with a failing fn = %v, want %v", err, errFn)
		}
		same(t, "Task a", get(t, st, "a"), a)
		sameEvents(t, "Events(a)", events(t, st, "a"), []store.EventLine{{Seq: 1, Line: keyed(1, `"before":true`)}})
		for _, key := range []string{"key-2", "cut"} {
			if seen(t, st, "a", key) {
				t.Errorf("Seen(a, %s): appended by a transaction that failed", key)
			}
		}
		sameCount(t, count(t, st), map[state.Phase]int{state.PhaseQueued: 1})
	})
	s.run(t, "Seen answers for keys appended in the transaction", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		err := st.Update(t.Context(), []string{"a", "b"}, func(tx store.Tx) error {
			check := func(task, key string, want bool) {
				t.Helper()
				if got, err := tx.Seen(task, key); err != nil || got != want {
					t.Errorf("Tx.Seen(%s, %s) = %v, %v; want %v", task, key, got, err, want)
				}
			}
			check("a", "k1", false)
			tx.Append("a", "k1", state.EventProgress, 1, line("k1", `"k":1`))
			tx.Append("a", "k2", state.EventLog, 0, nil)
			check("a", "k1", true)
			check("a", "k2", true)
			check("a", "k3", false)
			check("b", "k1", false) // a key is a task's own
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	})
	s.run(t, "LastSeq counts the stored events, in the transaction and after", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		sameLastSeq(t, st, "a", 0)
		appendLines(t, st, "a", 1, `"n":1`, `"n":2`)
		err := st.Update(t.Context(), []string{"a", "b"}, func(tx store.Tx) error {
			check := func(task string, want int) {
				t.Helper()
				if got := tx.LastSeq(task); got != want {
					t.Errorf("Tx.LastSeq(%s) = %d, want %d", task, got, want)
				}
			}
			check("a", 2)
			check("b", 0)
			tx.Append("a", "cut", state.EventLog, 0, nil) // a cut event is no stored event
			check("a", 2)
			tx.Append("a", "k3", state.EventProgress, 3, line("k3", `"n":3`))
			check("a", 3)
			check("b", 0) // a task's own
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		sameLastSeq(t, st, "a", 3)
		// A transaction that fails counts nothing.
		err = st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			tx.Append("a", "k4", state.EventProgress, 4, line("k4", `"n":4`))
			return errFn
		})
		if !errors.Is(err, errFn) {
			t.Fatalf("Update with a failing fn = %v", err)
		}
		sameLastSeq(t, st, "a", 3)
		sameLastSeq(t, st, "b", 0)
	})
	s.run(t, "Seen answers for committed keys, cut ones too", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			tx.Append("a", "stored", state.EventProgress, 1, line("stored", `"k":1`))
			tx.Append("a", "cut", state.EventLog, 0, nil)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		for _, c := range []struct {
			task, key string
			want      bool
		}{{"a", "stored", true}, {"a", "cut", true}, {"a", "other", false}, {"b", "stored", false}, {"b", "cut", false}} {
			if got := seen(t, st, c.task, c.key); got != c.want {
				t.Errorf("Seen(%s, %s) after the commit = %v, want %v", c.task, c.key, got, c.want)
			}
		}
		sameEvents(t, "Events(a): the cut key has no line", events(t, st, "a"), []store.EventLine{{Seq: 1, Line: line("stored", `"k":1`)}})
	})
	s.run(t, "changing a saved task after Update changes nothing stored", func(t *testing.T, st store.Store) {
		a := queued("a", 1)
		create(t, st, a)
		var mine *state.Task
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			mine = tx.Task("a")
			mine.Title = "saved"
			tx.Save(mine)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		want := mine.Clone()
		mine.Title, mine.Phase = "changed after", state.PhaseFailed
		same(t, "Task a", get(t, st, "a"), want)
	})
	s.run(t, "concurrent updates of one task lose no change", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		const workers, each = 8, 20
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
						task := tx.Task("a")
						if task == nil {
							return errors.New("Tx.Task(a) is nil")
						}
						task.Progress.Percent++
						tx.Save(task)
						return nil
					})
					if err != nil {
						t.Errorf("Update: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if got := get(t, st, "a").Progress.Percent; got != workers*each {
			t.Errorf("after %d increments, the counter is %d", workers*each, got)
		}
	})
}

func (s suite) events(t *testing.T) {
	// odd lines: what was appended comes back as it was, not re-encoded.
	odd := []string{
		`"z":1,"a":2`,
		` "spaced" : [1, 2.50, 1e3] `,
		`"text":"caf\u00e9 é \"quoted\" \\ \n","big":123456789012345678901234567890`,
		`"dup":1,"dup":2`,
		``,
	}
	s.run(t, "come back byte for byte in seq order", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		appendLines(t, st, "a", 1, odd[:2]...)
		appendLines(t, st, "a", 3, odd[2:]...)
		var want []store.EventLine
		for i, rest := range odd {
			want = append(want, store.EventLine{Seq: i + 1, Line: keyed(i+1, rest)})
		}
		sameEvents(t, "Events(a)", events(t, st, "a"), want)
	})
	s.run(t, "pages by after and limit, and more says what follows", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		var rests []string
		for i := range 6 {
			rests = append(rests, fmt.Sprintf(`"n":%d`, i+1))
		}
		appendLines(t, st, "a", 1, rests...)
		for _, c := range []struct {
			after, limit int
			seqs         []int
			more         bool
		}{
			{0, 4, []int{1, 2, 3, 4}, true},
			{4, 4, []int{5, 6}, false},
			{3, 3, []int{4, 5, 6}, false},
			{2, 2, []int{3, 4}, true},
			{0, 6, []int{1, 2, 3, 4, 5, 6}, false},
			{6, 4, nil, false},
		} {
			got, more, err := st.Events(t.Context(), "a", c.after, c.limit, 1<<20)
			if err != nil {
				t.Fatalf("Events(after %d, limit %d): %v", c.after, c.limit, err)
			}
			var want []store.EventLine
			for _, seq := range c.seqs {
				want = append(want, store.EventLine{Seq: seq, Line: keyed(seq, rests[seq-1])})
			}
			sameEvents(t, fmt.Sprintf("Events(after %d, limit %d)", c.after, c.limit), got, want)
			if more != c.more {
				t.Errorf("Events(after %d, limit %d): more = %v, want %v", c.after, c.limit, more, c.more)
			}
		}
	})
	s.run(t, "maxBytes bounds a page, which still has one line", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		var rests []string
		for i := range 4 {
			rests = append(rests, fmt.Sprintf(`"n":%d,"pad":"%070d"`, i+1, 0))
			if n := len(keyed(i+1, rests[i])); n != 100 {
				t.Fatalf("line %d is %d bytes, not 100", i+1, n)
			}
		}
		appendLines(t, st, "a", 1, rests...)
		for _, c := range []struct {
			after    int
			maxBytes int64
			seqs     []int
			more     bool
		}{
			{0, 250, []int{1, 2}, true}, // 200 bytes, or 202 with newlines: both fit 250, three lines do not
			{2, 250, []int{3, 4}, false},
			{0, 50, []int{1}, true}, // over maxBytes, but one line
			{3, 1, []int{4}, false},
		} {
			got, more, err := st.Events(t.Context(), "a", c.after, 10, c.maxBytes)
			if err != nil {
				t.Fatalf("Events(after %d, maxBytes %d): %v", c.after, c.maxBytes, err)
			}
			var want []store.EventLine
			for _, seq := range c.seqs {
				want = append(want, store.EventLine{Seq: seq, Line: keyed(seq, rests[seq-1])})
			}
			sameEvents(t, fmt.Sprintf("Events(after %d, maxBytes %d)", c.after, c.maxBytes), got, want)
			if more != c.more {
				t.Errorf("Events(after %d, maxBytes %d): more = %v, want %v", c.after, c.maxBytes, more, c.more)
			}
		}
	})
	s.run(t, "are their task's own", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2), queued("c", 3))
		appendLines(t, st, "a", 1, `"of":"a"`)
		appendLines(t, st, "b", 1, `"of":"b"`, `"of":"b","n":2`)
		sameEvents(t, "Events(a)", events(t, st, "a"), []store.EventLine{{Seq: 1, Line: keyed(1, `"of":"a"`)}})
		sameEvents(t, "Events(b)", events(t, st, "b"), []store.EventLine{{Seq: 1, Line: keyed(1, `"of":"b"`)}, {Seq: 2, Line: keyed(2, `"of":"b","n":2`)}})
		sameEvents(t, "Events(c)", events(t, st, "c"), nil)
		sameEvents(t, "Events(nope)", events(t, st, "nope"), nil)
	})
}
