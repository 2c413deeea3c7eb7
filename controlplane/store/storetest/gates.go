package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
)

// gates is target's gates named keys, as st gives them.
func gates(t *testing.T, st store.Store, target string, keys ...string) []store.NotifyGate {
	t.Helper()
	got, err := st.NotifyGates(t.Context(), target, keys)
	if err != nil {
		t.Fatalf("NotifyGates: %v", err)
	}
	slices.SortFunc(got, func(a, b store.NotifyGate) int { return strings.Compare(a.Key, b.Key) })
	return got
}

// sameGates reports where got and want differ (times by Equal).
func sameGates(t *testing.T, what string, got, want []store.NotifyGate) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d gates %+v, want %d %+v", what, len(got), got, len(want), want)
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Target != w.Target || g.Key != w.Key || !g.Until.Equal(w.Until) || g.Sent != w.Sent || !slices.Equal(g.Passed, w.Passed) || g.Held != w.Held || g.Rev != w.Rev {
			t.Errorf("%s: gate %d is %+v, want %+v", what, i, g, w)
		}
	}
}

func putGates(t *testing.T, st store.Store, gs ...store.NotifyGate) {
	t.Helper()
	if err := st.PutNotifyGates(t.Context(), gs...); err != nil {
		t.Fatalf("PutNotifyGates: %v", err)
	}
}

// foldInto returns a fold that makes the held record's body body, due at
// minute due, held by gate key.
func foldInto(key, body string, due int, saw *store.Notification) func(*store.Notification) {
	return func(held *store.Notification) {
		if saw != nil {
			*saw = *held
		}
		held.Body, held.Due, held.Gate = []byte(body), at(due), key
	}
}

// notifyGates checks the notification gates: writes at their Rev only,
// all or none; folds into the held record, or n itself; and the prune.
func (s suite) notifyGates(t *testing.T) {
	s.run(t, "a gate is written only at its Rev, all of a write or none", func(t *testing.T, st store.Store) {
		sameGates(t, "NotifyGates of an empty store", gates(t, st, "hook", "a", "b"), nil)
		a := store.NotifyGate{Target: "hook", Key: "a", Until: at(10), Sent: 1}
		putGates(t, st, a)
		a.Rev = 1
		sameGates(t, "after a first write", gates(t, st, "hook", "a", "b"), []store.NotifyGate{a})
		sameGates(t, "another target's", gates(t, st, "other", "a"), nil)
		// A write of a gate read before: refused, with the gate written
		// along with it.
		stale := a
		stale.Rev, stale.Sent = 0, 9
		b := store.NotifyGate{Target: "hook", Key: "b", Until: at(10), Sent: 1}
		if err := st.PutNotifyGates(t.Context(), b, stale); !errors.Is(err, store.ErrGateMoved) {
			t.Fatalf("PutNotifyGates of a gate at a past Rev: %v, want ErrGateMoved", err)
		}
		sameGates(t, "after a refused write", gates(t, st, "hook", "a", "b"), []store.NotifyGate{a})
		a.Sent, a.Passed, a.Held = 2, []string{"n-0", "n-2"}, "n-1"
		b.Target = "other"
		putGates(t, st, a, b)
		a.Rev, b.Rev = 2, 1
		sameGates(t, "after a second write", gates(t, st, "hook", "a", "b"), []store.NotifyGate{a})
		sameGates(t, "the other target's", gates(t, st, "other", "b"), []store.NotifyGate{b})
		if err := st.PutNotifyGates(t.Context(), store.NotifyGate{Target: "hook", Key: "a", Rev: 1}); !errors.Is(err, store.ErrGateMoved) {
			t.Errorf("PutNotifyGates at Rev 1 of a gate at 2: %v, want ErrGateMoved", err)
		}
	})
	s.run(t, "FoldNotification folds into the held record, or makes n it", func(t *testing.T, st store.Store) {
		notify(t, st, note("n1", "hook", 1, 1), note("n2", "hook", 2, 2), note("n3", "hook", 3, 3), note("n1", "other", 1, 1))
		g := store.NotifyGate{Target: "hook", Key: "g", Until: at(10), Sent: 1}
		var saw store.Notification
		if err := st.FoldNotification(t.Context(), note("n1", "hook", 1, 1), g, foldInto("g", "one", 10, &saw)); err != nil {
			t.Fatalf("FoldNotification into no record: %v", err)
		}
		sameNotes(t, "fold was given", []store.Notification{saw}, []store.Notification{note("n1", "hook", 1, 1)})
		held := note("n1", "hook", 1, 10)
		held.Body, held.Gate = []byte("one"), "g"
		g.Held, g.Rev = "n1", 1
		sameGates(t, "the gate, holding n1", gates(t, st, "hook", "g"), []store.NotifyGate{g})
		sameNotes(t, "the records", dueNotes(t, st, 20), []store.Notification{note("n1", "other", 1, 1), note("n2", "hook", 2, 2), note("n3", "hook", 3, 3), held})

		if err := st.FoldNotification(t.Context(), note("n2", "hook", 2, 2), g, foldInto("g", "two", 10, &saw)); err != nil {
			t.Fatalf("FoldNotification into n1: %v", err)
		}
		sameNotes(t, "fold was given the held record", []store.Notification{saw}, []store.Notification{held})
		held.Body = []byte("two")
		g.Rev = 2
		sameGates(t, "the gate, still holding n1", gates(t, st, "hook", "g"), []store.NotifyGate{g})
		sameNotes(t, "the records, n2 folded", dueNotes(t, st, 20), []store.Notification{note("n1", "other", 1, 1), note("n3", "hook", 3, 3), held})

		stale := g
		stale.Rev = 1
		if err := st.FoldNotification(t.Context(), note("n3", "hook", 3, 3), stale, foldInto("g", "three", 10, nil)); !errors.Is(err, store.ErrGateMoved) {
			t.Fatalf("FoldNotification with a gate at a past Rev: %v, want ErrGateMoved", err)
		}
		sameNotes(t, "the records after a refused fold", dueNotes(t, st, 20), []store.Notification{note("n1", "other", 1, 1), note("n3", "hook", 3, 3), held})

		// The held record gone (delivered): n3 is the new one.
		if err := st.NotificationDone(t.Context(), "n1", "hook"); err != nil {
			t.Fatal(err)
		}
		if err := st.FoldNotification(t.Context(), note("n3", "hook", 3, 3), g, foldInto("g", "three", 15, &saw)); err != nil {
			t.Fatalf("FoldNotification into a held record gone: %v", err)
		}
		sameNotes(t, "fold was given n3", []store.Notification{saw}, []store.Notification{note("n3", "hook", 3, 3)})
		three := note("n3", "hook", 3, 15)
		three.Body, three.Gate = []byte("three"), "g"
		g.Held, g.Rev = "n3", 3
		sameGates(t, "the gate, holding n3", gates(t, st, "hook", "g"), []store.NotifyGate{g})
		sameNotes(t, "the records, n3 held", dueNotes(t, st, 20), []store.Notification{note("n1", "other", 1, 1), three})
	})
	s.run(t, "PruneNotifyGates removes ended gates that hold no stored record", func(t *testing.T, st store.Store) {
		notify(t, st, note("kept", "hook", 1, 1))
		all := []store.NotifyGate{
			{Target: "hook", Key: "ended", Until: at(5)},
			{Target: "hook", Key: "ended-holding", Until: at(5), Held: "kept"},
			{Target: "hook", Key: "ended-held-gone", Until: at(5), Held: "gone"},
			{Target: "hook", Key: "open", Until: at(20)},
			{Target: "hook", Key: "at-the-cut", Until: at(10)},
			{Target: "other", Key: "ended-holding-elsewhere", Until: at(5), Held: "kept"},
		}
		putGates(t, st, all...)
		if err := st.PruneNotifyGates(t.Context(), at(10)); err != nil {
			t.Fatalf("PruneNotifyGates: %v", err)
		}
		var keys []string
		for _, g := range all {
			keys = append(keys, g.Key)
		}
		var left []string
		for _, target := range []string{"hook", "other"} {
			for _, g := range gates(t, st, target, keys...) {
				left = append(left, g.Target+"/"+g.Key)
			}
		}
		if want := []string{"hook/at-the-cut", "hook/ended-holding", "hook/open"}; !slices.Equal(left, want) {
			t.Errorf("gates left after the prune: %v, want %v", left, want)
		}
	})
}

