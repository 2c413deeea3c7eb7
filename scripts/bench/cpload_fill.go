package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/state"
)

// The direct fill: the API stores a few completed tasks (templates, as
// the control plane writes them), then the store gets the rest straight,
// each a copy of a template under a new id, created earlier: through the
// file store's package (filestore.Open, Create, Update with Append), or
// by COPY into PostgreSQL's tables. Far faster than the API (about 250
// tasks a second); not measured.

// fillTemplates is how many tasks the API completes for the direct fill
// to copy.
const fillTemplates = 20

// tmplTask is a completed task as a store holds it, and its events.
type tmplTask struct {
	id     string
	doc    []byte // json.Marshal of the task
	events []tmplEvent
}

type tmplEvent struct {
	key  string
	seq  *int32 // nil: a key without a stored line
	line []byte
}

// cloneID is the id of copy i: "t-c" and ten hex digits, never an id the
// control plane makes ("t-" and ten).
func cloneID(salt uint32, i int) string { return fmt.Sprintf("t-c%02x%08x", salt&0xff, i) }

// clone is template tt as task id, created at created (its other times
// moved with it).
func (tt *tmplTask) clone(id string, created time.Time) (*state.Task, []byte, []tmplEvent, error) {
	old, nw := []byte(tt.id), []byte(id)
	t := new(state.Task)
	if err := json.Unmarshal(bytes.ReplaceAll(tt.doc, old, nw), t); err != nil {
		return nil, nil, nil, err
	}
	d := t.UpdatedAt.Sub(t.CreatedAt)
	t.CreatedAt, t.UpdatedAt = created, created.Add(d)
	doc, err := json.Marshal(t)
	if err != nil {
		return nil, nil, nil, err
	}
	evs := make([]tmplEvent, len(tt.events))
	for i, e := range tt.events {
		evs[i] = tmplEvent{key: string(bytes.ReplaceAll([]byte(e.key), old, nw)), seq: e.seq}
		if e.line != nil {
			evs[i].line = bytes.ReplaceAll(e.line, old, nw)
		}
	}
	return t, doc, evs, nil
}

// cloneTimes spreads n copies' creation before now: 2 s apart, or closer
// so that the oldest is at most 20 days old (the retention is 30).
func cloneTimes(n int) (first time.Time, step time.Duration) {
	step = 2 * time.Second
	if max := 20 * 24 * time.Hour / time.Duration(max(n, 1)); max < step {
		step = max
	}
	return time.Now().UTC().Add(-time.Duration(n+1) * step), step
}

// fillPG copies the completed tasks of database dsn until it holds n:
// COPY of tasks and events in chunks, two at a time.
func fillPG(dsn string, n int, log *log.Logger) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	var tmpls []*tmplTask
	byID := map[string]*tmplTask{}
	rows, _ := conn.Query(ctx, `SELECT id, doc FROM tasks WHERE ended_at IS NOT NULL ORDER BY created_ns, id`)
	var (
		id  string
		doc []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
		t := &tmplTask{id: id, doc: bytes.Clone(doc)}
		tmpls = append(tmpls, t)
		byID[id] = t
		return nil
	})
	if err != nil {
		conn.Close(ctx)
		return fmt.Errorf("fill: templates: %w", err)
	}
	var (
		key  string
		seq  *int32
		line []byte
	)
	rows, _ = conn.Query(ctx, `SELECT task_id, key, seq, line FROM events`)
	_, err = pgx.ForEachRow(rows, []any{&id, &key, &seq, &line}, func() error {
		if t := byID[id]; t != nil {
			e := tmplEvent{key: key, line: bytes.Clone(line)}
			if seq != nil {
				v := *seq
				e.seq = &v
			}
			t.events = append(t.events, e)
		}
		return nil
	})
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("fill: template events: %w", err)
	}
	todo := n - len(tmpls)
	if todo <= 0 {
		return nil
	}
	if len(tmpls) == 0 {
		return fmt.Errorf("fill: no completed task to copy")
	}
	first, step := cloneTimes(todo)
	salt := uint32(time.Now().UnixNano())
	const chunk = 5000
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
		failed     atomic.Pointer[error]
	)
	start := time.Now()
	for range 2 {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			defer conn.Close(ctx)
			for failed.Load() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= todo {
					return
				}
				hi := min(lo+chunk, todo)
				var tasks, events [][]any
				for i := lo; i < hi; i++ {
					tt := tmpls[i%len(tmpls)]
					t, doc, evs, err := tt.clone(cloneID(salt, i), first.Add(time.Duration(i)*step))
					if err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
					var lease *string
					if t.Lease != nil {
						lease = &t.Lease.AgentID
					}
					var ended *time.Time
					if t.Phase.Terminal() {
						e := state.EndedAt(t)
						ended = &e
					}
					tasks = append(tasks, []any{t.ID, t.CreatedAt.UnixNano(), string(t.Phase), t.Repo, lease, ended, doc})
					for _, e := range evs {
						events = append(events, []any{t.ID, e.key, e.seq, e.line})
					}
				}
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tasks"}, []string{"id", "created_ns", "phase", "repo", "lease_agent", "ended_at", "doc"}, pgx.CopyFromRows(tasks)); err != nil {
						return err
					}
					_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"task_id", "key", "seq", "line"}, pgx.CopyFromRows(events))
					return err
				})
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if d := done.Add(int64(hi - lo)); d/100_000 != (d-int64(hi-lo))/100_000 {
					log.Printf("cpload: fill: %d of %d copies stored (%.0f/s)", d, todo, float64(d)/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return fmt.Errorf("fill: copy: %w", *e)
	}
	log.Printf("cpload: fill: %d copies of %d completed tasks stored by COPY in %.1f s (%.0f/s)", todo, len(tmpls), time.Since(start).Seconds(), float64(todo)/time.Since(start).Seconds())
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	log.Printf("cpload: fill: VACUUM ANALYZE and CHECKPOINT in %.1f s", time.Since(t0).Seconds())
	return nil
}

