package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// note is a notification record to target, written at minute m and due
// at minute due.
func note(id, target string, m, due int) store.Notification {
	return store.Notification{ID: id, Target: target, Body: []byte(`{"id":"` + id + `","text":"about ` + id + `"}`),
		Created: at(m), Due: at(due)}
}

// dueNotes is every record due at minute m, in the order the store gives.
func dueNotes(t *testing.T, st store.Store, m int) []store.Notification {
	t.Helper()
	got, err := st.DueNotifications(t.Context(), at(m), 1000)
	if err != nil {
		t.Fatalf("DueNotifications: %v", err)
	}
	return got
}

// sameNotes reports where got and want differ (times by Equal, bodies by
// their bytes).
func sameNotes(t *testing.T, what string, got, want []store.Notification) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records %v, want %d %v", what, len(got), noteNames(got), len(want), noteNames(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Target != w.Target || string(g.Body) != string(w.Body) || !g.Created.Equal(w.Created) ||
			!g.Due.Equal(w.Due) || g.Attempts != w.Attempts || g.LastError != w.LastError || g.Gate != w.Gate {
			t.Errorf("%s: record %d is %+v (body %s), want %+v (body %s)", what, i, g, g.Body, w, w.Body)
		}
	}
}

func noteNames(ns []store.Notification) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID+"/"+n.Target)
	}
	return out
}

func notify(t *testing.T, st store.Store, ns ...store.Notification) {
	t.Helper()
	if err := st.Notify(t.Context(), ns...); err != nil {
		t.Fatalf("Notify: %v", err)
	}
}

func (s suite) notifications(t *testing.T) {
	s.run(t, "Tx.Notify is stored when Update commits", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		a, b := note("n1", "hook", 2, 2), note("n1", "slack", 2, 2)
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			task := tx.Task("a")
			task.Title = "changed"
			tx.Save(task)
			tx.Append("a", "k1", state.EventProgress, 1, line("k1", `"n":1`))
			tx.Notify(a, b)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		sameNotes(t, "DueNotifications after the commit", dueNotes(t, st, 2), []store.Notification{a, b})
	})
	s.run(t, "Tx.Notify of a transaction that saves nothing is stored", func(t *testing.T, st store.Store) {
		n := note("n1", "hook", 1, 1)
		if err := st.Update(t.Context(), nil, func(tx store.Tx) error { tx.Notify(n); return nil }); err != nil {
			t.Fatalf("Update: %v", err)
		}
		sameNotes(t, "DueNotifications", dueNotes(t, st, 1), []store.Notification{n})
	})
	s.run(t, "Tx.Notify is not stored when fn errs", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		err := st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
			task := tx.Task("a")
			task.Title = "changed"
			tx.Save(task)
			tx.Append("a", "k1", state.EventProgress, 1, line("k1", `"n":1`))
			tx.Notify(note("n1", "hook", 2, 2))
			return errFn
		})
		if err == nil {
			t.Fatal("Update with a failing fn returned nil")
		}
		sameNotes(t, "DueNotifications after a failed Update", dueNotes(t, st, 100), nil)
		err = st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			tx.Save(claimed(t, task, "A", 3))
			tx.Notify(note("n2", "hook", 3, 3))
			return false, errFn
		})
		if err == nil {
			t.Fatal("Claim with a failing fn returned nil")
		}
		sameNotes(t, "DueNotifications after a failed Claim", dueNotes(t, st, 100), nil)
	})
	s.run(t, "Tx.Notify is stored when Claim commits", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		err := st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			tx.Save(claimed(t, task, "A", 3))
			tx.Notify(note("n-"+task.ID, "hook", 3, 3))
			return false, nil
		})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		sameNotes(t, "DueNotifications after the claim", dueNotes(t, st, 3), []store.Notification{note("n-a", "hook", 3, 3), note("n-b", "hook", 3, 3)})
	})
	s.run(t, "a record of a stored ID and Target is left as it is", func(t *testing.T, st store.Store) {
		first := note("n1", "hook", 1, 1)
		notify(t, st, first, note("n1", "slack", 1, 1))
		if err := st.NotificationRetry(t.Context(), "n1", "hook", at(2), "503"); err != nil {
			t.Fatalf("NotificationRetry: %v", err)
		}
		again := note("n1", "hook", 5, 5)
		again.Body = []byte(`{"id":"n1","text":"written again"}`)
		notify(t, st, again)
		if err := st.Update(t.Context(), nil, func(tx store.Tx) error { tx.Notify(again, again); return nil }); err != nil {
			t.Fatalf("Update: %v", err)
		}
		want := first
		want.Due, want.Attempts, want.LastError = at(2), 1, "503"
		sameNotes(t, "DueNotifications", dueNotes(t, st, 10), []store.Notification{note("n1", "slack", 1, 1), want})
	})
	s.run(t, "DueNotifications gives the earliest due first, up to limit, none not yet due", func(t *testing.T, st store.Store) {
		notify(t, st, note("c", "hook", 1, 3), note("a", "hook", 1, 5), note("b", "hook", 1, 1), note("d", "hook", 1, 9))
		sameNotes(t, "due at minute 5", dueNotes(t, st, 5), []store.Notification{note("b", "hook", 1, 1), note("c", "hook", 1, 3), note("a", "hook", 1, 5)})
		got, err := st.DueNotifications(t.Context(), at(100), 2)
		if err != nil {
			t.Fatalf("DueNotifications: %v", err)
		}
		sameNotes(t, "the first 2", got, []store.Notification{note("b", "hook", 1, 1), note("c", "hook", 1, 3)})
		sameNotes(t, "due at minute 0", dueNotes(t, st, 0), nil)
	})
	s.run(t, "NotificationDone removes a record, and again is no error", func(t *testing.T, st store.Store) {
		notify(t, st, note("n1", "hook", 1, 1), note("n1", "slack", 1, 1))
		for range 2 {
			if err := st.NotificationDone(t.Context(), "n1", "hook"); err != nil {
				t.Fatalf("NotificationDone: %v", err)
			}
		}
		if err := st.NotificationDone(t.Context(), "never", "hook"); err != nil {
			t.Fatalf("NotificationDone of a record never stored: %v", err)
		}
		sameNotes(t, "DueNotifications", dueNotes(t, st, 10), []store.Notification{note("n1", "slack", 1, 1)})
	})
	s.run(t, "NotificationRetry counts the attempt and sets Due and LastError", func(t *testing.T, st store.Store) {
		notify(t, st, note("n1", "hook", 1, 1))
		for i, due := range []int{4, 2} {
			if err := st.NotificationRetry(t.Context(), "n1", "hook", at(due), fmt.Sprintf("try %d failed", i+1)); err != nil {
				t.Fatalf("NotificationRetry: %v", err)
			}
		}
		sameNotes(t, "due at minute 1, after the retries", dueNotes(t, st, 1), nil)
		want := note("n1", "hook", 1, 2)
		want.Attempts, want.LastError = 2, "try 2 failed"
		sameNotes(t, "due at minute 2", dueNotes(t, st, 2), []store.Notification{want})
	})
	s.run(t, "concurrent Notify, Tx.Notify and NotificationDone lose nothing", func(t *testing.T, st store.Store) {
		const workers, each = 8, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("n-%d-%d", w, i)
					var err error
					if i%2 == 0 {
						err = st.Notify(t.Context(), note(id, "hook", 1, 1), note(id, "slack", 1, 1))
					} else {
						err = st.Update(t.Context(), nil, func(tx store.Tx) error {
							tx.Notify(note(id, "hook", 1, 1), note(id, "slack", 1, 1))
							return nil
						})
					}
					if err == nil {
						err = st.NotificationDone(t.Context(), id, "slack")
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		var want []string
		for w := range workers {
			for i := range each {
				want = append(want, fmt.Sprintf("n-%d-%d/hook", w, i))
			}
		}
		got := noteNames(dueNotes(t, st, 1))
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("after concurrent writes: %d records %v, want %d", len(got), got, len(want))
		}
	})
}

