package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// full is a queued task with every field a new task may have.
func full(id string, m int) *state.Task {
	task := queued(id, m)
	task.Title = "the title of " + id
	task.Prefer = state.PreferGUI
	task.MaxAttempts = 3
	task.Repo, task.Base = "repo-"+id, "main"
	return task
}

func (s suite) task(t *testing.T) {
	s.run(t, "returns what Create stored", func(t *testing.T, st store.Store) {
		a, b := full("a", 1), queued("b", 2)
		create(t, st, a, b)
		same(t, "Task a", get(t, st, "a"), a)
		same(t, "Task b", get(t, st, "b"), b)
	})
	s.run(t, "of an unknown id is nil", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1))
		task, err := st.Task(t.Context(), "nope")
		if task != nil || err != nil {
			t.Errorf("Task(nope) = %v, %v; want nil, nil", task, err)
		}
	})
	s.run(t, "returns a copy", func(t *testing.T, st store.Store) {
		a := full("a", 1)
		create(t, st, a)
		got := get(t, st, "a")
		got.Title, got.Phase = "changed", state.PhaseFailed
		got.Attempts = append(got.Attempts, state.Attempt{AttemptID: "x", Number: 1})
		got.Lease = &state.Lease{ID: "l", AgentID: "thief"}
		same(t, "Task after changing what it returned", get(t, st, "a"), a)
	})
	s.run(t, "changing a task after Create changes nothing stored", func(t *testing.T, st store.Store) {
		a := full("a", 1)
		mine := a.Clone()
		if err := st.Create(t.Context(), mine); err != nil {
			t.Fatal(err)
		}
		mine.Title, mine.Phase = "changed", state.PhaseFailed
		mine.Attempts = append(mine.Attempts, state.Attempt{AttemptID: "x", Number: 1})
		same(t, "Task", get(t, st, "a"), a)
	})
}

// fleet is a store's worth of tasks in every kind of state: queued,
// claimed (by agents A and B), ended (with its lease still on), in
// repositories r1 and r2. It returns them as stored.
func fleet(t *testing.T, st store.Store) []*state.Task {
	t.Helper()
	mk := func(id string, m int, repo string) *state.Task {
		task := queued(id, m)
		task.Repo = repo
		return task
	}
	tasks := []*state.Task{
		mk("q1", 5, "r1"), mk("q2", 1, "r2"), mk("q3", 5, ""), // q2 oldest; q1, q3 tie on time
		mk("c1", 2, "r1"), mk("c2", 3, "r2"), mk("c3", 3, "r1"),
		mk("e1", 0, "r1"), mk("e2", 4, ""),
	}
	create(t, st, tasks...)
	byID := map[string]*state.Task{}
	for _, task := range tasks {
		byID[task.ID] = task
	}
	change := func(task *state.Task) {
		save(t, st, task)
		byID[task.ID] = task
	}
	change(claimed(t, byID["c1"], "A", 10))
	change(claimed(t, byID["c2"], "B", 11))
	change(claimed(t, byID["c3"], "A", 12))
	change(ended(t, claimed(t, byID["e1"], "A", 13), state.PhaseCompleted, 14))
	change(ended(t, byID["e2"], state.PhaseCancelled, 15))
	out := make([]*state.Task, 0, len(tasks))
	for _, task := range tasks {
		out = append(out, byID[task.ID])
	}
	return out
}

