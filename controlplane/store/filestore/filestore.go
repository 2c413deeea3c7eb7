// Package filestore is the control plane's embedded store: a directory
// one process owns, with no set-up. Each task is a JSON file in tasks/,
// its accepted events a JSONL file in events/ (events.go), the agents'
// token hashes agents.json (registry.go).
//
// What it promises beyond the contract of package store:
//
//   - The events are the record: a transaction's events are appended and
//     synced before the task files that reflect them are saved, and each
//     task file says how many events it reflects and how large its events
//     file was then (state.Task.EventsApplied, EventsBytes). A crash
//     between the two is finished at the next start by Recover, which
//     hands the events past that size to the control plane's rules to
//     apply again; a crash in the middle of an append leaves a torn last
//     line, which the start cuts off first.
//   - One process per directory (a lock file): two would each believe
//     their own copy of the tasks.
//   - The idempotency keys of the tasks that have not ended, or ended
//     lately, are in memory; older ones are read back from the events
//     file when asked for (keys.go).
package filestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/state"
)

// Options configure a Store. Zero fields take the defaults their comments
// give.
type Options struct {
	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default utc.Now: when keys of ended tasks leave memory
}

// Store is the file store. It keeps every task in memory and serializes
// changes under one lock.
type Store struct {
	dir  string
	log  *slog.Logger
	now  func() time.Time
	lock *flock.Flock

	mu     sync.Mutex
	files  *state.Store
	events events
	tasks  map[string]*state.Task
	order  []ref // every task, oldest first: the lists' order
	keys   map[string]map[string]struct{}
	agents map[string]store.Agent
	reg    *registry
	// batches counts the transactions that stored events, for the fault
	// suite's crash points.
	batches int
}

var _ store.Store = (*Store)(nil)

