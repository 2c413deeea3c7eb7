package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// claimOne claims the oldest queued task for agent, as the server does:
// it leases it and stops. It returns the task's id, "" when none was
// queued.
func claimOne(ctx context.Context, s *Store, agent string) (string, error) {
	var got string
	err := s.Claim(ctx, func(tx store.Tx, t *state.Task) (bool, error) {
		if t.Phase != state.PhaseQueued {
			return false, fmt.Errorf("offered %s in phase %s", t.ID, t.Phase)
		}
		t.Phase = state.PhaseClaimed
		t.Lease = &state.Lease{ID: "lease-" + agent, AgentID: agent}
		tx.Save(t)
		got = t.ID
		return true, nil
	})
	return got, err
}

// TestClaimsFromTwoReplicasNeverGrantATaskTwice: claimants in two stores
// (two replicas) claim every queued task; each is granted once, to the
// claimant whose lease it stores.
func TestClaimsFromTwoReplicasNeverGrantATaskTwice(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	stores := []*Store{open(t, dsn), open(t, dsn)}
	ctx := context.Background()
	const tasks, claimants = 400, 16
	var all []*state.Task
	for i := range tasks {
		all = append(all, task(fmt.Sprintf("t%04d", i), i))
	}
	create(t, stores[0], all...)

	var (
		mu      sync.Mutex
		granted = map[string]string{} // task: claimant
		wg      sync.WaitGroup
		claims  atomic.Int64
	)
	start := time.Now()
	for c := range claimants {
		agent := fmt.Sprintf("agent%02d", c)
		wg.Go(func() {
			s := stores[c%2]
			for {
				id, err := claimOne(ctx, s, agent)
				if err != nil {
					t.Error(err)
					return
				}
				if id == "" {
					return
				}
				claims.Add(1)
				mu.Lock()
				if other, dup := granted[id]; dup {
					t.Errorf("%s granted to %s and %s", id, other, agent)
				}
				granted[id] = agent
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d claims from %d claimants in 2 replicas in %v: %.0f claims/s", claims.Load(), claimants, took.Round(time.Millisecond), float64(claims.Load())/took.Seconds())
	if len(granted) != tasks {
		t.Fatalf("%d of %d tasks granted", len(granted), tasks)
	}
	for id, agent := range granted {
		if got := get(t, stores[1], id); got.Phase != state.PhaseClaimed || got.Lease.AgentID != agent {
			t.Fatalf("%s granted to %s, stored %s leased to %+v", id, agent, got.Phase, got.Lease)
		}
	}
	if id, err := claimOne(ctx, stores[0], "late"); err != nil || id != "" {
		t.Fatalf("a claim with nothing queued: %q %v", id, err)
	}
}

// TestClaimOffersOldestFirstAndSkipsHeldTasks: a task an Update holds is
// passed over, not waited for; the rest come oldest first; what fn does
// not save stays queued.
func TestClaimOffersOldestFirstAndSkipsHeldTasks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	var all []*state.Task
	for i := range 10 {
		all = append(all, task(fmt.Sprintf("t%d", 9-i), i))
	}
	done := task("done", -1)
	done.Phase = state.PhaseCompleted
	create(t, s, append(all, done)...)

	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Update(ctx, []string{"t8"}, func(store.Tx) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	var offered []string
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.Claim(cctx, func(tx store.Tx, tk *state.Task) (bool, error) {
		offered = append(offered, tk.ID)
		if tx.Task(tk.ID) != tk {
			t.Errorf("the offered %s is not the transaction's locked copy", tk.ID)
		}
		if tk.ID == "t5" {
			tk.Phase = state.PhaseClaimed
			tx.Save(tk)
		}
		return false, nil
	})
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(offered); got != "[t9 t7 t6 t5 t4 t3 t2 t1 t0]" {
		t.Fatalf("offered %s", got)
	}
	if get(t, s, "t5").Phase != state.PhaseClaimed || get(t, s, "t6").Phase != state.PhaseQueued {
		t.Fatal("what Claim stored is not what fn saved")
	}

	boom := errors.New("boom")
	err = s.Claim(ctx, func(tx store.Tx, tk *state.Task) (bool, error) {
		tk.Phase = state.PhaseClaimed
		tx.Save(tk)
		return false, boom
	})
	if err != boom || get(t, s, "t9").Phase != state.PhaseQueued {
		t.Fatalf("a claim that failed: %v, stored %s", err, get(t, s, "t9").Phase)
	}
}

func leads(t *testing.T, s *Store) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := s.Lead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestLeadIsOneReplicasAndMoves: of two replicas one leads; the other
// takes over when the leader closes, and when PostgreSQL ends the
// leader's session.
func TestLeadIsOneReplicasAndMoves(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	dsn := c.NewDB(t)
	a, b := open(t, dsn), open(t, dsn)
	if !a.Shared() {
		t.Fatal("a PostgreSQL store is not shared")
	}
	if !leads(t, a) || leads(t, b) {
		t.Fatal("the first to ask does not lead alone")
	}
	if !leads(t, a) || leads(t, b) {
		t.Fatal("the lead moved by itself")
	}

	// The leader's session ends (an operator, a failover, a network cut).
	// The backend tells its client before it releases its locks: the
	// terminate waits (up to 10 s, PostgreSQL 14 on) until it is gone, or
	// the other replica might ask in between and find the lock held.
	if err := c.Exec(context.Background(), dbName(dsn), "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"); err != nil {
		t.Fatal(err)
	}
	if leads(t, a) {
		t.Fatal("a leader whose session was killed still leads")
	}
	if !leads(t, b) {
		t.Fatal("the other replica did not take over a lock whose session ended")
	}
	if leads(t, a) {
		t.Fatal("two leaders")
	}

	// The leader closes (stops, or its process dies): the other takes over.
	b.Close()
	if _, err := b.Lead(context.Background()); err == nil {
		t.Fatal("a closed store leads")
	}
	testkit.WaitFor(t, "the lead to move when its holder closed", func() bool { return leads(t, a) })
}

func dbName(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	return cfg.Database
}

// TestAStoreOutlivesPostgreSQLRestarts: while PostgreSQL is down calls
// fail; once it is back they work again, without reopening the store,
// after a clean restart and after a crash.
func TestAStoreOutlivesPostgreSQLRestarts(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	s := open(t, c.NewDB(t))
	ctx := context.Background()
	create(t, s, task("a", 1))
	if !leads(t, s) {
		t.Fatal("the only replica does not lead")
	}
	bump := func() error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return s.Update(ctx, []string{"a"}, func(tx store.Tx) error {
			a := tx.Task("a")
			a.Progress.Percent++
			tx.Save(a)
			return nil
		})
	}
	if err := bump(); err != nil {
		t.Fatal(err)
	}

	c.Stop(t)
	if err := bump(); err == nil {
		t.Fatal("an update while PostgreSQL is down succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) && err.Error()[:8] != "pgstore:" {
		t.Fatalf("an error without its context: %v", err)
	}
	// The first look finds the session gone; the next cannot connect.
	if ok, _ := s.Lead(ctx); ok {
		t.Fatal("leads with PostgreSQL down")
	}
	if ok, err := s.Lead(ctx); ok || err == nil {
		t.Fatalf("leads with PostgreSQL down: %v %v", ok, err)
	}
	c.Start(t)
	if err := bump(); err != nil {
		t.Fatalf("the first update after a restart: %v", err)
	}
	if !leads(t, s) {
		t.Fatal("the lead was not taken again after a restart")
	}

	c.Kill(t)
	c.Start(t)
	if err := bump(); err != nil {
		t.Fatalf("the first update after a crash: %v", err)
	}
	if _, err := claimOne(ctx, s, "x"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "a").Progress.Percent; got != 3 {
		t.Fatalf("3 updates answered done, %d stored", got)
	}
}

// TestADeadlockRunsTheTransactionAgain: two Updates that each save the
// task the other locked deadlock; PostgreSQL breaks one, which runs
// again, and both are stored.
func TestADeadlockRunsTheTransactionAgain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, task("x", 1), task("y", 2))
	var (
		both  sync.WaitGroup
		runs  atomic.Int64
		wg    sync.WaitGroup
		errs  = make(chan error, 2)
		first = [2]atomic.Bool{}
	)
	both.Add(2)
	for i, pair := range [][2]string{{"x", "y"}, {"y", "x"}} {
		wg.Go(func() {
			errs <- s.Update(ctx, []string{pair[0]}, func(tx store.Tx) error {
				runs.Add(1)
				if first[i].CompareAndSwap(false, true) {
					both.Done()
					both.Wait() // each holds its lock before it writes
				}
				mine := tx.Task(pair[0])
				mine.Title = "by " + pair[0]
				tx.Save(mine)
				other := task(pair[1], map[string]int{"x": 1, "y": 2}[pair[1]])
				other.Prompt = "touched by " + pair[0]
				tx.Save(other) // not locked: its row lock is taken at write
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() < 3 {
		t.Fatalf("fn ran %d times: no deadlock was broken and run again", runs.Load())
	}
	// Stored as if one ran after the other: the last wrote both tasks.
	x, y := get(t, s, "x"), get(t, s, "y")
	switch {
	case x.Title == "by x" && y.Title == "" && y.Prompt == "touched by x":
	case y.Title == "by y" && x.Title == "" && x.Prompt == "touched by y":
	default:
		t.Fatalf("not the outcome of either order: x %q %q, y %q %q", x.Title, x.Prompt, y.Title, y.Prompt)
	}
}

// TestClaimsWhileAReplicasSessionsAreKilled: one replica's sessions are
// ended mid-load (as when it dies, or loses PostgreSQL); the other
// carries on. No task is granted twice; every claim answered done is
// stored; a claim answered with an error may have committed (its commit
// was on its way), and only those are stored without an answer.
func TestClaimsWhileAReplicasSessionsAreKilled(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	dsn := c.NewDB(t)
	stores := []*Store{open(t, dsn+"&application_name=replica0"), open(t, dsn+"&application_name=replica1")}
	ctx := context.Background()
	const tasks = 600
	var all []*state.Task
	for i := range tasks {
		all = append(all, task(fmt.Sprintf("t%04d", i), i))
	}
	create(t, stores[1], all...)

	var (
		mu      sync.Mutex
		granted = map[string]string{}
		failed  atomic.Int64
		wg      sync.WaitGroup
		claims  atomic.Int64
	)
	for w := range 8 {
		agent := fmt.Sprintf("agent%d", w)
		wg.Go(func() {
			s := stores[w%2]
			for {
				id, err := claimOne(ctx, s, agent)
				if err != nil {
					if w%2 == 1 {
						t.Errorf("the replica left alone failed: %v", err)
						return
					}
					failed.Add(1)
					time.Sleep(time.Millisecond) // a client's pause before it asks again, not a wait
					continue
				}
				if id == "" {
					if w%2 == 0 {
						return
					}
					// Tasks the killed replica held come back when its
					// transactions are rolled back.
					if left, _, _ := s.Tasks(ctx, store.Query{Phase: state.PhaseQueued, Limit: 1}); len(left) == 0 {
						return
					}
					continue
				}
				claims.Add(1)
				mu.Lock()
				if other, dup := granted[id]; dup {
					t.Errorf("%s granted to %s and %s", id, other, agent)
				}
				granted[id] = agent
				mu.Unlock()
			}
		})
	}
	testkit.WaitFor(t, "a quarter of the tasks claimed", func() bool { return claims.Load() >= tasks/4 })
	for range 3 {
		if err := c.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'replica0'"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the scenario: three kills spread over the claims
	}
	wg.Wait()
	t.Logf("%d claims answered done, %d failed in the killed replica", len(granted), failed.Load())

	unanswered := 0
	for _, tk := range all {
		got := get(t, stores[1], tk.ID)
		agent, ok := granted[tk.ID]
		switch {
		case ok && (got.Phase != state.PhaseClaimed || got.Lease.AgentID != agent):
			t.Errorf("%s granted to %s, stored %s %+v", tk.ID, agent, got.Phase, got.Lease)
		case !ok && got.Phase == state.PhaseClaimed:
			unanswered++
		case !ok:
			t.Errorf("%s left %s", tk.ID, got.Phase)
		}
	}
	if int64(unanswered) > failed.Load() {
		t.Fatalf("%d tasks claimed without an answer, more than the %d claims that failed", unanswered, failed.Load())
	}
}
