package pgstore

import (
	"context"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// A commit that queues tasks sends no NOTIFY of its own (PostgreSQL would
// make such commits one at a time, cluster-wide): the store's notifier
// tells the other replicas after the commits, one NOTIFY for all the
// tasks queued since its last.
func TestTasksQueuedAreToldAfterTheirCommitsInOneWord(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	s := open(t, dsn)
	ctx := context.Background()
	l := connect(t, dsn)
	if _, err := l.Exec(ctx, "LISTEN "+queuedChannel); err != nil {
		t.Fatal(err)
	}
	s.stopNotifier() // what the commits count waits

	create(t, s, task("t1", 1), task("t2", 2), leased("t3", 3, state.PhaseClaimed, "a1"))
	err := s.Update(ctx, []string{"t3"}, func(tx store.Tx) error {
		t3 := tx.Task("t3")
		t3.Phase, t3.Lease = state.PhaseQueued, nil
		tx.Save(t3)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Notifications come in commit order: a word committed after the
	// three is the first heard when none of them sent one.
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, 'marker:0')`, queuedChannel); err != nil {
		t.Fatal(err)
	}
	n, err := l.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "marker:0" {
		t.Fatalf("heard %q first: a commit that queued tasks sent a NOTIFY", n.Payload)
	}

	s.startNotifier()
	if n, err = l.WaitForNotification(ctx); err != nil {
		t.Fatal(err)
	}
	if want := s.id + ":3"; n.Payload != want {
		t.Fatalf("the notifier said %q, want %q: the three tasks in one word", n.Payload, want)
	}
	if strings.Count(n.Payload, ":") != 1 {
		t.Errorf("payload %q is not STORE:N", n.Payload)
	}
}
