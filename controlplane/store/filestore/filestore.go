// Package filestore is the control plane's embedded store: a directory
// one process owns, with no set-up. Each task that has not ended is a
// JSON file in tasks/; each task that ended, a JSON file in ended/ with a
// line in ended/index.jsonl (archive.go). Its accepted events are a JSONL
// file in events/ (events.go) and the keys of its cut events a file
// beside it (ID.cut); the agents' latest records are agents-seen.json
// (agents.go), the agents' token hashes agents.json and the log of
// changes since, agents.log (registry.go), and the labels people granted
// them agent-labels.json (labels.go); the notifications waiting for
// delivery, notify/log.jsonl (notify.go).
//
// What it promises beyond the contract of package store:
//
//   - Its cost follows live work, not history. Memory holds the tasks
//     that have not ended, whole, and of every task a small ref (id,
//     times, phase, repository, lease agent: some 200 bytes); a start
//     reads tasks/, the index and the names in ended/, no ended task's
//     file; Live, Leased, Count and Claim look at the live tasks or at
//     counts and indexes kept up to date at each commit. An ended task is
//     read from its file when asked for (Task, a page of Tasks, an Update
//     that names it), a few hundred of them cached.
//   - A task that ends moves to ended/ in the commit that ends it, and
//     back to tasks/ when a person retries or continues it: the file is
//     written where it goes (synced), the index line appended (synced),
//     then the old file removed. A crash in between leaves two copies:
//     the start keeps the newer by UpdatedAt, the archived one when they
//     are equal, and removes the other. A directory of a store from before
//     the archive (every task in tasks/) has its ended tasks moved at its
//     first start (logged once).
//   - The events are the record: a transaction's events are appended and
//     synced before the task files that reflect them are saved, and each
//     task file says how many events it reflects and how large its events
//     file was then (events_applied, events_bytes: books). A crash
//     between the two is finished at the next start by Recover, which
//     hands the events past that size to the control plane's rules to
//     apply again (and drops the cut keys of those commits); a crash in
//     the middle of an append leaves a torn last line, which the start
//     cuts off first. An ended task appended to (a late completion) has
//     an index line that says so written first: the start reads those.
//   - That bookkeeping is the store's own, never the task's: it keeps it
//     in its refs (sizes) and writes it into the task files beside the
//     task's keys (books).
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
//   - A transaction's notifications (Tx.Notify) are appended to the
//     notification log, synced, after its events and before its task
//     files: a crash leaves the change and its notifications, or neither,
//     or what Recover (and the rules it hands the events to) completes
//     (notify.go).
//   - Files are 0600, directories 0700.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
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

// Store is the file store. It keeps the tasks that have not ended in
// memory, and a ref of every task (archive.go). A transaction holds its
// tasks (tx.go): transactions on different tasks run, and write and sync
// their files, side by side.
type Store struct {
	closeOnce sync.Once
	closeErr  error

	dir        string
	log        *slog.Logger
	now        func() time.Time
	lock       *flock.Flock
	files      *state.Store // tasks/: the tasks that have not ended
	archive    *state.Store // ended/: those that ended
	ix         *index       // ended/index.jsonl
	events     events
	reg        *registry
	grants     *grants // the labels people granted (labels.go)
	agentsFile *agentsFile
	notes      *notifyLog // notify/: the notifications waiting for delivery
	secretMu   sync.Mutex // held while a secret is read or made (secret.go)
	sessions   revokedSessions

	mu   sync.Mutex
	free *sync.Cond      // broadcast when holds are released
	held map[string]bool // the tasks (by id) transactions, Create and Prune hold
	// tasks are the resident tasks (those that have not ended); their
	// refs keep the store's bookkeeping of their events. A stored task is
	// never changed in place: a commit puts a new one.
	tasks  map[string]*state.Task
	refs   map[string]*ref
	order  []*ref                         // every task, oldest first: the lists' order
	queued []*ref                         // the queued tasks, oldest first: what Claim offers
	ended  []*ref                         // the archived tasks, by end then id: what Prune takes
	leased map[string]map[string]struct{} // agent → the live tasks it holds a lease of
	counts map[state.Phase]int
	cache  *endedCache
	// strings are the repositories and agents the refs share.
	strings map[string]string
	// fromArchive are the resident tasks whose file is in ended/, and
	// uncounted those whose file does not say how many events it
	// reflects (written before it was kept): only between Open and
	// Recover, which settles them.
	fromArchive map[string]bool
	uncounted   map[string]bool
	// bulk: Recover files many refs; s.ended is sorted after.
	bulk   bool
	keys   map[string]map[string]struct{}
	agents map[string]store.Agent
	// agentsDirty: an agent's record changed since agentsFile was written.
	agentsDirty bool
	// batches counts the transactions that stored events, for the fault
	// suite's crash points.
	batches int
	// archiveReads counts the reads of ended tasks' files.
	archiveReads atomic.Int64
}