func (s suite) tasks(t *testing.T) {
	s.run(t, "oldest first, by CreatedAt then id", func(t *testing.T, st store.Store) {
		// Created out of order; b and c share a time.
		tasks := []*state.Task{queued("c", 1), queued("a", 2), queued("b", 1), queued("d", 0)}
		create(t, st, tasks...)
		page, next := tasksPage(t, st, store.Query{})
		sameIDs(t, "Tasks", page, []string{"d", "b", "c", "a"})
		same(t, "Tasks", page, oldestFirst(tasks))
		if next != "" {
			t.Errorf("Tasks of every task: cursor %q, want none", next)
		}
	})
	s.run(t, "pages give every task once and the last has no cursor", func(t *testing.T, st store.Store) {
		var tasks []*state.Task
		for i := range 7 {
			tasks = append(tasks, queued(fmt.Sprintf("t%d", i), (i*3)%5))
		}
		create(t, st, tasks...)
		want := ids(oldestFirst(tasks))
		for _, limit := range []int{1, 2, 3, 7, 10} {
			all, pages := allTasks(t, st, store.Query{Limit: limit})
			sameIDs(t, fmt.Sprintf("pages of %d", limit), all, want)
			if n := (len(tasks) + limit - 1) / limit; pages != n {
				t.Errorf("pages of %d: %d pages, want %d (an exactly full last page has no cursor)", limit, pages, n)
			}
		}
	})
	s.run(t, "no limit gives every task", func(t *testing.T, st store.Store) {
		var tasks []*state.Task
		for i := range 5 {
			tasks = append(tasks, queued(fmt.Sprintf("t%d", i), 5-i))
		}
		create(t, st, tasks...)
		page, next := tasksPage(t, st, store.Query{})
		sameIDs(t, "Tasks without a limit", page, ids(oldestFirst(tasks)))
		if next != "" {
			t.Errorf("Tasks without a limit: cursor %q", next)
		}
	})
	s.run(t, "filters by phase, agent and repo", func(t *testing.T, st store.Store) {
		tasks := oldestFirst(fleet(t, st))
		for _, q := range []store.Query{
			{Phase: state.PhaseQueued},
			{Phase: state.PhaseClaimed},
			{Phase: state.PhaseExpired},
			{Agent: "A"}, // e1 ended with A's lease: the lease holder is who the filter asks
			{Agent: "B"},
			{Agent: "nobody"},
			{Repo: "r1"},
			{Repo: "r2"},
			{Phase: state.PhaseClaimed, Agent: "A", Repo: "r1"},
		} {
			var want []string
			for _, task := range tasks {
				if q.Match(task) {
					want = append(want, task.ID)
				}
			}
			page, next := tasksPage(t, st, q)
			sameIDs(t, fmt.Sprintf("Tasks(%+v)", q), page, want)
			if next != "" {
				t.Errorf("Tasks(%+v): cursor %q", q, next)
			}
			q.Limit = 1
			all, _ := allTasks(t, st, q)
			sameIDs(t, fmt.Sprintf("pages of Tasks(%+v)", q), all, want)
		}
	})
	s.run(t, "searches titles in any case, with the other filters", func(t *testing.T, st store.Store) {
		tasks := oldestFirst(fleet(t, st))
		titles := map[string]string{"q1": "Fix the Login test", "q2": "fix the footer", "c1": "LOGIN: flaky", "c2": "Bump the version",
			"c3": "login page copy", "e1": "Fix login redirect", "e2": "unrelated"}
		for i, task := range tasks {
			if title, ok := titles[task.ID]; ok {
				tasks[i].Title = title
				save(t, st, tasks[i])
			}
		}
		for _, q := range []store.Query{
			{Title: "login"},
			{Title: "FIX"},
			{Title: "no such words"},
			{Title: "login", Agent: "A"},
			{Title: "login", Phase: state.PhaseCompleted},
			{Title: "the", Repo: "r2"},
		} {
			var want []string
			for _, task := range tasks {
				if q.Match(task) {
					want = append(want, task.ID)
				}
			}
			if q == (store.Query{Title: "login"}) && len(want) != 4 {
				t.Fatalf("the fleet's titles hold login in %d tasks, want 4: the test's own mistake", len(want))
			}
			page, next := tasksPage(t, st, q)
			sameIDs(t, fmt.Sprintf("Tasks(%+v)", q), page, want)
			if next != "" {
				t.Errorf("Tasks(%+v): cursor %q", q, next)
			}
			q.Limit = 1
			all, _ := allTasks(t, st, q)
			sameIDs(t, fmt.Sprintf("pages of Tasks(%+v)", q), all, want)
		}
	})
	s.run(t, "newest first, pages and filters alike", func(t *testing.T, st store.Store) {
		tasks := fleet(t, st)
		newest := oldestFirst(tasks)
		slices.Reverse(newest)
		for _, q := range []store.Query{
			{},
			{Repo: "r1"},
			{Phase: state.PhaseQueued},
			{Agent: "A"},
		} {
			q.Order = api.OrderNewest
			var want []string
			for _, task := range newest {
				if q.Match(task) {
					want = append(want, task.ID)
				}
			}
			page, next := tasksPage(t, st, q)
			sameIDs(t, fmt.Sprintf("Tasks(%+v)", q), page, want)
			if next != "" {
				t.Errorf("Tasks(%+v): cursor %q", q, next)
			}
			for _, limit := range []int{1, 2, 3} {
				q.Limit = limit
				all, _ := allTasks(t, st, q)
				sameIDs(t, fmt.Sprintf("pages of Tasks(%+v)", q), all, want)
			}
		}
		// The oldest is the default, and said so.
		for _, o := range []api.TaskOrder{"", api.OrderOldest} {
			page, _ := tasksPage(t, st, store.Query{Order: o})
			sameIDs(t, fmt.Sprintf("Tasks(Order: %q)", o), page, ids(oldestFirst(tasks)))
		}
	})
	s.run(t, "After naming an unknown task is an error", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		if page, next, err := st.Tasks(t.Context(), store.Query{After: "nope", Limit: 1}); err == nil {
			t.Errorf("Tasks(After: nope) = %q, %q, nil; want an error", ids(page), next)
		}
	})
	s.run(t, "returns copies", func(t *testing.T, st store.Store) {
		a := full("a", 1)
		create(t, st, a)
		page, _ := tasksPage(t, st, store.Query{})
		for _, task := range page {
			task.Title, task.Phase = "changed", state.PhaseFailed
		}
		same(t, "Task after changing what Tasks returned", get(t, st, "a"), a)
	})
}

