package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// While a store listens it knows when nothing is queued, and a claim
// then asks the database nothing; a task queued anywhere ends that: on
// another replica (its notification), by the store's own create, or by
// a transaction that puts a task back in the queue.
func TestAnEmptyQueueIsKnownUntilATaskIsQueuedAnywhere(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	a, b := open(t, dsn), open(t, dsn)
	a.queue.maxAge = time.Hour // the test's hidden row below stays unseen
	listening(t, a)
	ctx := context.Background()

	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim of an empty queue: %q %v", id, err)
	}
	if empty, _ := a.queue.known(); !empty {
		t.Fatal("after a claim found nothing queued, the queue is not known to be empty")
	}
	// Known empty, a claim asks nothing: a task put in the queue behind
	// every store's back (no notification) is not seen, which proves it.
	if _, err := b.pool.Exec(ctx, `INSERT INTO tasks (id, created_ns, phase, doc) VALUES ('hidden', 1, 'queued', '{}')`); err != nil {
		t.Fatal(err)
	}
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim with the queue known empty: %q %v, want nothing asked", id, err)
	}
	if _, err := b.pool.Exec(ctx, `DELETE FROM tasks WHERE id = 'hidden'`); err != nil {
		t.Fatal(err)
	}

	// Queued on another replica: heard of, then claimed here.
	create(t, b, task("t1", 1))
	testkit.WaitFor(t, "a hears of the task b queued", func() bool { empty, _ := a.queue.known(); return !empty })
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "t1" {
		t.Fatalf("the claim after b queued t1: %q %v", id, err)
	}

	// Queued by the store itself: claimed at once, with no word to wait for.
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim of an empty queue: %q %v", id, err)
	}
	create(t, a, task("t2", 2))
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "t2" {
		t.Fatalf("the claim after a queued t2 itself: %q %v", id, err)
	}

	// Put back in the queue by a transaction of the store's own.
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim of an empty queue: %q %v", id, err)
	}
	err := a.Update(ctx, []string{"t2"}, func(tx store.Tx) error {
		t2 := tx.Task("t2")
		t2.Phase, t2.Lease = state.PhaseQueued, nil
		tx.Save(t2)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "t2" {
		t.Fatalf("the claim after t2 went back to the queue: %q %v", id, err)
	}
}

// An empty queue seen is trusted for a while only: a task queued where no
// word comes from (by hand in the database) is found once it is over.
func TestAnEmptyQueueSeenIsTrustedForAWhileOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.queue.maxAge = 50 * time.Millisecond
	listening(t, s)
	ctx := context.Background()
	if id, err := claimOne(ctx, s, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim of an empty queue: %q %v", id, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO tasks (id, created_ns, phase, doc) VALUES ('by-hand', 1, 'queued', $1)`, []byte(`{"id":"by-hand","phase":"queued"}`)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the empty queue seen is no longer trusted", func() bool { empty, _ := s.queue.known(); return !empty })
	if id, err := claimOne(ctx, s, "ag1"); err != nil || id != "by-hand" {
		t.Fatalf("the claim once the empty queue went stale: %q %v, want by-hand", id, err)
	}
}

// A listening session silent for longer than its check is asked whether
// it is alive, and goes on listening: the caches stay trusted, and a word
// sent afterwards still arrives.
func TestASilentListeningSessionIsCheckedAndGoesOn(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	a, b := open(t, dsn), open(t, dsn)
	a.listenCheck = 20 * time.Millisecond
	listening(t, a)
	time.Sleep(200 * time.Millisecond) // ten checks of silence: what is tested is that they pass
	if !isListening(a) {
		t.Fatal("the listening session ended after its silence was checked")
	}
	ctx := context.Background()
	if id, err := claimOne(ctx, a, "ag1"); err != nil || id != "" {
		t.Fatalf("a claim of an empty queue: %q %v", id, err)
	}
	create(t, b, task("t1", 1))
	testkit.WaitFor(t, "a hears of the task b queued", func() bool { empty, _ := a.queue.known(); return !empty })
}