// fillFiles copies the completed tasks of the file store in dir until it
// holds n, through the filestore package. Its syncs make it slow on a
// disk: when tmpfs is not "", it works on a copy of dir there, then
// copies the result back and syncs it.
func fillFiles(dir, tmpfs string, n int, log *log.Logger) error {
	work := dir
	if tmpfs != "" {
		d, err := os.MkdirTemp(tmpfs, "cpfill-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d + "/cp"
		if out, err := exec.Command("cp", "-a", dir, work).CombinedOutput(); err != nil {
			return fmt.Errorf("fill: cp: %v: %s", err, out)
		}
	}
	ctx := context.Background()
	st, err := filestore.Open(work, filestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	tasks, _, err := st.Tasks(ctx, store.Query{})
	if err != nil {
		st.Close()
		return err
	}
	var tmpls []*tmplTask
	for _, t := range tasks {
		if !t.Phase.Terminal() {
			continue
		}
		doc, _ := json.Marshal(t)
		tt := &tmplTask{id: t.ID, doc: doc}
		lines, _, err := st.Events(ctx, t.ID, 0, 10_000, 64<<20)
		if err != nil {
			st.Close()
			return err
		}
		for _, l := range lines {
			var k struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(l.Line, &k); err != nil || k.Key == "" {
				st.Close()
				return fmt.Errorf("fill: an event line of %s without its key: %v", t.ID, err)
			}
			seq := int32(l.Seq)
			tt.events = append(tt.events, tmplEvent{key: k.Key, seq: &seq, line: l.Line})
		}
		tmpls = append(tmpls, tt)
	}
	todo := n - len(tasks)
	if todo > 0 && len(tmpls) == 0 {
		st.Close()
		return fmt.Errorf("fill: no completed task to copy")
	}
	first, step := cloneTimes(todo)
	salt := uint32(time.Now().UnixNano())
	start := time.Now()
	for i := range max(todo, 0) {
		t, _, evs, err := tmpls[i%len(tmpls)].clone(cloneID(salt, i), first.Add(time.Duration(i)*step))
		if err != nil {
			st.Close()
			return err
		}
		if err := st.Create(ctx, t); err != nil {
			st.Close()
			return err
		}
		err = st.Update(ctx, []string{t.ID}, func(tx store.Tx) error {
			for _, e := range evs {
				tx.Append(t.ID, e.key, state.EventProgress, int(*e.seq), e.line)
			}
			tx.Save(tx.Task(t.ID))
			return nil
		})
		if err != nil {
			st.Close()
			return err
		}
		if (i+1)%20_000 == 0 {
			log.Printf("cpload: fill: %d of %d copies stored (%.0f/s)", i+1, todo, float64(i+1)/time.Since(start).Seconds())
		}
	}
	st.Close()
	log.Printf("cpload: fill: %d copies of %d completed tasks stored through the filestore package in %.1f s (%.0f/s)", todo, len(tmpls),
		time.Since(start).Seconds(), float64(todo)/time.Since(start).Seconds())
	if work != dir {
		t0 := time.Now()
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if out, err := exec.Command("cp", "-a", work, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("fill: cp: %v: %s", err, out)
		}
		if out, err := exec.Command("sync").CombinedOutput(); err != nil {
			return fmt.Errorf("fill: sync: %v: %s", err, out)
		}
		log.Printf("cpload: fill: copied from tmpfs to the disk and synced in %.1f s", time.Since(t0).Seconds())
	}
	return nil
}