// reopenGates writes gates and a fold record before a reopen;
// afterReopenGates checks them after, and that the store goes on.
func reopenGates(t *testing.T, st store.Store) {
	t.Helper()
	notify(t, st, note("gated", "gates", 1, 1))
	putGates(t, st, store.NotifyGate{Target: "gates", Key: "a", Until: at(50), Sent: 2})
	g := store.NotifyGate{Target: "gates", Key: "b", Until: at(50), Sent: 1}
	if err := st.FoldNotification(t.Context(), note("gated", "gates", 1, 1), g, foldInto("b", "folded", 50, nil)); err != nil {
		t.Fatalf("FoldNotification: %v", err)
	}
}

func afterReopenGates(t *testing.T, st store.Store) {
	t.Helper()
	a := store.NotifyGate{Target: "gates", Key: "a", Until: at(50), Sent: 2, Rev: 1}
	b := store.NotifyGate{Target: "gates", Key: "b", Until: at(50), Sent: 1, Held: "gated", Rev: 1}
	sameGates(t, "NotifyGates after a reopen", gates(t, st, "gates", "a", "b"), []store.NotifyGate{a, b})
	held := note("gated", "gates", 1, 50)
	held.Body, held.Gate = []byte("folded"), "b"
	var got []store.Notification
	for _, n := range dueNotes(t, st, 60) {
		if n.Target == "gates" {
			got = append(got, n)
		}
	}
	sameNotes(t, "the fold record after a reopen", got, []store.Notification{held})
	a.Sent = 3
	putGates(t, st, a)
	a.Rev = 2
	sameGates(t, "NotifyGates after a write past a reopen", gates(t, st, "gates", "a"), []store.NotifyGate{a})
}