// reopenNotes writes notifications to st for RunReopen, and returns the
// records a reopened store must give at minute 10.
func reopenNotes(t *testing.T, st store.Store) []store.Notification {
	t.Helper()
	err := st.Update(t.Context(), nil, func(tx store.Tx) error {
		tx.Notify(note("tx", "hook", 1, 1))
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	err = st.Update(t.Context(), nil, func(tx store.Tx) error {
		tx.Notify(note("failed-tx", "hook", 1, 1))
		return errFn
	})
	if err == nil {
		t.Fatal("Update with a failing fn returned nil")
	}
	notify(t, st, note("alone", "hook", 1, 3), note("retried", "hook", 1, 1), note("done", "hook", 1, 1))
	if err := st.NotificationRetry(t.Context(), "retried", "hook", at(5), "connection refused"); err != nil {
		t.Fatalf("NotificationRetry: %v", err)
	}
	if err := st.NotificationDone(t.Context(), "done", "hook"); err != nil {
		t.Fatalf("NotificationDone: %v", err)
	}
	retried := note("retried", "hook", 1, 5)
	retried.Attempts, retried.LastError = 1, "connection refused"
	return []store.Notification{note("tx", "hook", 1, 1), note("alone", "hook", 1, 3), retried}
}

// The reopened store goes on: what it gives after a reopen it takes
// changes to.
func afterReopenNotes(t *testing.T, st store.Store, want []store.Notification) {
	t.Helper()
	sameNotes(t, "DueNotifications after a reopen", dueNotes(t, st, 10), want)
	if err := st.NotificationDone(t.Context(), "tx", "hook"); err != nil {
		t.Fatalf("NotificationDone after a reopen: %v", err)
	}
	if err := st.NotificationRetry(t.Context(), "alone", "hook", at(20), "again"); err != nil {
		t.Fatalf("NotificationRetry after a reopen: %v", err)
	}
	notify(t, st, note("new", "hook", 11, 11))
	alone := want[1]
	alone.Due, alone.Attempts, alone.LastError = at(20), 1, "again"
	sameNotes(t, "DueNotifications after changes past a reopen", dueNotes(t, st, 30), []store.Notification{want[2], note("new", "hook", 11, 11), alone})
}
