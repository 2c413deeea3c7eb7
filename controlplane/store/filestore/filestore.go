// Package filestore is the control plane's embedded store: a directory
// one process owns, with no set-up. Each task is a JSON file in tasks/,
// its accepted events a JSONL file in events/ (events.go) and the keys of
// its cut events a file beside it (ID.cut), the agents' latest records
// agents-seen.json (agents.go), the agents' token hashes agents.json and
// the log of changes since, agents.log (registry.go).
//
// What it promises beyond the contract of package store:
//
//   - The events are the record: a transaction's events are appended and
//     synced before the task files that reflect them are saved, and each
//     task file says how many events it reflects and how large its events
//     file was then (state.Task.EventsApplied, EventsBytes). A crash
//     between the two is finished at the next start by Recover, which
//     hands the events past that size to the control plane's rules to
//     apply again (and drops the cut keys of those commits); a crash in
//     the middle of an append leaves a torn last line, which the start
//     cuts off first.
//   - EventsBytes is the store's own: it keeps it apart, writes it into
//     the task files, and hands out tasks with EventsBytes 0.
//   - A transaction holds its tasks, not the store: transactions on
//     different tasks run, and write and sync their files, side by side
//     (tx.go).
//   - One process per directory (a lock file): two would each believe
//     their own copy of the tasks.
//   - The idempotency keys of the tasks that have not ended, or ended
//     lately, are in memory; older ones are read back from the task's
//     files when asked for (keys.go).
//   - What agents said in their heartbeats (PutAgent) is written every
//     10 s and at Close, not on each heartbeat: a crash loses at most
//     the last 10 s of it, which the agents say again (agents.go).
//   - Files are 0600, directories 0700.
package filestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Store is the file store. It keeps every task in memory. A transaction
// holds its tasks (tx.go): transactions on different tasks run, and
// write and sync their files, side by side.
type Store struct {
	dir        string
	log        *slog.Logger
	now        func() time.Time
	lock       *flock.Flock
	files      *state.Store
	events     events
	reg        *registry
	agentsFile *agentsFile

	mu   sync.Mutex
	free *sync.Cond      // broadcast when holds are released
	held map[string]bool // the tasks (by id) transactions, Create and Prune hold
	// tasks are the stored tasks, with EventsBytes 0 (s.sizes keeps it).
	// A stored task is never changed in place: a commit puts a new one.
	tasks  map[string]*state.Task
	order  []ref // every task, oldest first: the lists' order
	queued []ref // the queued tasks, oldest first: what Claim offers
	sizes  map[string]sizes
	keys   map[string]map[string]struct{}
	agents map[string]store.Agent
	// agentsDirty: an agent's record changed since agentsFile was written.
	agentsDirty bool
	// batches counts the transactions that stored events, for the fault
	// suite's crash points.
	batches int
}

// sizes are the sizes of a task's events file and of its file of cut
// keys, as far as committed: the file store's bookkeeping, which it
// writes into the task file (EventsBytes) and hands to nobody.
type sizes struct{ events, cut int64 }

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
	af := &agentsFile{path: filepath.Join(dir, "agents-seen.json")}
	agents := af.load(opts.Logger)
	reg, err := openRegistry(dir, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	list, err := files.LoadAll()
	if err != nil {
		opts.Logger.Error("some task files could not be read; they are left alone", "err", err)
	}
	s := &Store{dir: dir, log: opts.Logger, now: opts.Now, lock: lock, files: files, events: ev, reg: reg, agentsFile: af,
		held: map[string]bool{}, tasks: make(map[string]*state.Task, len(list)), sizes: make(map[string]sizes, len(list)),
		keys: map[string]map[string]struct{}{}, agents: agents}
	s.free = sync.NewCond(&s.mu)
	s.order = make([]ref, 0, len(list))
	for _, t := range list {
		s.sizes[t.ID] = sizes{events: t.EventsBytes}
		t.EventsBytes = 0
		s.tasks[t.ID] = t
		s.order = append(s.order, refOf(t))
		if t.Phase == state.PhaseQueued {
			s.queued = append(s.queued, refOf(t))
		}
	}
	slices.SortFunc(s.order, compareRefs)
	slices.SortFunc(s.queued, compareRefs)
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
	// Nothing is served yet: the tasks are brought up to date in place.
	s.queued = s.queued[:0]
	for _, r := range s.order {
		t := s.tasks[r.id]
		if err := s.recoverTask(t, apply); err != nil {
			return err
		}
		if t.Phase == state.PhaseQueued {
			s.queued = append(s.queued, r)
		}
		if !t.Phase.Terminal() {
			set, err := s.events.keys(t.ID, s.sizes[t.ID])
			if err != nil {
				return fmt.Errorf("controlplane: keys of task %s: %w", t.ID, err)
			}
			s.keys[t.ID] = set
		}
	}
	return nil
}

