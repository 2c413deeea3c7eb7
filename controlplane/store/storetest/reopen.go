package storetest

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// RunReopen checks that what a store committed outlives it: it writes
// records to a store from open, closes it (Close must succeed), and
// checks they are all in the store reopen opens on the same records (the
// same directory, the same database; s says which). RunReopen closes the
// reopened store when it ends.
func RunReopen(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	t.Run("committed records outlive a reopen", func(t *testing.T) {
		st := open(t)

		// Tasks in every kind of state, one pruned, one whose change failed.
		tasks := fleet(t, st)
		gone := queued("gone", 0)
		create(t, st, gone)
		save(t, st, ended(t, gone, state.PhaseExpired, 1))
		if n, err := st.Prune(t.Context(), at(2), 10); err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1", n, err)
		}
		failed := get(t, st, "q1")
		err := st.Update(t.Context(), []string{"q1"}, func(tx store.Tx) error {
			tx.Save(claimed(t, failed, "A", 30))
			tx.Append("q1", "failed", state.EventProgress, 1, line("failed", `"failed":true`))
			return errFn
		})
		if err == nil {
			t.Fatal("Update with a failing fn returned nil")
		}
		// Events and keys, one cut; a key that JSON escapes.
		keys := []string{"k1", `k "2" \ é`}
		lines := []store.EventLine{{Seq: 1, Line: line(keys[0], `"z":1,"a":"caf\u00e9"`)}, {Seq: 2, Line: line(keys[1], ` "n" : 2 `)}}
		err = st.Update(t.Context(), []string{"c1"}, func(tx store.Tx) error {
			for i, l := range lines {
				tx.Append("c1", keys[i], state.EventProgress, l.Seq, slices.Clone(l.Line))
			}
			tx.Append("c1", "cut", state.EventLog, 0, nil)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		// Tokens and agents.
		for _, id := range []string{"a", "b", "c"} {
			if err := register(t, st, id, "h-"+id, false); err != nil {
				t.Fatalf("Register(%s): %v", id, err)
			}
		}
		if err := register(t, st, "b", "h-b2", true); err != nil {
			t.Fatalf("Register(b, replace): %v", err)
		}
		if _, err := st.Revoke(t.Context(), "c"); err != nil {
			t.Fatalf("Revoke(c): %v", err)
		}
		agents := []store.Agent{agent("a", 1, "r1"), agent("b", 2, "r2")}
		for _, a := range agents {
			putAgent(t, st, a)
		}
		grant(t, st, "a", map[string]string{"tier": "secure"}, nil, map[string]string{"tier": "secure"})
		grant(t, st, "b", map[string]string{"gpu": "a100", "zone": "eu"}, []string{"zone"}, map[string]string{"gpu": "a100"})
		notes := reopenNotes(t, st)
		reopenSessions(t, st)
		reopenGates(t, st)
		secret, err := st.Secret(t.Context(), "reopen", 32)
		if err != nil {
			t.Fatalf("Secret: %v", err)
		}

		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		st = reopen(t, st)
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("Close of the reopened store: %v", err)
			}
		})

		all, _ := allTasks(t, st, store.Query{})
		same(t, "Tasks after a reopen", all, oldestFirst(tasks))
		if again, err := st.Secret(t.Context(), "reopen", 32); err != nil || !bytes.Equal(again, secret) {
			t.Errorf("Secret after a reopen = %x, %v; want the one made before, %x", again, err, secret)
		}
		if task := get(t, st, "gone"); task != nil {
			t.Errorf("Task(gone), pruned before the reopen: %s", task.Phase)
		}
		want := map[state.Phase]int{}
		for _, task := range tasks {
			want[task.Phase]++
		}
		sameCount(t, count(t, st), want)
		sameEvents(t, "Events(c1) after a reopen", events(t, st, "c1"), lines)
		sameEvents(t, "Events(q1) after a reopen", events(t, st, "q1"), nil)
		for _, key := range append(slices.Clone(keys), "cut") {
			if !seen(t, st, "c1", key) {
				t.Errorf("Seen(c1, %s) after a reopen: false", key)
			}
		}
		if seen(t, st, "q1", "failed") {
			t.Error("Seen(q1, failed) after a reopen: a failed transaction's key")
		}
		sameLastSeq(t, st, "c1", 2)
		sameLastSeq(t, st, "q1", 0)
		leased, err := st.Leased(t.Context(), "A")
		if err != nil {
			t.Fatalf("Leased: %v", err)
		}
		slices.SortFunc(leased, func(a, b *state.Task) int { return strings.Compare(a.ID, b.ID) })
		sameIDs(t, "Leased(A) after a reopen", leased, []string{"c1", "c3"})

		byToken(t, st, "h-a", "a")
		byToken(t, st, "h-b", "")
		byToken(t, st, "h-b2", "b")
		byToken(t, st, "h-c", "")
		got, err := st.Agents(t.Context())
		if err != nil {
			t.Fatalf("Agents: %v", err)
		}
		same(t, "Agents after a reopen", got, agents)
		granted(t, st, "a", map[string]string{"tier": "secure"})
		granted(t, st, "b", map[string]string{"gpu": "a100"})
		serves(t, st, "r2", true)

		// The reopened store goes on: a claim, an update.
		var took []string
		err = st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			took = append(took, task.ID)
			tx.Save(claimed(t, task, "B", 40))
			return false, nil
		})
		if err != nil {
			t.Fatalf("Claim after a reopen: %v", err)
		}
		if !slices.Equal(took, []string{"q2", "q1", "q3"}) {
			t.Errorf("Claim after a reopen took %q, want [q2 q1 q3]", took)
		}
		afterReopenNotes(t, st, notes)
		afterReopenSessions(t, st)
		afterReopenGates(t, st)
		appendLines(t, st, "c1", 3, `"n":3`)
		sameEvents(t, "Events(c1) after an append past a reopen", events(t, st, "c1"), append(slices.Clone(lines), store.EventLine{Seq: 3, Line: keyed(3, `"n":3`)}))
	})
}
