package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// record is a task's document (the doc column): the task's JSON, and
// beside its keys the store's bookkeeping, which is not the task's.
// Documents written when the task carried it read the same.
type record struct {
	*state.Task
	// EventsApplied is the seq of the task's last stored event (0:
	// none): Tx.LastSeq.
	EventsApplied int `json:"events_applied,omitempty"`
}

// decode is a task from its document.
func decode(doc []byte) (*state.Task, error) {
	t, _, err := decodeRecord(doc)
	return t, err
}

// decodeRecord is a task from its document, and the seq of its last
// stored event.
func decodeRecord(doc []byte) (*state.Task, int, error) {
	r := record{Task: new(state.Task)}
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, 0, fmt.Errorf("decode task: %w", err)
	}
	return r.Task, r.EventsApplied, nil
}

// Create stores a new task; an id that exists is an error.
func (s *Store) Create(ctx context.Context, t *state.Task) error {
	doc, err := json.Marshal(record{Task: t})
	if err != nil {
		return fmt.Errorf("pgstore: create task %s: %w", t.ID, err)
	}
	c := columnsOf(t)
	err = s.write(ctx, func(conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, `INSERT INTO tasks (id, created_ns, phase, repo, lease_agent, ended_at, doc)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, t.ID, c.created, c.phase, c.repo, c.leaseAgent, c.endedAt, doc)
		return err
	})
	if t.Phase == state.PhaseQueued {
		s.queue.queued()
		if err == nil {
			s.announce(1) // after the commit (queued.go)
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("pgstore: create task %s: the id exists", t.ID)
	}
	if err != nil {
		return fmt.Errorf("pgstore: create task %s: %w", t.ID, err)
	}
	return nil
}

// Task returns a copy of task id, nil when there is none.
func (s *Store) Task(ctx context.Context, id string) (*state.Task, error) {
	var doc []byte
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT doc FROM tasks WHERE id = $1`, id).Scan(&doc)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: task %s: %w", id, err)
	}
	t, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("pgstore: task %s: %w", id, err)
	}
	return t, nil
}

// Tasks returns a page of the tasks q selects, oldest first (newest
// first, for q.Order newest: the same index read backwards), and the
// cursor of the next page. A cursor that names no task (one pruned
// since) is an error. A Limit of zero or less returns every task
// selected.
func (s *Store) Tasks(ctx context.Context, q store.Query) ([]*state.Task, string, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Phase != "" {
		where = append(where, "phase = "+arg(string(q.Phase)))
	}
	if q.Agent != "" {
		where = append(where, "lease_agent = "+arg(q.Agent))
	}
	if q.Repo != "" {
		where = append(where, "repo = "+arg(q.Repo))
	}
	if q.Live {
		where = append(where, "ended_at IS NULL")
	}
	if q.Title != "" {
		// No column holds the title: the search reads the documents.
		where = append(where, "strpos(lower(convert_from(doc, 'UTF8')::jsonb->>'title'), lower("+arg(q.Title)+")) > 0")
	}
	newest := q.Order == api.OrderNewest
	if q.After != "" {
		after := ">"
		if newest {
			after = "<"
		}
		where = append(where, "(created_ns, id) "+after+" (SELECT created_ns, id FROM tasks WHERE id = "+arg(q.After)+")")
	}
	sql := "SELECT doc FROM tasks"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if newest {
		sql += " ORDER BY created_ns DESC, id DESC"
	} else {
		sql += " ORDER BY created_ns, id"
	}
	if q.Limit > 0 {
		sql += " LIMIT " + arg(q.Limit+1)
	}
	tasks, err := s.queryTasks(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: list tasks: %w", err)
	}
	if len(tasks) == 0 && q.After != "" {
		// No page follows the cursor: is it the end of the list, or a
		// cursor that names no task?
		if t, err := s.Task(ctx, q.After); err != nil {
			return nil, "", err
		} else if t == nil {
			return nil, "", fmt.Errorf("pgstore: list tasks: %w: %q names no task", store.ErrCursor, q.After)
		}
	}
	next := ""
	if q.Limit > 0 && len(tasks) > q.Limit {
		tasks = tasks[:q.Limit]
		next = tasks[len(tasks)-1].ID
	}
	return tasks, next, nil
}

// queryTasks decodes the documents sql selects (its one column).
func (s *Store) queryTasks(ctx context.Context, sql string, args ...any) ([]*state.Task, error) {
	var tasks []*state.Task
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		tasks = nil
		rows, err := c.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		tasks, err = decodeRows(rows)
		return err
	})
	return tasks, err
}