// Open opens (creating) a file store in dir and loads its tasks. Task files
// that cannot be read are logged and left alone; the others load. Call
// Recover before serving.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = utc.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// What is in the directory decides what agents are handed: nobody
	// else may write there.
	if err := private.Dir("state directory", dir); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	lock := flock.New(filepath.Join(dir, "lock"), flock.SetPermissions(0o600))
	if ok, err := lock.TryLock(); err != nil {
		return nil, fmt.Errorf("controlplane: lock %s: %w", lock.Path(), err)
	} else if !ok {
		return nil, fmt.Errorf("controlplane: %s is held: another control plane uses %s", lock.Path(), dir)
	}
	opened := false
	defer func() {
		if !opened {
			lock.Unlock()
		}
	}()
	files, err := state.OpenStore(filepath.Join(dir, "tasks"))
	if err != nil {
		return nil, err
	}
	ev := events{dir: filepath.Join(dir, "events")}
	if err := os.MkdirAll(ev.dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	for _, sub := range []string{"tasks", "events"} {
		if err := private.Dir("state directory", filepath.Join(dir, sub)); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	reg, err := openRegistry(dir)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	list, err := files.LoadAll()
	if err != nil {
		opts.Logger.Error("some task files could not be read; they are left alone", "err", err)
	}
	s := &Store{dir: dir, log: opts.Logger, now: opts.Now, lock: lock, files: files, events: ev,
		tasks: make(map[string]*state.Task, len(list)), keys: map[string]map[string]struct{}{},
		agents: map[string]store.Agent{}, reg: reg}
	s.order = make([]ref, 0, len(list))
	for _, t := range list {
		s.tasks[t.ID] = t
		s.order = append(s.order, refOf(t))
	}
	slices.SortFunc(s.order, compareRefs)
	opened = true
	return s, nil
}

// Missed is an event a crash left unapplied: stored, but past what its
// task file reflects.
type Missed struct {
	api.StoredEvent
	// Size is its line's length, its newline included.
	Size int64
}

// Recover brings each task file up to date with its stored events, oldest
// task first: a crash between storing a transaction's events and saving
// its tasks leaves a task file behind, and the events past the size it
// records (EventsBytes) say what it missed. apply applies them again, as
// they were (same agent, same time); the task is then saved. A torn last
// line is cut first. It reads the keys of the tasks that have not ended.
func (s *Store) Recover(apply func(t *state.Task, missed []Missed)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.order {
		t := s.tasks[r.id]
		if err := s.recoverTask(t, apply); err != nil {
			return err
		}
		if !t.Phase.Terminal() {
			set, err := s.events.keys(t.ID, t.EventsBytes)
			if err != nil {
				return fmt.Errorf("controlplane: keys of task %s: %w", t.ID, err)
			}
			s.keys[t.ID] = set
		}
	}
	return nil
}

func (s *Store) recoverTask(t *state.Task, apply func(t *state.Task, missed []Missed)) error {
	size, err := s.events.repair(t.ID)
	if err != nil {
		return fmt.Errorf("controlplane: repair the events of task %s: %w", t.ID, err)
	}
	if t.EventsApplied == nil {
		// A file from before events were counted: all are taken as
		// applied, as they were then.
		_, n, err := s.events.skipLines(t.ID, int(^uint(0)>>1), size)
		if err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
		t.EventsApplied, t.EventsBytes = &n, size
		return nil
	}
	from := t.EventsBytes
	if from == 0 && *t.EventsApplied > 0 {
		// A file from before the size was kept: count the lines.
		if from, _, err = s.events.skipLines(t.ID, *t.EventsApplied, size); err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
	}
	switch {
	case size == from:
		t.EventsBytes = size
		return nil
	case size < from:
		s.log.Error("a task's events file is shorter than its task file says; events were lost", "task", t.ID, "file_bytes", size, "task_says", from)
		t.EventsBytes = size
		return nil
	}
	missed, err := s.events.read(t.ID, from, size)
	if err != nil {
		return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
	}
	list := make([]Missed, len(missed))
	for i, m := range missed {
		list[i] = Missed{m.StoredEvent, m.size}
	}
	apply(t, list)
	n := *t.EventsApplied + len(missed)
	t.EventsApplied, t.EventsBytes = &n, size
	if err := s.files.Save(t); err != nil {
		return fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	s.log.Info("task brought up to date with its stored events after a crash", "task", t.ID, "events", len(missed))
	return nil
}

// Close releases the directory.
func (s *Store) Close() error { return s.lock.Unlock() }

// Shared is false: one process owns the directory.
func (s *Store) Shared() bool { return false }

// Lead is true: the one process runs the watchdog.
func (s *Store) Lead(context.Context) (bool, error) { return true, nil }

// Create stores a new task.
func (s *Store) Create(_ context.Context, t *state.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tasks[t.ID] != nil {
		return fmt.Errorf("controlplane: task %s exists", t.ID)
	}
	t = t.Clone()
	if err := s.files.Save(t); err != nil {
		return err
	}
	s.tasks[t.ID] = t
	r := refOf(t)
	i, _ := slices.BinarySearchFunc(s.order, r, compareRefs)
	s.order = slices.Insert(s.order, i, r)
	if !t.Phase.Terminal() {
		s.keys[t.ID] = map[string]struct{}{}
	}
	return nil
}

// Task returns a copy of task id, nil when there is none.
func (s *Store) Task(_ context.Context, id string) (*state.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[id]; t != nil {
		return t.Clone(), nil
	}
	return nil, nil
}

// Tasks returns a page of tasks, oldest first.
func (s *Store) Tasks(_ context.Context, q store.Query) ([]*state.Task, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := 0
	if q.After != "" {
		t := s.tasks[q.After]
		if t == nil {
			return nil, "", fmt.Errorf("%w: no task %q", store.ErrCursor, state.Ellipsize(q.After, 140))
		}
		i, _ := slices.BinarySearchFunc(s.order, refOf(t), compareRefs)
		start = i + 1
	}
	var page []*state.Task
	for _, r := range s.order[start:] {
		t := s.tasks[r.id]
		if !q.Match(t) {
			continue
		}
		if len(page) == q.Limit {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, t.Clone())
	}
	return page, "", nil
}

// Count counts the tasks by phase.
func (s *Store) Count(context.Context) (map[state.Phase]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[state.Phase]int{}
	for _, t := range s.tasks {
		n[t.Phase]++
	}
	return n, nil
}

// Leased returns the tasks not ended whose lease agentID holds.
func (s *Store) Leased(_ context.Context, agentID string) ([]*state.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*state.Task
	for _, r := range s.order {
		if t := s.tasks[r.id]; !t.Phase.Terminal() && t.Lease != nil && t.Lease.AgentID == agentID {
			out = append(out, t.Clone())
		}
	}
	return out, nil
}

// Live calls fn with a copy of each task that has not ended. It is the
// watchdog's pass: the keys of tasks ended long enough leave memory.
func (s *Store) Live(_ context.Context, fn func(*state.Task) error) error {
	s.mu.Lock()
	s.dropKeys()
	var live []*state.Task
	for _, r := range s.order {
		if t := s.tasks[r.id]; !t.Phase.Terminal() {
			live = append(live, t.Clone())
		}
	}
	s.mu.Unlock()
	for _, t := range live {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// Update runs fn with the tasks ids locked, then stores what it saved.
func (s *Store) Update(_ context.Context, ids []string, fn func(store.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.begin()
	for _, id := range ids {
		x.lock(id)
	}
	if err := fn(x); err != nil {
		return err
	}
	return x.commit()
}

// Claim offers the queued tasks to fn, oldest first.
func (s *Store) Claim(_ context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.begin()
	for _, r := range s.order {
		if s.tasks[r.id].Phase != state.PhaseQueued {
			continue
		}
		t := x.lock(r.id)
		stop, err := fn(x, t)
		if err != nil {
			return err
		}
		if stop {
			break
		}
	}
	return x.commit()
}

// Events returns a page of a task's stored events.
func (s *Store) Events(_ context.Context, taskID string, after, limit int, maxBytes int64) ([]store.EventLine, bool, error) {
	s.mu.Lock()
	t := s.tasks[taskID]
	var end int64 // what is stored for good: an append in progress lies past it
	if t != nil {
		end = t.EventsBytes
	}
	s.mu.Unlock()
	if t == nil {
		return nil, false, nil
	}
	return s.events.page(taskID, end, after, limit, maxBytes)
}

// Prune removes up to limit tasks that ended before before, with their
// events.
func (s *Store) Prune(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := 0; i < len(s.order) && n < limit; {
		t := s.tasks[s.order[i].id]
		if !t.Phase.Terminal() || !t.UpdatedAt.Before(before) {
			i++
			continue
		}
		if err := s.events.remove(t.ID); err != nil {
			return n, err
		}
		if err := s.files.Delete(t.ID); err != nil {
			return n, err
		}
		delete(s.tasks, t.ID)
		delete(s.keys, t.ID)
		s.order = slices.Delete(s.order, i, i+1)
		n++
	}
	return n, nil
}

// Register records agent id's token hash.
func (s *Store) Register(_ context.Context, id, tokenHash string, replace bool) error {
	return s.reg.register(id, tokenHash, replace)
}

// Revoke forgets agent id's token hash.
func (s *Store) Revoke(_ context.Context, id string) (bool, error) { return s.reg.revoke(id) }

// AgentByToken returns the agent a token hash belongs to.
func (s *Store) AgentByToken(_ context.Context, tokenHash string) (string, error) {
	return s.reg.agent(tokenHash), nil
}

// PutAgent keeps an agent's record, in memory: agents say it again in
// every heartbeat.
func (s *Store) PutAgent(_ context.Context, a store.Agent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a.View.Repos = slices.Clone(a.View.Repos)
	a.View.Labels = maps.Clone(a.View.Labels)
	a.Missing = maps.Clone(a.Missing)
	s.agents[a.View.AgentID] = a
	return nil
}

// Agent returns an agent's record.
func (s *Store) Agent(_ context.Context, id string) (store.Agent, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	a.Missing = maps.Clone(a.Missing)
	return a, ok, nil
}

// Agents returns the agents' records by id.
func (s *Store) Agents(context.Context) ([]store.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b store.Agent) int { return strings.Compare(a.View.AgentID, b.View.AgentID) })
	return out, nil
}

// Serves reports whether an agent announced repository repo.
func (s *Store) Serves(_ context.Context, repo string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		if slices.Contains(a.View.Repos, repo) {
			return true, nil
		}
	}
	return false, nil
}

// ref places a task in the order of the lists: oldest first, then by
// id. A task's place never changes.
type ref struct {
	created time.Time
	id      string
}

func refOf(t *state.Task) ref { return ref{t.CreatedAt, t.ID} }

func compareRefs(a, b ref) int {
	return cmp.Or(a.created.Compare(b.created), strings.Compare(a.id, b.id))
}

// errNotLocked is a Save of a task the transaction did not lock.
var errNotLocked = errors.New("controlplane: a transaction saved a task it does not hold")