// sizes are the sizes of a task's events file and of its file of cut
// keys, as far as committed, and the seq of its last stored event: the
// file store's bookkeeping, which it writes into the task file (books)
// and hands to nobody.
type sizes struct {
	events, cut int64
	seq         int
}

// books is the bookkeeping a task file holds beside the task's keys
// (state.Store.SaveWith), under the names it had when the task carried
// it: files written then read the same.
type books struct {
	// EventsApplied is how many of the task's stored events the file
	// reflects (the seq of the last); nil in files written before it was
	// kept (then nothing is replayed: Recover counts the lines).
	EventsApplied *int `json:"events_applied,omitempty"`
	// EventsBytes is the size of the task's events file when it held
	// those events: a start finds what a crash left unapplied from the
	// size alone. Zero in files written before it was kept (then the
	// lines are counted).
	EventsBytes int64 `json:"events_bytes,omitempty"`
}

// booksOf is what a task file says of sizes sz.
func booksOf(sz sizes) books {
	n := sz.seq
	return books{EventsApplied: &n, EventsBytes: sz.events}
}

var _ store.Store = (*Store)(nil)

// Open opens (creating) a file store in dir: it reads the tasks that have
// not ended (tasks/), the index of those that ended, and the names in
// ended/, and settles what a crash left in doubt (archive.go). Task files
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
	archive, err := state.OpenStore(filepath.Join(dir, "ended"))
	if err != nil {
		return nil, err
	}
	ev := events{dir: filepath.Join(dir, "events")}
	if err := os.MkdirAll(ev.dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	for _, sub := range []string{"tasks", "events", "ended"} {
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
	grants, err := openGrants(dir, reg)
	if err != nil {
		reg.file.Close()
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	notes, err := openNotifyLog(dir, opts.Logger)
	if err != nil {
		reg.file.Close()
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	closeReg := true
	defer func() {
		if closeReg {
			reg.file.Close()
			notes.close()
		}
	}()
	bk := map[string]*books{} // what each resident task's file says of its events
	list, err := files.LoadAllWith(func(t *state.Task) any {
		b := new(books)
		bk[t.ID] = b
		return b
	})
	if err != nil {
		opts.Logger.Error("some task files could not be read; they are left alone", "err", err)
	}
	latest, lines, err := readIndex(archive.Dir())
	if err != nil {
		return nil, fmt.Errorf("controlplane: read the index of the ended tasks: %w", err)
	}
	names, err := archiveNames(archive.Dir())
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	s := &Store{dir: dir, log: opts.Logger, now: opts.Now, lock: lock, files: files, archive: archive, events: ev, reg: reg, grants: grants, agentsFile: af, notes: notes,
		held: map[string]bool{}, tasks: make(map[string]*state.Task, len(list)), refs: make(map[string]*ref, len(list)+len(latest)),
		leased: map[string]map[string]struct{}{}, counts: map[state.Phase]int{}, cache: newEndedCache(endedCacheSize),
		strings: map[string]string{}, fromArchive: map[string]bool{}, uncounted: map[string]bool{}, keys: map[string]map[string]struct{}{}, agents: agents}
	s.free = sync.NewCond(&s.mu)

	// The tasks in tasks/, and those a crash left in both places.
	var resident []*state.Task
	for _, t := range list {
		delete(latest, t.ID) // its line is from before it left the archive
		if !names[t.ID] {
			resident = append(resident, t)
			continue
		}
		delete(names, t.ID)
		keep, b, err := s.settleCopies(t)
		if err != nil {
			opts.Logger.Error("a task has a file in tasks/ and in ended/; the one in tasks/ is used", "task", t.ID, "err", err)
			keep = t
		} else if b != nil {
			bk[t.ID] = b
		}
		resident = append(resident, keep)
	}
	// The archived tasks: by their index lines, read only when a line
	// says check or there is none.
	var unindexed []string
	for id, l := range latest {
		switch {
		case !names[id]:
			// Pruned (or its file lost): no task.
		case l.Live:
			// It left the archive but its file there was not removed:
			// read below.
		case l.Check:
			unindexed = append(unindexed, id)
			delete(names, id)
		default:
			s.installRef(l)
			delete(names, id)
		}
	}
	for id := range names {
		unindexed = append(unindexed, id)
	}
	slices.Sort(unindexed)
	for _, id := range unindexed {
		t, b, err := s.loadArchived(id)
		if err != nil {
			opts.Logger.Error("an ended task's file could not be read; it is left alone", "task", id, "err", err)
			continue
		}
		bk[id] = &b
		s.fromArchive[id] = true
		resident = append(resident, t)
	}
	if s.ix, err = openIndex(archive.Dir(), lines); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if lines > 2*len(s.ended)+1024 {
		// Mostly dead lines (pruned tasks, and those that changed):
		// written anew.
		out := make([]indexLine, 0, len(s.ended))
		for _, r := range s.ended {
			out = append(out, r.line())
		}
		if err := s.ix.rewrite(out); err != nil {
			s.ix.close()
			return nil, fmt.Errorf("controlplane: compact the index of the ended tasks: %w", err)
		}
		opts.Logger.Info("the index of the ended tasks compacted", "lines", lines, "kept", len(out))
	}
	for _, t := range resident {
		r := &ref{id: t.ID, created: nanos(t.CreatedAt), resident: true}
		if b := bk[t.ID]; b != nil && b.EventsApplied != nil {
			r.sz = sizes{events: b.EventsBytes, seq: *b.EventsApplied}
		} else {
			if b != nil {
				r.sz.events = b.EventsBytes
			}
			s.uncounted[t.ID] = true
		}
		r.fill(t, s.intern)
		s.tasks[t.ID] = t
		s.refs[t.ID] = r
		s.order = append(s.order, r)
		s.counts[r.phase]++
		if r.phase == state.PhaseQueued {
			s.queued = append(s.queued, r)
		}
		if !r.phase.Terminal() && r.agent != "" {
			if s.leased[r.agent] == nil {
				s.leased[r.agent] = map[string]struct{}{}
			}
			s.leased[r.agent][r.id] = struct{}{}
		}
	}
	slices.SortFunc(s.order, compareRefs)
	slices.SortFunc(s.queued, compareRefs)
	slices.SortFunc(s.ended, compareEnded)
	opened, closeReg = true, false
	// Reading the index made garbage many times the size of what is
	// kept: give it back now, not at the runtime's leisure (a start over
	// 100,000 ended tasks: 137 MB resident without this).
	debug.FreeOSMemory()
	return s, nil
}

// settleCopies keeps one of the two files a crash left of task t, in
// tasks/ and in ended/ (a move cut short): the newer by UpdatedAt, the
// archived one when they are equal. It removes the other and returns the
// one kept (from ended/: s.fromArchive says so) and, when it is the
// archived one, what its file says of its events.
func (s *Store) settleCopies(t *state.Task) (*state.Task, *books, error) {
	a, b, err := s.loadArchived(t.ID)
	if err != nil {
		return nil, nil, err
	}
	if t.UpdatedAt.After(a.UpdatedAt) {
		s.log.Info("a task moved out of the archive when a crash came: the copy in tasks/ is kept", "task", t.ID)
		return t, nil, s.archive.Delete(t.ID)
	}
	s.log.Info("a task moved into the archive when a crash came: the copy in ended/ is kept", "task", t.ID)
	if err := s.files.Delete(t.ID); err != nil {
		return nil, nil, err
	}
	s.fromArchive[t.ID] = true
	return a, &b, nil
}

// Missed is an event a crash left unapplied: stored, but past what its
// task file reflects.
type Missed = store.Missed

// Recover brings each task file Open read up to date with its stored
// events, oldest task first: a crash between storing a transaction's
// events and saving its tasks leaves a task file behind, and the events
// past the size it records (events_bytes) say what it missed. apply
// applies them again, as they were (same agent, same time), and may store
// what the change causes (its notifications) before the task is saved; an
// error from apply stops the recovery, the task file left as it was, so
// that the next start applies them again. A torn last line is cut first. Then each task goes where
// its phase says: an ended one to the archive (those of a directory from
// before the archive, and those a crash left ended in tasks/), one that
// has not ended to tasks/. It reads the keys of the tasks that have not
// ended.
func (s *Store) Recover(apply func(t *state.Task, missed []Missed) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Nothing is served yet: the tasks are brought up to date in place.
	var (
		lines      []indexLine
		moved      int      // renamed from tasks/ to ended/
		toLive     []string // saved in tasks/: their files in ended/ go
		archiveErr error
	)
	s.bulk = true
	defer func() {
		s.bulk = false
		slices.SortFunc(s.ended, compareEnded)
	}()
	for _, r := range slices.Clone(s.order) {
		if !r.resident {
			continue
		}
		t := s.tasks[r.id]
		fromArchive := s.fromArchive[r.id]
		src := s.files
		if fromArchive {
			src = s.archive
		}
		sz, err := s.recoverTask(t, r.sz, !s.uncounted[r.id], src, apply)
		if err != nil {
			return err
		}
		ended := t.Phase.Terminal()
		switch {
		case ended && !fromArchive:
			// Its file in tasks/ is up to date (recoverTask saved it
			// there if it was not): renamed into ended/, it is in one
			// place or the other at any time.
			if err := os.Rename(s.files.Path(t.ID), s.archive.Path(t.ID)); err != nil {
				// It stays in tasks/, in memory: the next start tries again.
				archiveErr = errors.Join(archiveErr, err)
				s.install(t, sz, true)
				continue
			}
			lines = append(lines, lineRef(t, sz))
			moved++
		case ended:
			lines = append(lines, lineRef(t, sz))
		case fromArchive:
			if err := s.files.SaveWith(t, booksOf(sz)); err != nil {
				return fmt.Errorf("controlplane: move task %s out of the archive: %w", t.ID, err)
			}
			lines = append(lines, indexLine{ID: t.ID, Live: true})
			toLive = append(toLive, t.ID)
		}
		if !ended {
			set, err := s.events.keys(t.ID, sz)
			if err != nil {
				return fmt.Errorf("controlplane: keys of task %s: %w", t.ID, err)
			}
			s.keys[t.ID] = set
		}
		s.install(t, sz, !ended)
	}
	if archiveErr != nil {
		s.log.Error("some ended tasks could not be moved to the archive; they stay in tasks/", "err", archiveErr)
	}
	if moved > 0 {
		// The renames made durable: the new names, then the old ones gone.
		for _, d := range []string{s.archive.Dir(), s.files.Dir()} {
			if err := durable.SyncDir(d); err != nil {
				return fmt.Errorf("controlplane: %w", err)
			}
		}
	}
	if err := s.ix.append(lines); err != nil {
		return fmt.Errorf("controlplane: index the ended tasks: %w", err)
	}
	if err := s.removeFiles(s.archive, toLive); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	if n := moved; n > 0 {
		s.log.Info("ended tasks moved from tasks/ to the archive (ended/): a start now reads only the tasks that have not ended", "tasks", n)
	}
	s.fromArchive, s.uncounted = nil, nil
	return nil
}

// removeFiles removes the files of ids from st, then syncs its directory
// once.
func (s *Store) removeFiles(st *state.Store, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	for _, id := range ids {
		if err := os.Remove(st.Path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return durable.SyncDir(st.Dir())
}

// recoverTask brings one task up to date with its events (and its file
// of cut keys: a torn last key is cut off), saving it to st when it
// missed some, and returns its files' sizes. from are the sizes its file
// says; counted, whether it says how many events it reflects (from.seq).
// mu is held.
func (s *Store) recoverTask(t *state.Task, from sizes, counted bool, st *state.Store, apply func(t *state.Task, missed []Missed) error) (sizes, error) {
	size, err := s.events.repair(t.ID)
	if err != nil {
		return sizes{}, fmt.Errorf("controlplane: repair the events of task %s: %w", t.ID, err)
	}
	cut, err := s.events.repairFile(s.events.cutPath(t.ID))
	if err != nil {
		return sizes{}, fmt.Errorf("controlplane: repair the cut keys of task %s: %w", t.ID, err)
	}
	got := sizes{events: size, cut: cut, seq: from.seq}
	if !counted && from.events == 0 {
		// A file from before events were counted: all are taken as
		// applied, as they were then.
		_, n, err := s.events.skipLines(t.ID, int(^uint(0)>>1), size)
		if err != nil {
			return sizes{}, fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
		got.seq = n
		return got, nil
	}
	applied := from.seq
	at := from.events
	if at == 0 && applied > 0 {
		// A file from before the size was kept: count the lines.
		if at, _, err = s.events.skipLines(t.ID, applied, size); err != nil {
			return sizes{}, fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
	}
	if size > at {
		// A crash kept the task file from being saved after these events:
		// the cut keys of the same commits go too.
		if cut, err = s.events.trimCut(t.ID, at, cut); err != nil {
			return sizes{}, fmt.Errorf("controlplane: cut keys of task %s: %w", t.ID, err)
		}
		got.cut = cut
	}
	switch {
	case size == at:
		return got, nil
	case size < at:
		s.log.Error("a task's events file is shorter than its task file says; events were lost", "task", t.ID, "file_bytes", size, "task_says", at)
		return got, nil
	}
	missed, err := s.events.read(t.ID, at, size)
	if err != nil {
		return sizes{}, fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
	}
	list := make([]Missed, len(missed))
	for i, m := range missed {
		list[i] = Missed{StoredEvent: m.StoredEvent, Seq: applied + i + 1, Size: m.size}
	}
	if err := apply(t, list); err != nil {
		return sizes{}, fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	got.seq = applied + len(missed)
	if err := st.SaveWith(t, booksOf(got)); err != nil {
		return sizes{}, fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	s.log.Info("task brought up to date with its stored events after a crash", "task", t.ID, "events", len(missed))
	return got, nil
}

// Close writes the agents' token hashes into one file (registry.go) and
// releases the directory. The store is not to be used after; a second
// Close returns the first's error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.agentsFile.mu.Lock()
		agentsErr := s.writeAgents(s.now())
		s.agentsFile.mu.Unlock()
		err := s.reg.close()
		s.closeErr = errors.Join(agentsErr, err, s.notes.close(), s.ix.close(), s.lock.Unlock())
	})
	return s.closeErr
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
	exists := s.refs[t.ID] != nil
	if exists {
		s.releaseAll([]string{t.ID})
	}
	s.mu.Unlock()
	if exists {
		return fmt.Errorf("controlplane: task %s exists", t.ID)
	}
	t = t.Clone()
	ended := t.Phase.Terminal()
	var err error
	if ended {
		if err = s.archive.SaveWith(t, booksOf(sizes{})); err == nil {
			err = s.ix.append([]indexLine{lineRef(t, sizes{})})
		}
	} else {
		err = s.files.SaveWith(t, booksOf(sizes{})) // a new task has no events
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.install(t, sizes{}, !ended)
		if !ended {
			s.keys[t.ID] = map[string]struct{}{}
		}
	}
	s.releaseAll([]string{t.ID})
	return err
}

// Task returns a copy of task id, nil when there is none: from memory,
// or from its file in the archive.
func (s *Store) Task(_ context.Context, id string) (*state.Task, error) {
	s.mu.Lock()
	r := s.refs[id]
	if r == nil || r.resident {
		defer s.mu.Unlock()
		if r == nil {
			return nil, nil
		}
		return s.tasks[id].Clone(), nil
	}
	s.mu.Unlock()
	t, _, err := s.readEnded(id)
	if t == nil || err != nil {
		return nil, err
	}
	return t.Clone(), nil
}

// matchRef reports whether the task of r is selected by q's filters.
func matchRef(q store.Query, r *ref) bool {
	return (q.Phase == "" || r.phase == q.Phase) &&
		(q.Agent == "" || r.agent == q.Agent) &&
		(q.Repo == "" || r.repo == q.Repo) &&
		(!q.Live || !r.phase.Terminal())
}

// Tasks returns a page of tasks, oldest first (newest first for q.Order
// newest: the same order read backwards). The filters select by the
// refs; the page's ended tasks are read from their files (or the cache),
// no other. A title search is the exception: see byTitle.
func (s *Store) Tasks(ctx context.Context, q store.Query) ([]*state.Task, string, error) {
	s.mu.Lock()
	newest := q.Order == api.OrderNewest
	start, end := 0, len(s.order) // the refs after the cursor: s.order[start:end]
	if q.After != "" {
		r := s.refs[q.After]
		if r == nil {
			s.mu.Unlock()
			return nil, "", fmt.Errorf("%w: no task %q", store.ErrCursor, state.Ellipsize(q.After, 140))
		}
		i, _ := slices.BinarySearchFunc(s.order, r, compareRefs)
		if newest {
			end = i
		} else {
			start = i + 1
		}
	}
	after := slices.Values(s.order[start:end])
	if newest {
		after = func(yield func(*ref) bool) {
			for i := end - 1; i >= start; i-- {
				if !yield(s.order[i]) {
					return
				}
			}
		}
	}
	if q.Title != "" {
		var ids []string
		for r := range after {
			if matchRef(q, r) {
				ids = append(ids, r.id)
			}
		}
		s.mu.Unlock()
		return s.byTitle(ctx, q, ids)
	}
	var (
		page   []*state.Task
		ids    []string // the page's tasks, in order
		toRead bool
		next   string
	)
	for r := range after {
		if !matchRef(q, r) {
			continue
		}
		if q.Limit > 0 && len(ids) == q.Limit {
			next = ids[len(ids)-1]
			break
		}
		var t *state.Task
		if r.resident {
			t = s.tasks[r.id].Clone()
		} else if c := s.cache.get(r.id, r.gen); c != nil {
			t = c.t.Clone()
		} else {
			toRead = true
		}
		page = append(page, t)
		ids = append(ids, r.id)
	}
	s.mu.Unlock()
	if !toRead {
		return page, next, nil
	}
	out := page[:0]
	for i, t := range page {
		if t == nil {
			c, _, err := s.readEnded(ids[i])
			if err != nil {
				return nil, "", err
			}
			if c == nil {
				continue // pruned meanwhile
			}
			t = c.Clone()
		}
		out = append(out, t)
	}
	return out, next, nil
}

// byTitle is the page of Tasks for a title search among the tasks ids
// (those the other filters select, in order): the refs do not hold
// titles, so each task is looked at, an ended one read from its file,
// until the page is full and one more matches.
func (s *Store) byTitle(ctx context.Context, q store.Query, ids []string) ([]*state.Task, string, error) {
	var page []*state.Task
	for _, id := range ids {
		t, err := s.Task(ctx, id)
		if err != nil {
			return nil, "", err
		}
		if t == nil || !q.Match(t) {
			continue // pruned or changed meanwhile, or not a match
		}
		if q.Limit > 0 && len(page) == q.Limit {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, t)
	}
	return page, "", nil
}

// Count counts the tasks by phase: counts kept at each commit.
func (s *Store) Count(context.Context) (map[state.Phase]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts), nil
}

// Leased returns the tasks not ended whose lease agentID holds, oldest
// first: from the index of leases by agent.
func (s *Store) Leased(_ context.Context, agentID string) ([]*state.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.leased[agentID]
	if len(ids) == 0 {
		return nil, nil
	}
	refs := make([]*ref, 0, len(ids))
	for id := range ids {
		refs = append(refs, s.refs[id])
	}
	slices.SortFunc(refs, compareRefs)
	out := make([]*state.Task, 0, len(refs))
	for _, r := range refs {
		out = append(out, s.tasks[r.id].Clone())
	}
	return out, nil
}

// Live calls fn with a copy of each task that has not ended, oldest
// first: the tasks in memory. It is the watchdog's pass: the keys of
// tasks ended long enough leave memory.
func (s *Store) Live(_ context.Context, fn func(*state.Task) error) error {
	s.mu.Lock()
	s.dropKeys()
	refs := make([]*ref, 0, len(s.tasks))
	for id, t := range s.tasks {
		if !t.Phase.Terminal() {
			refs = append(refs, s.refs[id])
		}
	}
	slices.SortFunc(refs, compareRefs)
	live := make([]*state.Task, len(refs))
	for i, r := range refs {
		live[i] = s.tasks[r.id]
	}
	s.mu.Unlock()
	// The stored tasks are never changed in place: copied without mu.
	for _, t := range live {
		if err := fn(t.Clone()); err != nil {
			return err
		}
	}
	return nil
}

// Update runs fn with the tasks ids held, then stores what it saved and
// appended. It waits until no other transaction holds any of them, then
// holds them all at once; fn runs, and the commit writes its files,
// without the store's lock, so transactions on other tasks go on
// meanwhile. An ended task it names is read from its file.
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
	if err := x.load(); err != nil {
		return err
	}
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
	queued := make([]string, len(s.queued))
	for i, r := range s.queued {
		queued[i] = r.id
	}
	s.mu.Unlock()
	x := s.begin()
	defer x.abort() // fn's panic, or its error: nothing stored, the holds released
	for _, id := range queued {
		s.mu.Lock()
		t := s.tasks[id]
		free := t != nil && t.Phase == state.PhaseQueued && !s.held[id]
		if free {
			s.held[id] = true
			x.take(id)
		}
		s.mu.Unlock()
		if !free {
			continue
		}
		stop, err := fn(x, x.tasks[id])
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
	r := s.refs[taskID]
	var end int64
	if r != nil {
		end = r.sz.events
	}
	s.mu.Unlock()
	if r == nil {
		return nil, false, nil
	}
	return s.events.page(taskID, end, after, limit, maxBytes)
}

// Prune removes up to limit tasks that ended before before (strictly:
// a task that ended at before stays), with their events and cut keys,
// those that ended first first (the archived tasks are kept in that
// order). A task a transaction holds is skipped. The task file goes
// first: a crash part-way leaves files of no task, never a task without
// its events; its index line goes at the next start, which finds no file
// for it.
func (s *Store) Prune(_ context.Context, before time.Time, limit int) (int, error) {
	cut := nanos(before)
	s.mu.Lock()
	var ids []string
	for _, r := range s.ended {
		if len(ids) >= limit || r.ended >= cut {
			break
		}
		if !s.held[r.id] {
			ids = append(ids, r.id)
			s.held[r.id] = true
		}
	}
	s.mu.Unlock()
	gone := map[string]bool{}
	var err error
	for _, id := range ids {
		if err = os.Remove(s.archive.Path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			break
		}
		err = nil
		gone[id] = true
	}
	if len(gone) > 0 {
		if serr := durable.SyncDir(s.archive.Dir()); serr != nil && err == nil {
			err = serr
		}
	}
	for id := range gone {
		if rerr := s.events.remove(id); rerr != nil && err == nil {
			err = rerr
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range gone {
		r := s.refs[id]
		if s.counts[r.phase]--; s.counts[r.phase] <= 0 {
			delete(s.counts, r.phase)
		}
		delete(s.refs, id)
		delete(s.keys, id)
		s.cache.remove(id)
	}
	if len(gone) > 0 {
		s.order = slices.DeleteFunc(s.order, func(r *ref) bool { return gone[r.id] })
		s.ended = slices.DeleteFunc(s.ended, func(r *ref) bool { return gone[r.id] })
	}
	s.releaseAll(ids)
	return len(gone), err
}

// Register records agent id's token hash.
func (s *Store) Register(_ context.Context, id, tokenHash string, replace bool) error {
	return s.reg.register(id, tokenHash, replace)
}

// AgentByToken returns the agent a token hash belongs to.
func (s *Store) AgentByToken(_ context.Context, tokenHash string) (string, error) {
	return s.reg.agent(tokenHash), nil
}

// errNotLocked is a Save of a task the transaction did not lock.
var errNotLocked = errors.New("controlplane: a transaction saved a task it does not hold")
