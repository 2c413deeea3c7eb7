package pgstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgeagent/agent/internal/testkit"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// A heartbeat is one connection of the pool, once: the agent's record and
// its tasks read and locked together, the leases and the record written
// with one commit.
func TestABeatTakesOneConnectionOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.stopNotifier() // its NOTIFY of the task queued below would count
	ctx := context.Background()
	create(t, s, leased("run", 1, state.PhaseTurnStarted, "a1"), leased("lost", 2, state.PhaseClaimed, "a1"),
		leased("theirs", 3, state.PhaseTurnStarted, "a2"), task("queued", 4))
	putAgentRecord(t, s, store.Agent{View: api.AgentView{AgentID: "a1", Hostname: "before"}})
	before := s.pool.Stat().AcquireCount()
	renewed := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	err := s.Beat(ctx, "a1", []string{"run", "theirs", "nothere"}, func(tx store.Tx, a *store.Agent, known bool, leased []*state.Task) error {
		if !known || a.View.Hostname != "before" {
			t.Errorf("the record read: known %v, %+v", known, a.View)
		}
		if got := ids(leased); got != "lost run" {
			t.Errorf("leased: %s, want lost run", got)
		}
		for _, id := range []string{"run", "lost", "theirs"} {
			if tx.Task(id) == nil {
				t.Errorf("task %s is not locked", id)
			}
		}
		if tx.Task("queued") != nil || tx.Task("nothere") != nil {
			t.Error("a task neither held nor named is locked")
		}
		r := tx.Task("run")
		r.Lease.ExpiresAt = renewed
		tx.Save(r)
		a.View.Hostname = "after"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.pool.Stat().AcquireCount() - before; n != 1 {
		t.Errorf("a heartbeat took %d connections of the pool, want 1", n)
	}
	if got := get(t, s, "run").Lease.ExpiresAt; !got.Equal(renewed) {
		t.Errorf("lease expires %v, want %v", got, renewed)
	}
	a, ok, err := s.Agent(ctx, "a1")
	if err != nil || !ok || a.View.Hostname != "after" {
		t.Errorf("the record stored: %+v %v %v", a.View, ok, err)
	}
}

// A heartbeat whose function fails stores nothing: neither the tasks it
// saved nor the record.
func TestABeatThatFailsStoresNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, leased("run", 1, state.PhaseTurnStarted, "a1"))
	err := s.Beat(ctx, "a1", []string{"run"}, func(tx store.Tx, a *store.Agent, known bool, _ []*state.Task) error {
		if known {
			t.Error("an agent with no record is known")
		}
		r := tx.Task("run")
		r.Phase = state.PhaseQueued
		tx.Save(r)
		a.View.Hostname = "h"
		return errTest
	})
	if err != errTest {
		t.Fatalf("Beat: %v, want the function's error", err)
	}
	if p := get(t, s, "run").Phase; p != state.PhaseTurnStarted {
		t.Errorf("phase %s after a failed heartbeat", p)
	}
	if _, ok, _ := s.Agent(ctx, "a1"); ok {
		t.Error("a failed heartbeat stored the agent's record")
	}
}

// With every connection but the heartbeats' reserve held by other work,
// and more of it waiting, a heartbeat is taken at once: it does not
// queue behind them.
func TestABeatGoesAheadOfWorkWaitingForTheConnections(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, dsn, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	create(t, s, leased("run", 1, state.PhaseTurnStarted, "a1"))
	if f := s.Pool(); f.Max != 4+int(reserveOf(4)) || f.Reserved != int(reserveOf(4)) {
		t.Fatalf("a pool of 4: %+v, want the heartbeats' reserve on top", f)
	}
	others := 4 + 1 // all they may hold, and one waiting
	hold := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	let := func() { once.Do(func() { close(hold) }); wg.Wait() }
	defer let()
	for range others {
		wg.Go(func() {
			err := s.Update(ctx, nil, func(store.Tx) error { <-hold; return nil })
			if err != nil {
				t.Error(err)
			}
		})
	}
	testkit.WaitFor(t, "other work holds its share and more waits", func() bool {
		f := s.Pool()
		return f.InUse == others-1 && f.Waiting[0].Kind == "other" && f.Waiting[0].Now == 1
	})
	err = s.Beat(ctx, "a1", []string{"run"}, func(tx store.Tx, a *store.Agent, _ bool, leased []*state.Task) error {
		a.View.Hostname = "h"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Pool(); f.Waiting[0].Now != 1 {
		t.Errorf("the other work stopped waiting before it was let go: %+v", f)
	}
	let()
	if a, ok, err := s.Agent(context.Background(), "a1"); !ok || err != nil || a.View.Hostname != "h" {
		t.Errorf("the heartbeat's record: %+v %v %v", a.View, ok, err)
	}
}

// putAgentRecord is PutAgent, failing the test on an error.
func putAgentRecord(t *testing.T, s *Store, a store.Agent) {
	t.Helper()
	if err := s.PutAgent(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// errTest is a function's own error.
var errTest = errors.New("the function failed")

// A heartbeat's lock of its agent's tasks, planned for any agent and any
// tasks named (the generic plan a prepared statement settles on), reads
// the indexes of ids and of holders: it never scans the table, which at a
// million stored tasks would be every heartbeat's cost.
func TestABeatsGenericPlanReadsTheIndexes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	s := open(t, dsn)
	ctx := context.Background()
	var tasks []*state.Task
	for i := range 5000 {
		tasks = append(tasks, leased(fmt.Sprintf("done%05d", i), i, state.PhaseCompleted, fmt.Sprintf("a%02d", i%20)))
	}
	for i := range 5 {
		tasks = append(tasks, leased(fmt.Sprintf("run%d", i), 20_000+i, state.PhaseTurnStarted, fmt.Sprintf("a%02d", i)))
	}
	copyTasks(t, s, tasks)
	if _, err := s.pool.Exec(ctx, "ANALYZE tasks"); err != nil {
		t.Fatal(err)
	}
	c := connect(t, dsn)
	for _, sql := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE beat AS " + beatLockSQL} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := c.Query(ctx, "EXPLAIN EXECUTE beat('{run1}', 'a01')")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "tasks_holder") {
		t.Errorf("a heartbeat's generic plan scans the table, or not the holders' index:\n%s", plan)
	}
}
