package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// offered runs a Claim that takes nothing and returns what it offered.
func offered(t *testing.T, ctx context.Context, st store.Store) ([]string, error) {
	t.Helper()
	var out []string
	err := st.Claim(ctx, func(tx store.Tx, task *state.Task) (bool, error) {
		out = append(out, task.ID)
		if task.Phase != state.PhaseQueued {
			t.Errorf("Claim offered %s in phase %s", task.ID, task.Phase)
		}
		if tx.Task(task.ID) == nil {
			t.Errorf("Claim offered %s, which its Tx.Task does not give", task.ID)
		}
		return false, nil
	})
	return out, err
}

func (s suite) claim(t *testing.T) {
	s.run(t, "offers the queued tasks, oldest first", func(t *testing.T, st store.Store) {
		tasks := fleet(t, st)
		var want []string
		for _, task := range oldestFirst(tasks) {
			if task.Phase == state.PhaseQueued {
				want = append(want, task.ID)
			}
		}
		got, err := offered(t, t.Context(), st)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Claim offered %q, want %q", got, want)
		}
		for _, task := range tasks {
			same(t, "Task "+task.ID+" after a Claim that took nothing", get(t, st, task.ID), task)
		}
	})
	s.run(t, "offers nothing when none is queued", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		save(t, st, claimed(t, get(t, st, "a"), "A", 2))
		got, err := offered(t, t.Context(), st)
		if err != nil || len(got) != 0 {
			t.Errorf("Claim = %v, offered %q; want nil, none", err, got)
		}
	})
	s.run(t, "a saved claim takes the task and stop ends the offers", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 2), queued("b", 1), queued("c", 3))
		var took *state.Task
		var got []string
		err := st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			got = append(got, task.ID)
			took = claimed(t, task, "A", 5)
			tx.Save(took.Clone())
			return true, nil
		})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if !slices.Equal(got, []string{"b"}) {
			t.Fatalf("Claim that stops at once offered %q, want [b]", got)
		}
		same(t, "Task b", get(t, st, "b"), took)
		if rest, err := offered(t, t.Context(), st); err != nil || !slices.Equal(rest, []string{"a", "c"}) {
			t.Errorf("the next Claim = %v, offered %q; want nil, [a c]", err, rest)
		}
	})
	s.run(t, "an error from fn stores nothing it saved", func(t *testing.T, st store.Store) {
		a := queued("a", 1)
		create(t, st, a)
		err := st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			tx.Save(claimed(t, task, "A", 5))
			tx.Append(task.ID, "k", state.EventProgress, 1, line("k", `"lost":true`))
			return false, errFn
		})
		if err == nil {
			t.Errorf("Claim with a failing fn returned nil")
		}
		same(t, "Task a", get(t, st, "a"), a)
		sameEvents(t, "Events(a)", events(t, st, "a"), nil)
	})
	s.run(t, "skips a task another transaction holds, without waiting", func(t *testing.T, st store.Store) {
		create(t, st, queued("held", 1), queued("free", 2))
		done := make(chan struct{})
		var got []string
		var claimErr error
		err := st.Update(t.Context(), []string{"held"}, func(store.Tx) error {
			go func() {
				defer close(done)
				got, claimErr = offered(t, t.Context(), st)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("a Claim waited 10s for the task an Update holds")
			}
			return nil // a Claim that waits goes on once the Update ends
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		<-done
		if claimErr != nil || !slices.Equal(got, []string{"free"}) {
			t.Errorf("Claim while an Update holds a task = %v, offered %q; want nil, [free]", claimErr, got)
		}
	})
	s.run(t, "an update of a task a claim holds loses neither change", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		updated := make(chan error, 1)
		err := st.Claim(t.Context(), func(tx store.Tx, task *state.Task) (bool, error) {
			go func() {
				updated <- st.Update(t.Context(), []string{"a"}, func(tx store.Tx) error {
					task := tx.Task("a")
					task.Title = "renamed"
					tx.Save(task)
					return nil
				})
			}()
			time.Sleep(50 * time.Millisecond) // give a store that does not lock the chance to show it
			tx.Save(claimed(t, task, "A", 5))
			return true, nil
		})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if err := <-updated; err != nil {
			t.Fatalf("Update: %v", err)
		}
		got := get(t, st, "a")
		if got.Phase != state.PhaseClaimed || got.Title != "renamed" {
			t.Errorf("after a Claim and an Update of one task: phase %s, title %q; want claimed, renamed", got.Phase, got.Title)
		}
	})
	s.run(t, "concurrent claims take each task once", func(t *testing.T, st store.Store) {
		const tasks, workers = 40, 8
		for i := range tasks {
			create(t, st, queued(fmt.Sprintf("t%02d", i), i%7))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var (
			mu    sync.Mutex
			takes = map[string][]string{} // task: the workers that took it
			wg    sync.WaitGroup
		)
		for w := range workers {
			agent := fmt.Sprintf("agent-%d", w)
			wg.Go(func() {
				for ctx.Err() == nil {
					var took string
					err := st.Claim(ctx, func(tx store.Tx, task *state.Task) (bool, error) {
						if err := task.Transition(state.PhaseClaimed, "", at(50)); err != nil {
							return true, err
						}
						task.Lease = &state.Lease{ID: "lease-" + task.ID, AgentID: agent, GrantedAt: at(50), ExpiresAt: at(55)}
						tx.Save(task)
						took = task.ID
						return true, nil
					})
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					if took != "" {
						mu.Lock()
						takes[took] = append(takes[took], agent)
						mu.Unlock()
						continue
					}
					n, err := st.Count(ctx)
					if err != nil {
						t.Errorf("Count: %v", err)
						return
					}
					if n[state.PhaseQueued] == 0 {
						return
					}
					time.Sleep(time.Millisecond) // others hold what is left
				}
				t.Errorf("%s: tasks still queued after a minute of claims", agent)
			})
		}
		wg.Wait()
		for i := range tasks {
			id := fmt.Sprintf("t%02d", i)
			got := get(t, st, id)
			switch who := takes[id]; {
			case len(who) != 1:
				t.Errorf("%s was taken by %q", id, who)
			case got.Phase != state.PhaseClaimed || got.Lease == nil || got.Lease.AgentID != who[0]:
				t.Errorf("%s, taken by %s, is stored %s with lease %+v", id, who[0], got.Phase, got.Lease)
			}
		}
	})
}