// recoverTask brings one task up to date with its events (and its file
// of cut keys: a torn last key is cut off) and keeps their sizes. mu is
// held.
func (s *Store) recoverTask(t *state.Task, apply func(t *state.Task, missed []Missed)) error {
	size, err := s.events.repair(t.ID)
	if err != nil {
		return fmt.Errorf("controlplane: repair the events of task %s: %w", t.ID, err)
	}
	cut, err := s.events.repairFile(s.events.cutPath(t.ID))
	if err != nil {
		return fmt.Errorf("controlplane: repair the cut keys of task %s: %w", t.ID, err)
	}
	from := s.sizes[t.ID].events
	s.sizes[t.ID] = sizes{events: size, cut: cut}
	if t.EventsApplied == nil && from == 0 {
		// A file from before events were counted: all are taken as
		// applied, as they were then. (A task that never counted them
		// and has none stays as it is.)
		_, n, err := s.events.skipLines(t.ID, int(^uint(0)>>1), size)
		if err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
		if n > 0 {
			t.EventsApplied = &n
		}
		return nil
	}
	applied := 0
	if t.EventsApplied != nil {
		applied = *t.EventsApplied
	}
	if from == 0 && applied > 0 {
		// A file from before the size was kept: count the lines.
		if from, _, err = s.events.skipLines(t.ID, applied, size); err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
	}
	if size > from {
		// A crash kept the task file from being saved after these events:
		// the cut keys of the same commits go too.
		if cut, err = s.events.trimCut(t.ID, from, cut); err != nil {
			return fmt.Errorf("controlplane: cut keys of task %s: %w", t.ID, err)
		}
		s.sizes[t.ID] = sizes{events: size, cut: cut}
	}
	switch {
	case size == from:
		return nil
	case size < from:
		s.log.Error("a task's events file is shorter than its task file says; events were lost", "task", t.ID, "file_bytes", size, "task_says", from)
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
	if t.EventsApplied == nil {
		t.EventsApplied = &applied // apply counts from it
	}
	apply(t, list)
	n := applied + len(missed)
	t.EventsApplied = &n
	c := t.Clone()
	c.EventsBytes = size
	if err := s.files.Save(c); err != nil {
		return fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	s.log.Info("task brought up to date with its stored events after a crash", "task", t.ID, "events", len(missed))
	return nil
}

// Close writes the agents' token hashes into one file (registry.go) and
// releases the directory. The store is not to be used after.
func (s *Store) Close() error {
	s.agentsFile.mu.Lock()
	agentsErr := s.writeAgents(s.now())
	s.agentsFile.mu.Unlock()
	err := s.reg.close()
	return errors.Join(agentsErr, err, s.lock.Unlock())
}

// Shared is false: one process owns the directory.
func (s *Store) Shared() bool { return false }

// Lead is true: the one process runs the watchdog.
func (s *Store) Lead(context.Context) (bool, error) { return true, nil }

// Create stores a new task. Its id is new: a task of that id is an
// error. It waits while a transaction holds the id.
func (s *Store) Create(_ context.Context, t *state.Task) error {
	s.mu.Lock()
	s.holdAll([]string{t.ID})
	exists := s.tasks[t.ID] != nil
	if exists {
		s.releaseAll([]string{t.ID})
	}
	s.mu.Unlock()
	if exists {
		return fmt.Errorf("controlplane: task %s exists", t.ID)
	}
	t = t.Clone()
	t.EventsBytes = 0 // a new task has no events
	err := s.files.Save(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.put(t)
		s.sizes[t.ID] = sizes{}
		if !t.Phase.Terminal() {
			s.keys[t.ID] = map[string]struct{}{}
		}
	}
	s.releaseAll([]string{t.ID})
	return err
}

// put makes t task t.ID, placing it in the lists (and among the queued
// tasks while it is queued). mu is held.
func (s *Store) put(t *state.Task) {
	old := s.tasks[t.ID]
	s.tasks[t.ID] = t
	r := refOf(t)
	if old == nil {
		i, _ := slices.BinarySearchFunc(s.order, r, compareRefs)
		s.order = slices.Insert(s.order, i, r)
	}
	wasQueued, queued := old != nil && old.Phase == state.PhaseQueued, t.Phase == state.PhaseQueued
	switch i, found := slices.BinarySearchFunc(s.queued, r, compareRefs); {
	case queued && !wasQueued && !found:
		s.queued = slices.Insert(s.queued, i, r)
	case !queued && wasQueued && found:
		s.queued = slices.Delete(s.queued, i, i+1)
	}
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
		if q.Limit > 0 && len(page) == q.Limit {
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

// Update runs fn with the tasks ids held, then stores what it saved and
// appended. It waits until no other transaction holds any of them, then
// holds them all at once; fn runs, and the commit writes its files,
// without the store's lock, so transactions on other tasks go on
// meanwhile.
func (s *Store) Update(_ context.Context, ids []string, fn func(store.Tx) error) error {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	x := s.begin()
	defer x.abort() // fn's panic, or its error: nothing stored, the holds released
	s.mu.Lock()
	s.holdAll(ids)
	for _, id := range ids {
		x.take(id)
	}
	s.mu.Unlock()
	if err := fn(x); err != nil {
		return err
	}
	return x.commit()
}

// Claim offers the queued tasks to fn, oldest first: those queued when
// it starts that are still queued when their turn comes. A task another
// transaction holds is skipped, never waited for; each offered is held
// until Claim returns.
func (s *Store) Claim(_ context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	s.mu.Lock()
	queued := slices.Clone(s.queued)
	s.mu.Unlock()
	x := s.begin()
	defer x.abort() // fn's panic, or its error: nothing stored, the holds released
	for _, r := range queued {
		s.mu.Lock()
		t := s.tasks[r.id]
		free := t != nil && t.Phase == state.PhaseQueued && !s.held[r.id]
		if free {
			s.held[r.id] = true
			x.take(r.id)
		}
		s.mu.Unlock()
		if !free {
			continue
		}
		stop, err := fn(x, x.tasks[r.id])
		if err != nil {
			return err
		}
		if stop {
			break
		}
	}
	return x.commit()
}

// Events returns a page of a task's stored events: those committed (an
// append in progress lies past the size the store keeps).
func (s *Store) Events(_ context.Context, taskID string, after, limit int, maxBytes int64) ([]store.EventLine, bool, error) {
	s.mu.Lock()
	exists := s.tasks[taskID] != nil
	end := s.sizes[taskID].events
	s.mu.Unlock()
	if !exists {
		return nil, false, nil
	}
	return s.events.page(taskID, end, after, limit, maxBytes)
}

// Prune removes up to limit tasks that ended before before (strictly:
// a task that ended at before stays), with their events and cut keys.
// A task a transaction holds is skipped. The task file goes first: a
// crash part-way leaves files of no task, never a task without its
// events.
func (s *Store) Prune(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	var ids []string
	for _, r := range s.order {
		if len(ids) >= limit {
			break
		}
		if t := s.tasks[r.id]; t.Phase.Terminal() && t.UpdatedAt.Before(before) && !s.held[r.id] {
			ids = append(ids, r.id)
			s.held[r.id] = true
		}
	}
	s.mu.Unlock()
	gone := map[string]bool{}
	var err error
	for _, id := range ids {
		if err = s.files.Delete(id); err != nil {
			break
		}
		gone[id] = true
		if err = s.events.remove(id); err != nil {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range gone {
		delete(s.tasks, id)
		delete(s.keys, id)
		delete(s.sizes, id)
	}
	s.order = slices.DeleteFunc(s.order, func(r ref) bool { return gone[r.id] })
	s.releaseAll(ids)
	return len(gone), err
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