func (s suite) count(t *testing.T) {
	s.run(t, "of an empty store is zero", func(t *testing.T, st store.Store) {
		sameCount(t, count(t, st), nil)
	})
	s.run(t, "counts the tasks by phase", func(t *testing.T, st store.Store) {
		tasks := fleet(t, st)
		want := map[state.Phase]int{}
		for _, task := range tasks {
			want[task.Phase]++
		}
		sameCount(t, count(t, st), want)

		save(t, st, claimed(t, get(t, st, "q1"), "B", 20))
		want[state.PhaseQueued]--
		want[state.PhaseClaimed]++
		sameCount(t, count(t, st), want)
	})
}

func (s suite) leased(t *testing.T) {
	s.run(t, "the tasks not ended whose lease an agent holds", func(t *testing.T, st store.Store) {
		fleet(t, st) // A holds c1, c3 and e1, which ended; B holds c2
		lapsed := claimed(t, get(t, st, "q1"), "A", 20)
		lapsed.Lease.Lapsed = true
		save(t, st, lapsed)
		later := claimed(t, get(t, st, "q2"), "A", 21)
		if err := later.Transition(state.PhaseExecutorStarting, "", at(22)); err != nil {
			t.Fatal(err)
		}
		save(t, st, later)

		for agent, want := range map[string][]string{
			"A":      {"c1", "c3", "q1", "q2"},
			"B":      {"c2"},
			"nobody": {},
		} {
			got, err := st.Leased(t.Context(), agent)
			if err != nil {
				t.Fatalf("Leased(%s): %v", agent, err)
			}
			got = slices.Clone(got)
			slices.SortFunc(got, func(a, b *state.Task) int { return strings.Compare(a.ID, b.ID) })
			sameIDs(t, fmt.Sprintf("Leased(%s), by id", agent), got, want)
			for _, task := range got {
				same(t, "Leased task "+task.ID, task, get(t, st, task.ID))
			}
		}

		// AgentAndLeased: the same tasks, with the agent's record when
		// it has one.
		putAgent(t, st, agent("A", 30))
		for id, want := range map[string][]string{"A": {"c1", "c3", "q1", "q2"}, "B": {"c2"}, "nobody": {}} {
			a, ok, got, err := st.AgentAndLeased(t.Context(), id)
			if err != nil {
				t.Fatalf("AgentAndLeased(%s): %v", id, err)
			}
			rec, had := agentOf(t, st, id)
			if ok != had {
				t.Errorf("AgentAndLeased(%s): ok %v, Agent says %v", id, ok, had)
			}
			same(t, fmt.Sprintf("AgentAndLeased(%s)'s record", id), a, rec)
			got = slices.Clone(got)
			slices.SortFunc(got, func(a, b *state.Task) int { return strings.Compare(a.ID, b.ID) })
			sameIDs(t, fmt.Sprintf("AgentAndLeased(%s)'s tasks", id), got, want)
			for _, task := range got {
				same(t, "AgentAndLeased task "+task.ID, task, get(t, st, task.ID))
			}
		}
	})
}