// decodeRows decodes the task documents rows hold (their one column),
// and closes rows.
func decodeRows(rows pgx.Rows) ([]*state.Task, error) {
	var (
		tasks []*state.Task
		doc   []byte
	)
	_, err := pgx.ForEachRow(rows, []any{&doc}, func() error {
		t, err := decode(doc)
		if err != nil {
			return err
		}
		tasks = append(tasks, t)
		return nil
	})
	return tasks, err
}

// Count counts the tasks by phase; a phase no task is in is absent.
func (s *Store) Count(ctx context.Context) (map[state.Phase]int, error) {
	var counts map[state.Phase]int
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		counts = map[state.Phase]int{}
		rows, err := c.Query(ctx, `SELECT phase, count(*) FROM tasks GROUP BY phase`)
		if err != nil {
			return err
		}
		var (
			phase string
			n     int
		)
		_, err = pgx.ForEachRow(rows, []any{&phase, &n}, func() error {
			counts[state.Phase(phase)] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: count tasks: %w", err)
	}
	return counts, nil
}

// leasedSQL selects the documents of the tasks whose lease agent $1
// holds while they are live, by id. holder is derived from lease_agent
// and ended_at by a trigger (migration 00004) on every write.
const leasedSQL = `SELECT doc FROM tasks WHERE holder = $1 ORDER BY id`

// Leased returns the tasks that have not ended whose lease agentID
// holds, lapsed or not, by id.
func (s *Store) Leased(ctx context.Context, agentID string) ([]*state.Task, error) {
	tasks, err := s.queryTasks(ctx, leasedSQL, agentID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: tasks leased to %s: %w", agentID, err)
	}
	return tasks, nil
}

// liveChunk is how many live tasks Live reads at a time. No connection
// is held while fn runs: fn may call Update.
const liveChunk = 256

// Live calls fn with each task that has not ended, by id, reading them a
// chunk at a time without locks. A task that ends or starts meanwhile
// may or may not be seen.
func (s *Store) Live(ctx context.Context, fn func(t *state.Task) error) error {
	after := ""
	for {
		tasks, err := s.queryTasks(ctx, `SELECT doc FROM tasks WHERE ended_at IS NULL AND id > $1 ORDER BY id LIMIT $2`, after, liveChunk)
		if err != nil {
			return fmt.Errorf("pgstore: live tasks: %w", err)
		}
		for _, t := range tasks {
			if err := fn(t); err != nil {
				return err
			}
		}
		if len(tasks) < liveChunk {
			return nil
		}
		after = tasks[len(tasks)-1].ID
	}
}

// Events returns up to limit (all, when limit is zero or less) of a
// task's stored events after seq after, oldest first, at most maxBytes
// of lines but at least one.
func (s *Store) Events(ctx context.Context, taskID string, after, limit int, maxBytes int64) ([]store.EventLine, bool, error) {
	sql := `SELECT seq, line FROM events WHERE task_id = $1 AND seq > $2 ORDER BY seq`
	args := []any{taskID, after}
	if limit > 0 {
		sql += ` LIMIT $3`
		args = append(args, limit+1)
	}
	var (
		lines []store.EventLine
		more  bool
	)
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		lines, more = nil, false
		rows, err := c.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var size int64
		for rows.Next() {
			var e store.EventLine
			if err := rows.Scan(&e.Seq, &e.Line); err != nil {
				return err
			}
			if limit > 0 && len(lines) == limit || len(lines) > 0 && size+int64(len(e.Line)) > maxBytes {
				more = true
				break
			}
			size += int64(len(e.Line))
			lines = append(lines, e)
		}
		rows.Close()
		return rows.Err()
	})
	if err != nil {
		return nil, false, fmt.Errorf("pgstore: events of task %s: %w", taskID, err)
	}
	return lines, more, nil
}

// Prune removes up to limit tasks that ended before before, those that
// ended first first, with their events. A task a transaction holds now
// is left for the next Prune.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `
		WITH gone AS (
			DELETE FROM tasks WHERE id IN (
				SELECT id FROM tasks WHERE ended_at < $1 ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING id),
		events_gone AS (
			DELETE FROM events WHERE task_id IN (SELECT id FROM gone))
		SELECT count(*) FROM gone`, before, limit).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: prune tasks: %w", err)
	}
	return n, nil
}
