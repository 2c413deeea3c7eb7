package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

var base = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// task is a queued task created at base plus n nanoseconds: tasks a
// nanosecond apart share PostgreSQL's microsecond.
func task(id string, n int) *state.Task {
	at := base.Add(time.Duration(n))
	return &state.Task{ID: id, Prompt: "do " + id, Phase: state.PhaseQueued, CreatedAt: at, UpdatedAt: at}
}

func create(t *testing.T, s *Store, tasks ...*state.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := s.Create(context.Background(), task); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, s *Store, id string) *state.Task {
	t.Helper()
	task, err := s.Task(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func ids(tasks []*state.Task) string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return strings.Join(out, " ")
}

func sameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("got  %s\nwant %s", g, w)
	}
}

func TestCreateAndTask(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	want := task("t1", 0)
	want.Repo = "web"
	want.Attempts = []state.Attempt{{AttemptID: "a1", Number: 1, Status: state.AttemptRunning}}
	create(t, s, want)
	sameJSON(t, get(t, s, "t1"), want)
	if got := get(t, s, "nope"); got != nil {
		t.Fatalf("a task that does not exist: %+v", got)
	}
	err := s.Create(ctx, task("t1", 5))
	if err == nil || !strings.Contains(err.Error(), "pgstore: create task t1") {
		t.Fatalf("creating an id that exists: %v", err)
	}
	// The copy is the caller's: changing it changes nothing stored.
	got := get(t, s, "t1")
	got.Prompt = "changed"
	if get(t, s, "t1").Prompt != want.Prompt {
		t.Fatal("a copy changed the store")
	}
}

