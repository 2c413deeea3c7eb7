package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// load copies n tasks in phase into the store's database at once (COPY),
// their ids prefix and a number, created in order, and has PostgreSQL
// count them (ANALYZE).
func load(b *testing.B, s *Store, prefix string, n int, phase state.Phase) {
	b.Helper()
	tasks := make([]*state.Task, 0, n)
	for i := range n {
		t := task(fmt.Sprintf("%s%07d", prefix, i), i)
		t.Phase = phase
		tasks = append(tasks, t)
	}
	copyTasks(b, s, tasks)
	if _, err := s.pool.Exec(context.Background(), "ANALYZE tasks"); err != nil {
		b.Fatal(err)
	}
}

// copyTasks copies tasks into the store's database at once (COPY), their
// columns as a save writes them (holder by its trigger, which COPY fires).
func copyTasks(tb testing.TB, s *Store, tasks []*state.Task) {
	tb.Helper()
	rows := make([][]any, 0, len(tasks))
	for _, t := range tasks {
		doc, err := json.Marshal(t)
		if err != nil {
			tb.Fatal(err)
		}
		c := columnsOf(t)
		rows = append(rows, []any{t.ID, c.created, c.phase, c.repo, c.leaseAgent, c.endedAt, doc})
	}
	_, err := s.pool.CopyFrom(context.Background(), pgx.Identifier{"tasks"},
		[]string{"id", "created_ns", "phase", "repo", "lease_agent", "ended_at", "doc"}, pgx.CopyFromRows(rows))
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkClaim: claims of one task each, from parallel claimants in two
// replicas, over 100,000 ended tasks.
func BenchmarkClaim(b *testing.B) {
	dsn := pgtest.Start(b)
	stores := []*Store{open(b, dsn), open(b, dsn)}
	load(b, stores[0], "done", 100_000, state.PhaseCompleted)
	load(b, stores[0], "q", b.N, state.PhaseQueued)
	var n, empty atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := stores[n.Add(1)%2]
		for pb.Next() {
			for {
				id, err := claimOne(context.Background(), s, "agent")
				if err != nil {
					b.Error(err)
					return
				}
				if id != "" {
					break
				}
				// The last tasks were held by other claimants.
				empty.Add(1)
			}
		}
	})
	b.ReportMetric(float64(empty.Load())/float64(b.N), "empty/op")
}

// BenchmarkEvents: a batch of three events with its task's update, as an
// agent's report is accepted, from two replicas over 100,000 ended tasks.
func BenchmarkEvents(b *testing.B) {
	dsn := pgtest.Start(b)
	stores := []*Store{open(b, dsn), open(b, dsn)}
	load(b, stores[0], "done", 100_000, state.PhaseCompleted)
	const running = 64
	load(b, stores[0], "r", running, state.PhaseTurnStarted)
	var n, seq atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := n.Add(1)
		s := stores[w%2]
		id := fmt.Sprintf("r%07d", w%running)
		for pb.Next() {
			err := s.Update(context.Background(), []string{id}, func(tx store.Tx) error {
				t := tx.Task(id)
				for range 3 {
					k := seq.Add(1)
					key := fmt.Sprint("k", k)
					if seen, err := tx.Seen(id, key); err != nil || seen {
						return fmt.Errorf("seen %v: %v", seen, err)
					}
					tx.Append(id, key, state.EventProgress, int(k), []byte(`{"type":"log","line":"some output of the task"}`))
				}
				t.Progress.Percent++
				tx.Save(t)
				return nil
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
