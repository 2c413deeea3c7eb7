package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// tx is a transaction's view of its locked tasks (store.Tx): their
// decoded copies, what it saved, and the events it appended, written at
// commit.
//
// It costs two round trips to PostgreSQL, plus one per Seen that asks
// the database: BEGIN goes with the first query (the lock of the tasks),
// and COMMIT with the writes.
type tx struct {
	ctx    context.Context
	conn   *pgx.Conn
	store  *Store // its notifications of tasks queued, its queueView
	locked map[string]*state.Task
	phases map[string]state.Phase // each locked task's phase as it was locked
	// seqs are each locked task's last stored event's seq, with those
	// appended (its document's EventsApplied).
	seqs   map[string]int
	saved  map[string]*state.Task
	events []appended
	keys   map[eventKey]bool // appended in this transaction
	notes  []store.Notification
	agent  *agentWrite // an agent's record written with the commit (Beat)

	begun      bool // BEGIN was sent
	commitSent bool // COMMIT was sent: whether it took is not known until its answer
	done       bool // COMMIT answered
}

type eventKey struct{ task, key string }

type appended struct {
	eventKey
	seq  int
	line []byte // nil: the key alone
}

var _ store.Tx = (*tx)(nil)

func newTx(ctx context.Context, conn *pgx.Conn, s *Store) *tx {
	return &tx{ctx: ctx, conn: conn, store: s, locked: map[string]*state.Task{}, phases: map[string]state.Phase{},
		seqs: map[string]int{}, saved: map[string]*state.Task{}, keys: map[eventKey]bool{}}
}

// send runs a batch on the transaction's connection, BEGIN first if the
// transaction has not begun.
func (t *tx) send(queue func(b *pgx.Batch)) error {
	var b pgx.Batch
	if !t.begun {
		b.Queue("BEGIN")
		t.begun = true
	}
	queue(&b)
	return t.conn.SendBatch(t.ctx, &b).Close()
}

// Task returns the transaction's copy of locked task id, nil when it is
// not locked.
func (t *tx) Task(id string) *state.Task { return t.locked[id] }

// Save stores task's changes at commit. The last Save of an id counts.
// A task that is not locked yet is locked at commit; one that does not
// exist fails the commit.
func (t *tx) Save(task *state.Task) { t.saved[task.ID] = task }

// Seen reports whether key was appended for the task in this transaction
// or a committed one.
func (t *tx) Seen(taskID, key string) (bool, error) {
	if t.keys[eventKey{taskID, key}] {
		return true, nil
	}
	var seen bool
	err := t.send(func(b *pgx.Batch) {
		b.Queue(`SELECT EXISTS (SELECT 1 FROM events WHERE task_id = $1 AND key = $2)`, taskID, key).
			QueryRow(func(row pgx.Row) error { return row.Scan(&seen) })
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: event keys of task %s: %w", taskID, err)
	}
	return seen, nil
}

// LastSeq is the seq of locked task taskID's last stored event, with
// those appended: its document keeps it.
func (t *tx) LastSeq(taskID string) int { return t.seqs[taskID] }

// Append records key, and line as event seq unless line is nil, at
// commit. A key appended twice is recorded once, its first line kept.
func (t *tx) Append(taskID, key string, _ state.EventKind, seq int, line []byte) {
	k := eventKey{taskID, key}
	if t.keys[k] {
		return
	}
	t.keys[k] = true
	t.events = append(t.events, appended{eventKey: k, seq: seq, line: slices.Clone(line)})
	if line != nil {
		t.seqs[taskID] = max(t.seqs[taskID], seq)
	}
}

// Notify inserts ns at commit, with the transaction's changes.
func (t *tx) Notify(ns ...store.Notification) {
	for _, n := range ns {
		n.Body = slices.Clone(n.Body)
		t.notes = append(t.notes, n)
	}
}

// lock locks the tasks the query selects (id and doc columns), decodes
// them and adds them to the transaction's view; it returns them in the
// query's order.
func (t *tx) lock(sql string, args ...any) ([]*state.Task, error) {
	var tasks []*state.Task
	err := t.send(func(b *pgx.Batch) {
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			var (
				id  string
				doc []byte
			)
			_, err := pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
				task, seq, err := decodeRecord(doc)
				if err != nil {
					return fmt.Errorf("task %s: %w", id, err)
				}
				t.locked[id] = task
				t.phases[id] = task.Phase
				t.seqs[id] = max(t.seqs[id], seq)
				tasks = append(tasks, task)
				return nil
			})
			return err
		})
	})
	return tasks, err
}

