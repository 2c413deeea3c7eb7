package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// tx is a transaction's view of its locked tasks (store.Tx): their
// decoded copies, what it saved, and the events it appended, written at
// commit.
type tx struct {
	ctx    context.Context
	pg     pgx.Tx
	locked map[string]*state.Task
	saved  map[string]*state.Task
	events []appended
	keys   map[eventKey]bool // appended in this transaction
}

type eventKey struct{ task, key string }

type appended struct {
	eventKey
	seq  int
	line []byte // nil: the key alone
}

var _ store.Tx = (*tx)(nil)

func newTx(ctx context.Context, pg pgx.Tx) *tx {
	return &tx{ctx: ctx, pg: pg, locked: map[string]*state.Task{}, saved: map[string]*state.Task{}, keys: map[eventKey]bool{}}
}

// Task returns the transaction's copy of locked task id, nil when it is
// not locked.
func (t *tx) Task(id string) *state.Task { return t.locked[id] }

// Save stores task's changes at commit. The last Save of an id counts.
func (t *tx) Save(task *state.Task) { t.saved[task.ID] = task }

// Seen reports whether key was appended for the task in this transaction
// or a committed one.
func (t *tx) Seen(taskID, key string) (bool, error) {
	if t.keys[eventKey{taskID, key}] {
		return true, nil
	}
	var seen bool
	err := t.pg.QueryRow(t.ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE task_id = $1 AND key = $2)`, taskID, key).Scan(&seen)
	if err != nil {
		return false, fmt.Errorf("pgstore: event keys of task %s: %w", taskID, err)
	}
	return seen, nil
}

// Append records key, and line as event seq unless line is nil, at
// commit. A key appended twice is recorded once, its first line kept.
func (t *tx) Append(taskID, key string, seq int, line []byte) {
	k := eventKey{taskID, key}
	if t.keys[k] {
		return
	}
	t.keys[k] = true
	t.events = append(t.events, appended{eventKey: k, seq: seq, line: slices.Clone(line)})
}

// lock locks the tasks the query selects (id and doc columns), decodes
// them and adds them to the transaction's view; it returns them in the
// query's order.
func (t *tx) lock(sql string, args ...any) ([]*state.Task, error) {
	rows, err := t.pg.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var (
		tasks []*state.Task
		id    string
		doc   []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
		task, err := decode(doc)
		if err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
		t.locked[id] = task
		tasks = append(tasks, task)
		return nil
	})
	return tasks, err
}

// write sends the appended events, then the saved tasks, in one batch.
// A saved task that does not exist is an error.
func (t *tx) write() error {
	if len(t.events) == 0 && len(t.saved) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, e := range t.events {
		if e.line == nil {
			b.Queue(`INSERT INTO events (task_id, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, e.task, e.key)
		} else {
			b.Queue(`INSERT INTO events (task_id, key, seq, line) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, e.task, e.key, e.seq, e.line)
		}
	}
	ids := make([]string, 0, len(t.saved))
	for id := range t.saved {
		ids = append(ids, id)
	}
	slices.Sort(ids) // a fixed order, should a saved task not be locked yet
	for _, id := range ids {
		task := t.saved[id]
		doc, err := json.Marshal(task)
		if err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		c := columnsOf(task)
		b.Queue(`UPDATE tasks SET created_ns = $2, phase = $3, repo = $4, lease_agent = $5, ended_at = $6, doc = $7 WHERE id = $1`,
			id, c.created, c.phase, c.repo, c.leaseAgent, c.endedAt, doc)
	}
	br := t.pg.SendBatch(t.ctx, &b)
	for range t.events {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("append events: %w", err)
		}
	}
	for _, id := range ids {
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("no such task")
		}
		if err != nil {
			br.Close()
			return fmt.Errorf("save task %s: %w", id, err)
		}
	}
	return br.Close()
}

// Update runs fn with the tasks named by ids locked, in one transaction,
// then stores the events fn appended and the tasks it saved, and commits.
// When fn returns an error the transaction is rolled back and Update
// returns that error. fn may run more than once: when PostgreSQL breaks
// the transaction (a deadlock, a serialization failure) or its connection
// failed before anything was sent, the whole of it runs again, and only
// the last run's saves count.
func (s *Store) Update(ctx context.Context, ids []string, fn func(store.Tx) error) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return s.inTx(ctx, "update tasks", func(pg pgx.Tx) error {
		t := newTx(ctx, pg)
		if len(ids) > 0 {
			// In id order: two Updates lock their common tasks in the
			// same order, and never deadlock.
			if _, err := t.lock(`SELECT id, doc FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if err := fn(t); err != nil {
			return fnError{err}
		}
		return t.write()
	})
}

// Claim chunks: the first lock of queued tasks takes claimFirst of them,
// each next one twice as many, up to claimMax. Most claims take one task,
// and lock no other: a concurrent claim is not made to pass over tasks
// nobody takes. A claimant that passes over many is not held to small
// steps.
const (
	claimFirst = 1
	claimMax   = 64
)

// Claim offers fn the queued tasks oldest first, each locked (FOR UPDATE
// SKIP LOCKED: a task another transaction holds is passed over, never
// waited for), a chunk at a time, until fn says stop or none is left;
// then it stores what fn saved and commits. When fn returns an error the
// transaction is rolled back and Claim returns it. Like Update's, fn may
// run again in a new transaction.
func (s *Store) Claim(ctx context.Context, fn func(tx store.Tx, t *state.Task) (stop bool, err error)) error {
	return s.inTx(ctx, "claim tasks", func(pg pgx.Tx) error {
		t := newTx(ctx, pg)
		after, afterID := int64(math.MinInt64), ""
		for chunk := claimFirst; ; chunk = min(2*chunk, claimMax) {
			tasks, err := t.lock(`SELECT id, doc FROM tasks WHERE phase = 'queued' AND (created_ns, id) > ($1, $2)
				ORDER BY created_ns, id LIMIT $3 FOR UPDATE SKIP LOCKED`, after, afterID, chunk)
			if err != nil {
				return fmt.Errorf("lock: %w", err)
			}
			for _, task := range tasks {
				// The cursor is the locked row's key: fn may change the task.
				after, afterID = nanos(task.CreatedAt), task.ID
				stop, err := fn(t, task)
				if err != nil {
					return fnError{err}
				}
				if stop {
					return t.write()
				}
			}
			if len(tasks) < chunk {
				return t.write()
			}
		}
	})
}