func (s suite) live(t *testing.T) {
	s.run(t, "gives every task not ended, once", func(t *testing.T, st store.Store) {
		tasks := fleet(t, st)
		want := map[string]*state.Task{}
		for _, task := range tasks {
			if !task.Phase.Terminal() {
				want[task.ID] = task
			}
		}
		got := map[string]int{}
		err := st.Live(t.Context(), func(task *state.Task) error {
			got[task.ID]++
			if w := want[task.ID]; w != nil {
				same(t, "Live's "+task.ID, task, w)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Live: %v", err)
		}
		for id, n := range got {
			if want[id] == nil {
				t.Errorf("Live gave %s (%s), which ended or does not exist", id, get(t, st, id).Phase)
			} else if n != 1 {
				t.Errorf("Live gave %s %d times", id, n)
			}
		}
		for id := range want {
			if got[id] == 0 {
				t.Errorf("Live did not give %s", id)
			}
		}
	})
	s.run(t, "gives copies", func(t *testing.T, st store.Store) {
		a := full("a", 1)
		create(t, st, a)
		err := st.Live(t.Context(), func(task *state.Task) error {
			task.Title, task.Phase = "changed", state.PhaseFailed
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "Task after changing what Live gave", get(t, st, "a"), a)
	})
	s.run(t, "returns fn's error", func(t *testing.T, st store.Store) {
		create(t, st, queued("a", 1), queued("b", 2))
		if err := st.Live(t.Context(), func(*state.Task) error { return errFn }); !errors.Is(err, errFn) {
			t.Errorf("Live with a failing fn = %v, want %v", err, errFn)
		}
	})
}

func (s suite) prune(t *testing.T) {
	s.run(t, "removes the tasks that ended before the cut, with their events", func(t *testing.T, st store.Store) {
		old, atCut, young := queued("old", 0), queued("at-cut", 0), queued("young", 0)
		running, waiting := queued("running", 0), queued("waiting", 0)
		create(t, st, old, atCut, young, running, waiting)
		for _, task := range []*state.Task{old, atCut, young, running} {
			appendLines(t, st, task.ID, 1, `"n":1`, `"n":2`)
		}
		save(t, st, ended(t, claimed(t, old, "A", 1), state.PhaseCompleted, 10))
		save(t, st, ended(t, atCut, state.PhaseCancelled, 20))
		save(t, st, ended(t, young, state.PhaseExpired, 30))
		save(t, st, claimed(t, running, "A", 2)) // not ended, last changed long ago

		n, err := st.Prune(t.Context(), at(20), 100)
		if err != nil || n != 1 {
			t.Fatalf("Prune(minute 20) = %d, %v; want 1 (the task that ended at minute 10)", n, err)
		}
		if task := get(t, st, "old"); task != nil {
			t.Errorf("Task(old) after its prune: %s", task.Phase)
		}
		if lines := events(t, st, "old"); len(lines) != 0 {
			t.Errorf("Events(old) after its prune:%s", showEvents(lines))
		}
		all, _ := allTasks(t, st, store.Query{})
		sameIDs(t, "Tasks after a prune", all, []string{"at-cut", "running", "waiting", "young"})
		sameCount(t, count(t, st), map[state.Phase]int{state.PhaseCancelled: 1, state.PhaseExpired: 1, state.PhaseClaimed: 1, state.PhaseQueued: 1})
		for _, id := range []string{"at-cut", "young", "running"} {
			sameEvents(t, "Events("+id+") after another's prune", events(t, st, id),
				[]store.EventLine{{Seq: 1, Line: keyed(1, `"n":1`)}, {Seq: 2, Line: keyed(2, `"n":2`)}})
		}
	})
	s.run(t, "removes up to limit", func(t *testing.T, st store.Store) {
		for i := range 5 {
			task := queued(fmt.Sprintf("e%d", i), 0)
			create(t, st, task)
			save(t, st, ended(t, task, state.PhaseFailed, 10+i))
		}
		create(t, st, queued("live", 0))
		for i, want := range []int{2, 2, 1, 0} {
			n, err := st.Prune(t.Context(), at(100), 2)
			if err != nil || n != want {
				t.Fatalf("Prune %d, limit 2 = %d, %v; want %d", i+1, n, err, want)
			}
		}
		all, _ := allTasks(t, st, store.Query{})
		sameIDs(t, "Tasks after the prunes", all, []string{"live"})
	})
}
