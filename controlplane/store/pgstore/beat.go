package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

var _ store.Beater = (*Store)(nil)

// beatLockSQL locks the tasks an agent says it runs ($1) and those it
// holds ($2), in id order as every lock is taken, and says which it holds.
const beatLockSQL = `SELECT id, doc, coalesce(holder = $2, false) FROM tasks
	WHERE id = ANY($1) OR holder = $2 ORDER BY id FOR UPDATE`

// Beat takes agent id's heartbeat in one transaction on one connection
// (store.Beater), taken ahead of other work (store.WithPriority): the agent's
// record and the tasks locked in the first round trip, the tasks fn saved
// and the record with COMMIT in the second. The commit is waited for
// (synchronous_commit) only when fn changed a task's phase, appended
// events or wrote notifications: a lease renewed and a record are the
// heartbeat's, and the next one says them again, as PutAgent's.
func (s *Store) Beat(ctx context.Context, id string, running []string, fn func(tx store.Tx, a *store.Agent, known bool, leased []*state.Task) error) error {
	running = slices.Compact(slices.Sorted(slices.Values(running)))
	if running == nil {
		running = []string{}
	}
	ctx = store.WithPriority(ctx, true)
	return s.inTx(ctx, "heartbeat", func(t *tx) error {
		var (
			row    agentRow
			leased []*state.Task
		)
		err := t.send(func(b *pgx.Batch) {
			b.Queue(agentSQL, id).Query(func(rows pgx.Rows) error {
				_, err := pgx.ForEachRow(rows, row.fields(), func() error { return nil })
				return err
			})
			b.Queue(beatLockSQL, running, id).Query(func(rows pgx.Rows) error {
				var (
					tid  string
					doc  []byte
					held bool
				)
				_, err := pgx.ForEachRow(rows, []any{&tid, &doc, &held}, func() error {
					task, seq, err := decodeRecord(doc)
					if err != nil {
						return fmt.Errorf("task %s: %w", tid, err)
					}
					t.locked[tid], t.phases[tid], t.seqs[tid] = task, task.Phase, max(t.seqs[tid], seq)
					if held {
						leased = append(leased, task)
					}
					return nil
				})
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("agent %s and its tasks: %w", id, err)
		}
		a, known, err := decodeAgent(id, row)
		if err != nil {
			return err
		}
		if err := fn(t, &a, known, leased); err != nil {
			return fnError{err}
		}
		record, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode agent %s: %w", id, err)
		}
		repos := a.View.Repos
		if repos == nil {
			repos = []string{}
		}
		t.agent = &agentWrite{id: id, record: record, repos: repos}
		return t.commit()
	})
}

// agentWrite is an agent's record a transaction writes with its commit
// (Beat's).
type agentWrite struct {
	id     string
	record []byte
	repos  []string
}

// durable reports whether the transaction's commit must be waited for:
// it changed a task's phase, appended events or wrote notifications.
func (t *tx) durable() bool {
	if len(t.events) > 0 || len(t.notes) > 0 {
		return true
	}
	for id, task := range t.saved {
		if p, ok := t.phases[id]; !ok || p != task.Phase {
			return true
		}
	}
	return false
}