func TestTasksPagesInOrderWithFilters(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	// Created a nanosecond apart, ids against the time's order: the
	// order is CreatedAt's to the nanosecond.
	var all []*state.Task
	for i := range 10 {
		tk := task(fmt.Sprintf("t%02d", 9-i), i)
		if i%2 == 0 {
			tk.Repo = "web"
		}
		if i%3 == 0 {
			tk.Phase = state.PhaseClaimed
			tk.Lease = &state.Lease{ID: "l", AgentID: "a1"}
		}
		all = append(all, tk)
	}
	// Two tasks at the same instant: by id.
	same1, same0 := task("s1", 20), task("s0", 20)
	all = append(all, same0, same1)
	create(t, s, all[3], all[0], same1, all[9], all[1], all[2], all[4], all[5], same0, all[6], all[7], all[8])

	var pages []string
	cursor := ""
	for {
		page, next, err := s.Tasks(ctx, store.Query{Limit: 5, After: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(page))
		if next == "" {
			break
		}
		if next != page[len(page)-1].ID {
			t.Fatalf("cursor %q after a page ending %q", next, page[len(page)-1].ID)
		}
		cursor = next
	}
	want := []string{"t09 t08 t07 t06 t05", "t04 t03 t02 t01 t00", "s0 s1"}
	if !reflect.DeepEqual(pages, want) {
		t.Fatalf("pages %q, want %q", pages, want)
	}

	for _, c := range []struct {
		q    store.Query
		want string
	}{
		{store.Query{}, "t09 t08 t07 t06 t05 t04 t03 t02 t01 t00 s0 s1"},
		{store.Query{Repo: "web"}, "t09 t07 t05 t03 t01"},
		{store.Query{Agent: "a1"}, "t09 t06 t03 t00"},
		{store.Query{Phase: state.PhaseClaimed, Repo: "web"}, "t09 t03"},
		{store.Query{Phase: state.PhaseQueued, Repo: "web", After: "t07", Limit: 2}, "t05 t01"},
		{store.Query{Agent: "nobody"}, ""},
	} {
		page, next, err := s.Tasks(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if ids(page) != c.want {
			t.Errorf("%+v: %q, want %q", c.q, ids(page), c.want)
		}
		if next != "" {
			t.Errorf("%+v: a next page after all (%q)", c.q, next)
		}
		for _, tk := range page {
			if !c.q.Match(tk) {
				t.Errorf("%+v selected %s, which it does not match", c.q, tk.ID)
			}
		}
	}
	// A page of exactly what is left says nothing follows.
	page, next, err := s.Tasks(ctx, store.Query{Repo: "web", Limit: 5})
	if err != nil || len(page) != 5 || next != "" {
		t.Fatalf("the last full page: %d tasks, next %q, %v", len(page), next, err)
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a, b, c := task("a", 1), task("b", 2), task("c", 3)
	c.Phase = state.PhaseCompleted
	create(t, s, a, b, c)
	got, err := s.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[state.Phase]int{state.PhaseQueued: 2, state.PhaseCompleted: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("count %v, want %v", got, want)
	}
}

func TestUpdateStoresSavesAndEventsTogether(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, task("a", 1), task("b", 2))
	err := s.Update(ctx, []string{"b", "a", "missing", "a"}, func(tx store.Tx) error {
		if tx.Task("missing") != nil {
			t.Error("a task that does not exist is locked")
		}
		a := tx.Task("a")
		if a == nil || tx.Task("b") == nil {
			t.Fatal("the named tasks are not locked")
		}
		a.Phase = state.PhaseClaimed
		a.Lease = &state.Lease{ID: "l1", AgentID: "agent1"}
		if tx.Task("a").Phase != state.PhaseClaimed {
			t.Error("Task does not give the transaction's own copy")
		}
		tx.Save(a)
		for i, key := range []string{"k1", "k2", "k3"} {
			seen, err := tx.Seen("a", key)
			if err != nil || seen {
				t.Fatalf("Seen(%s) before its Append: %v %v", key, seen, err)
			}
			line := []byte(fmt.Sprintf(`{"seq":%d}`, i+1))
			if key == "k2" {
				line = nil // cut: the key alone
			}
			tx.Append("a", key, state.EventProgress, i+1, line)
			if seen, err := tx.Seen("a", key); err != nil || !seen {
				t.Fatalf("Seen(%s) after its Append in the same transaction: %v %v", key, seen, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "a"); got.Phase != state.PhaseClaimed || got.Lease.AgentID != "agent1" {
		t.Fatalf("saved task: %+v", got)
	}
	if got := get(t, s, "b"); got.Phase != state.PhaseQueued {
		t.Fatalf("a task locked and not saved changed: %+v", got)
	}
	// Keys are seen by later transactions, stored line or not.
	err = s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		for _, key := range []string{"k1", "k2", "k3"} {
			if seen, err := tx.Seen("a", key); err != nil || !seen {
				t.Errorf("Seen(%s) after a committed Append: %v %v", key, seen, err)
			}
		}
		if seen, _ := tx.Seen("b", "k1"); seen {
			t.Error("a key is seen for another task")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lines, more, err := s.Events(ctx, "a", 0, 10, 1<<20)
	if err != nil || more {
		t.Fatal(more, err)
	}
	sameJSON(t, lines, []store.EventLine{{Seq: 1, Line: []byte(`{"seq":1}`)}, {Seq: 3, Line: []byte(`{"seq":3}`)}})
}

func TestUpdateWithAnErrorStoresNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, task("a", 1))
	boom := errors.New("boom")
	err := s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		a := tx.Task("a")
		a.Phase = state.PhaseCancelled
		tx.Save(a)
		tx.Append("a", "k1", state.EventProgress, 1, []byte("{}"))
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, not fn's error as it is", err)
	}
	if get(t, s, "a").Phase != state.PhaseQueued {
		t.Fatal("a save of a failed Update was stored")
	}
	s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		if seen, err := tx.Seen("a", "k1"); err != nil || seen {
			t.Errorf("a key of a failed Update is seen: %v %v", seen, err)
		}
		return nil
	})
	if lines, _, _ := s.Events(ctx, "a", 0, 10, 1<<20); len(lines) != 0 {
		t.Fatalf("events of a failed Update: %d", len(lines))
	}
}

func TestSaveOfATaskThatIsNotThereFails(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	err := s.Update(context.Background(), nil, func(tx store.Tx) error {
		tx.Save(task("ghost", 1))
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "pgstore: update tasks: save task ghost") {
		t.Fatalf("saving a task that does not exist: %v", err)
	}
}

func TestUpdatesOfOneTaskSerialize(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	stores := []*Store{open(t, dsn), open(t, dsn)} // two replicas
	ctx := context.Background()
	create(t, stores[0], task("n", 1))
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			for range each {
				err := s.Update(ctx, []string{"n"}, func(tx store.Tx) error {
					n := tx.Task("n")
					n.Progress.Percent++
					tx.Save(n)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := get(t, stores[1], "n").Progress.Percent; got != workers*each {
		t.Fatalf("%d increments from two replicas stored %d", workers*each, got)
	}
}

func TestEventsPages(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, task("a", 1))
	err := s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		for i := 1; i <= 10; i++ {
			tx.Append("a", fmt.Sprint("k", i), state.EventProgress, i, []byte(strings.Repeat("x", 10)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seqs := func(lines []store.EventLine) (out []int) {
		for _, l := range lines {
			out = append(out, l.Seq)
		}
		return out
	}
	for _, c := range []struct {
		after, limit int
		maxBytes     int64
		want         []int
		more         bool
	}{
		{0, 3, 1 << 20, []int{1, 2, 3}, true},
		{3, 3, 1 << 20, []int{4, 5, 6}, true},
		{7, 3, 1 << 20, []int{8, 9, 10}, false},
		{7, 0, 1 << 20, []int{8, 9, 10}, false},
		{0, 10, 25, []int{1, 2}, true},  // bytes cap
		{0, 10, 5, []int{1}, true},      // at least one
		{10, 10, 1 << 20, nil, false},   // nothing after the last
		{0, 10, 100, seqsTo(10), false}, // exactly fits
	} {
		lines, more, err := s.Events(ctx, "a", c.after, c.limit, c.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(seqs(lines), c.want) || more != c.more {
			t.Errorf("after %d limit %d max %d: %v more %v, want %v more %v", c.after, c.limit, c.maxBytes, seqs(lines), more, c.want, c.more)
		}
	}
}

func seqsTo(n int) (out []int) {
	for i := 1; i <= n; i++ {
		out = append(out, i)
	}
	return out
}

func TestLeasedAndLive(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	lease := func(tk *state.Task, agent string, lapsed bool) *state.Task {
		tk.Phase = state.PhaseTurnStarted
		tk.Lease = &state.Lease{ID: "l-" + tk.ID, AgentID: agent, Lapsed: lapsed}
		return tk
	}
	done := lease(task("done", 4), "a1", false)
	done.Phase = state.PhaseCompleted
	create(t, s, lease(task("x", 1), "a1", false), lease(task("y", 2), "a1", true), lease(task("z", 3), "a2", false), done, task("q", 5))
	got, err := s.Leased(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if ids(got) != "x y" {
		t.Fatalf("leased to a1: %q, want x y (lapsed too, not the ended one)", ids(got))
	}

	// More live tasks than a chunk, and fn may call Update meanwhile.
	var many []*state.Task
	for i := range liveChunk + 10 {
		many = append(many, task(fmt.Sprintf("m%04d", i), 10+i))
	}
	create(t, s, many...)
	seen := map[string]bool{}
	err = s.Live(ctx, func(tk *state.Task) error {
		if seen[tk.ID] {
			t.Errorf("%s twice", tk.ID)
		}
		seen[tk.ID] = true
		if tk.ID == "q" {
			return s.Update(ctx, []string{"q"}, func(tx store.Tx) error {
				q := tx.Task("q")
				q.Phase = state.PhaseExpired
				tx.Save(q)
				return nil
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4+len(many) || seen["done"] {
		t.Fatalf("Live saw %d tasks (done: %v), want %d", len(seen), seen["done"], 4+len(many))
	}
	stop := errors.New("stop")
	if err := s.Live(ctx, func(*state.Task) error { return stop }); err != stop {
		t.Fatalf("Live returned %v, not fn's error", err)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	ended := func(id string, at time.Time) *state.Task {
		tk := task(id, 0)
		tk.Phase = state.PhaseCompleted
		tk.UpdatedAt = at
		return tk
	}
	create(t, s, ended("old1", base.Add(-3*time.Hour)), ended("old2", base.Add(-2*time.Hour)),
		ended("new", base.Add(time.Hour)), task("live", 0))
	err := s.Update(ctx, []string{"old1", "old2", "new"}, func(tx store.Tx) error {
		for _, id := range []string{"old1", "old2", "new"} {
			tx.Append(id, "k", state.EventProgress, 1, []byte("line"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, base, 1)
	if err != nil || n != 1 {
		t.Fatalf("prune with limit 1: %d %v", n, err)
	}
	if get(t, s, "old1") != nil || get(t, s, "old2") == nil {
		t.Fatal("the first pruned is not the one that ended first")
	}
	if n, err = s.Prune(ctx, base, 10); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	for _, id := range []string{"new", "live"} {
		if get(t, s, id) == nil {
			t.Fatalf("%s was pruned", id)
		}
	}
	for _, id := range []string{"old1", "old2"} {
		if lines, _, _ := s.Events(ctx, id, 0, 10, 1<<20); len(lines) != 0 {
			t.Fatalf("the events of pruned %s stay", id)
		}
	}
	if lines, _, _ := s.Events(ctx, "new", 0, 10, 1<<20); len(lines) != 1 {
		t.Fatal("the events of a kept task went")
	}
}

func TestAgents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Register(ctx, "a1", "h1", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, "a1", "h2", false); !errors.Is(err, store.ErrRegistered) {
		t.Fatalf("registering again: %v", err)
	}
	if id, _ := s.AgentByToken(ctx, "h1"); id != "a1" {
		t.Fatalf("by h1: %q", id)
	}
	if err := s.Register(ctx, "a1", "h2", true); err != nil {
		t.Fatal(err)
	}
	if id, _ := s.AgentByToken(ctx, "h1"); id != "" {
		t.Fatalf("a replaced hash still finds %q", id)
	}
	if id, _ := s.AgentByToken(ctx, "h2"); id != "a1" {
		t.Fatalf("by h2: %q", id)
	}

	now := base
	a := store.Agent{View: api.AgentView{AgentID: "a1", Hostname: "h", LastHeartbeat: now, Repos: []string{"web", "api"},
		Labels: map[string]string{"zone": "b"}}, Missing: map[string]int{"t1": 2}}
	if err := s.PutAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAgent(ctx, store.Agent{View: api.AgentView{AgentID: "a0"}}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Agent(ctx, "a1")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	sameJSON(t, got, a)
	if _, ok, _ := s.Agent(ctx, "nobody"); ok {
		t.Fatal("an agent that never reported has a record")
	}
	all, err := s.Agents(ctx)
	if err != nil || len(all) != 2 || all[0].View.AgentID != "a0" || all[1].View.AgentID != "a1" {
		t.Fatalf("agents: %+v %v", all, err)
	}
	for repo, want := range map[string]bool{"web": true, "api": true, "docs": false} {
		if got, err := s.Serves(ctx, repo); err != nil || got != want {
			t.Errorf("serves %s: %v %v", repo, got, err)
		}
	}
	a.View.Repos = []string{"docs"}
	s.PutAgent(ctx, a)
	if got, _ := s.Serves(ctx, "web"); got {
		t.Error("a repository the agent no longer announces is served")
	}

	if had, err := s.Revoke(ctx, "a1"); err != nil || !had {
		t.Fatalf("revoke: %v %v", had, err)
	}
	if had, _ := s.Revoke(ctx, "a1"); had {
		t.Fatal("revoked twice")
	}
	if id, _ := s.AgentByToken(ctx, "h2"); id != "" {
		t.Fatal("a revoked hash still finds its agent")
	}
	if _, ok, _ := s.Agent(ctx, "a1"); !ok {
		t.Fatal("revoking forgot the agent's record")
	}
	// A revoked id registers again without replace.
	if err := s.Register(ctx, "a1", "h3", false); err != nil {
		t.Fatal(err)
	}
	// A hash is one agent's.
	if err := s.Register(ctx, "a2", "h3", false); err == nil {
		t.Fatal("two agents with one token hash")
	}
}

func TestOpenTwiceAndAtOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { open(t, dsn) })
	}
	wg.Wait()
	open(t, dsn) // the schema is there: nothing to do
}

func TestErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-pw"
	for _, dsn := range []string{
		"postgres://edge:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"host=127.0.0.1 port=1 user=edge password=" + secret + " dbname=db sslmode=disable connect_timeout=2",
		"postgres://edge:" + secret + "@127.0.0.1:1/db?sslmode=bogus",
	} {
		s, err := Open(context.Background(), dsn, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("opened %s", dsn)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
		if !strings.HasPrefix(err.Error(), "pgstore: ") {
			t.Errorf("an error without its context: %v", err)
		}
	}
}

// TestCommitsAreDurableWhereTheServerSaysOtherwise: a database whose
// default is synchronous_commit off still gets durable commits from the
// store; a DSN that sets it is the operator's choice.
func TestCommitsAreDurableWhereTheServerSaysOtherwise(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	dsn := c.NewDB(t)
	if err := c.Exec(context.Background(), dbName(dsn), "ALTER DATABASE "+dbName(dsn)+" SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	setting := func(s *Store) string {
		var v string
		if err := s.pool.QueryRow(context.Background(), "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := setting(open(t, dsn)); got != "on" {
		t.Fatalf("synchronous_commit %s in the store's sessions", got)
	}
	if got := setting(open(t, dsn+"&synchronous_commit=local")); got != "local" {
		t.Fatalf("the DSN's synchronous_commit=local became %s", got)
	}
}

// A task's document written when the task carried the store's
// bookkeeping (events_applied among its keys, as every document of a
// store from then has it) reads the same: the seq of its last stored
// event is what it says, the task has no such field, and the next append
// goes on from it and is written back under the same key.
func TestADocumentWrittenWhenTheTaskKeptTheBookkeepingReads(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	old := task("a", 1)
	doc, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	// As that code wrote it: the task's keys, events_applied among them.
	var keys map[string]any
	if err := json.Unmarshal(doc, &keys); err != nil {
		t.Fatal(err)
	}
	keys["events_applied"] = 7
	if doc, err = json.Marshal(keys); err != nil {
		t.Fatal(err)
	}
	create(t, s, old)
	if _, err := s.pool.Exec(ctx, `UPDATE tasks SET doc = $2 WHERE id = $1`, "a", doc); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, get(t, s, "a"), old)
	err = s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		if got := tx.LastSeq("a"); got != 7 {
			t.Errorf("LastSeq = %d, want 7", got)
		}
		tx.Append("a", "k8", state.EventProgress, 8, []byte(`{"key":"k8"}`))
		return nil // not saved: the document keeps the seq all the same
	})
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := s.pool.QueryRow(ctx, `SELECT doc FROM tasks WHERE id = 'a'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	var said struct {
		EventsApplied int `json:"events_applied"`
	}
	if err := json.Unmarshal(stored, &said); err != nil || said.EventsApplied != 8 {
		t.Errorf("the document says events_applied %d (%v), want 8: %s", said.EventsApplied, err, stored)
	}
	err = s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
		if got := tx.LastSeq("a"); got != 8 {
			t.Errorf("LastSeq after an append = %d, want 8", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