// commit sends the appended events, the saved tasks, the notifications
// and COMMIT in one batch. Saved tasks that are not locked are locked first (a round trip
// more); one that does not exist is an error, and nothing is stored.
func (t *tx) commit() error {
	if !t.begun && len(t.events) == 0 && len(t.saved) == 0 && len(t.notes) == 0 && t.agent == nil {
		return nil // nothing read, nothing to write
	}
	for _, e := range t.events {
		if e.line != nil && t.saved[e.task] == nil && t.locked[e.task] != nil {
			// Its document keeps the seq of its last event: written
			// with it, the task as it is.
			t.saved[e.task] = t.locked[e.task]
		}
	}
	ids := make([]string, 0, len(t.saved))
	var unlocked []string
	for id := range t.saved {
		ids = append(ids, id)
		if t.locked[id] == nil {
			unlocked = append(unlocked, id)
		}
	}
	slices.Sort(ids)
	if len(unlocked) > 0 {
		slices.Sort(unlocked) // the order every lock is taken in
		if _, err := t.lock(`SELECT id, doc FROM tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE`, unlocked); err != nil {
			return fmt.Errorf("lock saved tasks: %w", err)
		}
		for _, id := range unlocked {
			if t.locked[id] == nil {
				return fmt.Errorf("save task %s: no such task", id)
			}
		}
	}
	docs := make([][]byte, len(ids))
	for i, id := range ids {
		doc, err := json.Marshal(record{Task: t.saved[id], EventsApplied: t.seqs[id]})
		if err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		docs[i] = doc
	}
	t.commitSent = true
	queued := t.newlyQueued()
	err := t.send(func(b *pgx.Batch) {
		for _, e := range t.events {
			if e.line == nil {
				b.Queue(`INSERT INTO events (task_id, key) VALUES ($1, $2) ON CONFLICT DO NOTHING`, e.task, e.key)
			} else {
				b.Queue(`INSERT INTO events (task_id, key, seq, line) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, e.task, e.key, e.seq, e.line)
			}
		}
		for i, id := range ids {
			c := columnsOf(t.saved[id])
			b.Queue(`UPDATE tasks SET created_ns = $2, phase = $3, repo = $4, lease_agent = $5, ended_at = $6, doc = $7 WHERE id = $1`,
				id, c.created, c.phase, c.repo, c.leaseAgent, c.endedAt, docs[i])
		}
		queueNotifications(b, t.notes)
		if t.agent != nil {
			if !t.durable() {
				// A heartbeat's alone: not waited for (Beat).
				b.Queue("SET LOCAL synchronous_commit TO off")
			}
			b.Queue(`INSERT INTO agents (id, record, repos) VALUES ($1, $2, $3)
				ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, repos = EXCLUDED.repos`, t.agent.id, t.agent.record, t.agent.repos)
		}
		b.Queue("COMMIT")
	})
	if queued > 0 {
		// Committed or not: it may have been. Other replicas' claims
		// waiting for work hear of it from the notifier, after the
		// commit (queued.go).
		t.store.queue.queued()
		t.store.announce(queued)
	}
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	t.done = true
	return nil
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
	return s.inTx(ctx, "update tasks", func(t *tx) error {
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
		return t.commit()
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
//
// Most claims find nothing queued. While the store listens it knows when
// the queue is empty (queueView), and such a claim costs no round trip;
// otherwise a look without a transaction says so first, in one round
// trip where the transaction takes two.
func (s *Store) Claim(ctx context.Context, fn func(tx store.Tx, t *state.Task) (stop bool, err error)) error {
	empty, gen := s.queue.known()
	if empty {
		return nil
	}
	var queued bool
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks WHERE phase = 'queued')`).Scan(&queued)
	})
	if err != nil {
		return fmt.Errorf("pgstore: claim tasks: %w", err)
	}
	if !queued {
		s.queue.sawEmpty(gen)
		return nil
	}
	return s.inTx(ctx, "claim tasks", func(t *tx) error {
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
					return t.commit()
				}
			}
			if len(tasks) < chunk {
				return t.commit()
			}
		}
	})
}
