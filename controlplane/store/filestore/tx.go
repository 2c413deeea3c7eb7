package filestore

import (
	"fmt"
	"slices"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Holds. A transaction holds the tasks it works on: no other
// transaction, Create or Prune touches a held task until it is released.
// Update takes all its tasks at once, waiting (on free) until none of them
// is held, so no transaction holds one task while it waits for another,
// and none can deadlock. Claim never waits: it skips what is held. s.mu
// guards the maps and the holds and is held only briefly: never while fn
// runs, never across a file's write or sync (each file a commit writes
// belongs to a task it holds).

// holdAll waits until none of ids is held, then holds them all. mu is
// held (free.Wait lets it go meanwhile).
func (s *Store) holdAll(ids []string) {
	for slices.ContainsFunc(ids, func(id string) bool { return s.held[id] }) {
		s.free.Wait()
	}
	for _, id := range ids {
		s.held[id] = true
	}
}

// releaseAll releases ids and wakes those waiting for a hold. mu is held.
func (s *Store) releaseAll(ids []string) {
	for _, id := range ids {
		delete(s.held, id)
	}
	s.free.Broadcast()
}

// tx is a transaction of the file store: copies of the tasks it holds,
// changed freely, stored with the events appended at commit.
type tx struct {
	s     *Store
	held  []string               // every id held, in the order taken
	base  map[string]*state.Task // each held task as stored when taken (nil: none); never changed
	tasks map[string]*state.Task // the existing tasks held, as the transaction changes them
	sizes map[string]sizes       // the sizes of each held task's files when taken
	// archived are the held tasks whose file is in ended/; toLoad those
	// of them not read yet (load reads them).
	archived map[string]bool
	toLoad   []string

	saved   []string // the tasks saved, in the order first saved
	isSaved map[string]bool
	lines   map[string][]byte   // each task's events to store, one line each
	nlines  map[string]int      // how many lines each task's are
	keys    map[string][]string // each task's keys appended, stored lines and cut ones
	cut     map[string][]string // each task's keys of cut events (no line)
	order   []string            // tasks in the order first appended to
	notes   []store.Notification
	// complete says the transaction holds a completion (for the crash
	// points).
	complete bool
	done     bool // committed or aborted: the holds are released
}

func (s *Store) begin() *tx {
	return &tx{s: s, base: map[string]*state.Task{}, tasks: map[string]*state.Task{}, sizes: map[string]sizes{},
		archived: map[string]bool{}, isSaved: map[string]bool{}, lines: map[string][]byte{}, nlines: map[string]int{}, keys: map[string][]string{}, cut: map[string][]string{}}
}

// take brings task id, which the caller has just held, into the
// transaction: a task in memory at once, an archived one when load reads
// it. mu is held.
func (x *tx) take(id string) {
	x.held = append(x.held, id)
	r := x.s.refs[id]
	if r == nil {
		x.base[id] = nil
		return
	}
	x.sizes[id] = r.sz
	if !r.resident {
		x.archived[id] = true
		x.toLoad = append(x.toLoad, id)
		return
	}
	t := x.s.tasks[id]
	x.base[id] = t
	x.tasks[id] = t.Clone()
}

// load reads the archived tasks take brought in, from their files (or
// the cache). They are held: nothing changes them meanwhile. mu is not
// held.
func (x *tx) load() error {
	for _, id := range x.toLoad {
		t, seq, err := x.s.readEnded(id)
		if err != nil {
			return err
		}
		if t == nil {
			return fmt.Errorf("controlplane: ended task %s is gone", id) // cannot be: it is held
		}
		// An archived task's ref (its index line) does not keep the seq:
		// its file does.
		sz := x.sizes[id]
		sz.seq = seq
		x.sizes[id] = sz
		x.base[id] = t
		x.tasks[id] = t.Clone()
	}
	x.toLoad = nil
	return nil
}

// abort ends a transaction that stores nothing: its holds are released.
func (x *tx) abort() {
	if x.done {
		return
	}
	x.done = true
	x.s.mu.Lock()
	x.s.releaseAll(x.held)
	x.s.mu.Unlock()
}

// Task returns the transaction's copy of task id, nil when it does not
// exist or the transaction does not hold it.
func (x *tx) Task(id string) *state.Task { return x.tasks[id] }

// Save keeps t to be stored at commit, as it is then (a copy is taken
// at commit: what the caller changes after Update returns changes
// nothing stored). t must be a task the transaction holds.
func (x *tx) Save(t *state.Task) {
	if x.tasks[t.ID] == nil {
		panic(errNotLocked)
	}
	x.tasks[t.ID] = t
	if !x.isSaved[t.ID] {
		x.isSaved[t.ID] = true
		x.saved = append(x.saved, t.ID)
	}
}

// Notify keeps ns to be stored at commit, with the transaction's
// changes.
func (x *tx) Notify(ns ...store.Notification) {
	for _, n := range ns {
		n.Body = slices.Clone(n.Body)
		x.notes = append(x.notes, n)
	}
}

// Seen reports whether key was accepted for the task: in this
// transaction, or before (the keys in memory, else read back from the
// task's events file and its file of cut keys, as far as committed).
func (x *tx) Seen(taskID, key string) (bool, error) {
	if slices.Contains(x.keys[taskID], key) {
		return true, nil
	}
	return x.s.seen(taskID, key)
}

// LastSeq is the seq of the task's last stored event, with those the
// transaction appended.
func (x *tx) LastSeq(taskID string) int { return x.sizes[taskID].seq + x.nlines[taskID] }

// Append records key for the task, and line as its next event unless
// line is nil (then the key goes to the task's file of cut keys). The
// task must be one the transaction holds.
func (x *tx) Append(taskID, key string, kind state.EventKind, _ int, line []byte) {
	if x.tasks[taskID] == nil {
		panic(errNotLocked)
	}
	if _, ok := x.keys[taskID]; !ok {
		x.order = append(x.order, taskID)
	}
	x.keys[taskID] = append(x.keys[taskID], key)
	if line == nil {
		x.cut[taskID] = append(x.cut[taskID], key)
		return
	}
	x.lines[taskID] = append(append(x.lines[taskID], line...), '\n')
	x.nlines[taskID]++
	if kind == state.EventComplete {
		x.complete = true
	}
}

// commit stores the transaction and releases its holds. First, for each
// archived task appended to, an index line saying check (archive.go);
// then the events of each task appended to, then its cut keys, each
// synced; then its notifications (notify.go), synced; then the task files (those saved, and those whose events grew,
// for each task file says how large its events file is), each where its
// phase says: tasks/ or ended/; then the index lines of the tasks that
// moved or changed in the archive, synced; then the files the moves left
// behind are removed; then memory, under mu. A crash between the events
// and the task files is finished by Recover. An append that fails stores
// none of the tasks it was for, nor those after it; the tasks whose
// events were stored before it are saved.
//
// No lock is held while the files are written: each belongs to a task
// the transaction holds.
func (x *tx) commit() error {
	s := x.s
	defer x.abort() // a panic on the way releases the holds too
	var batch crashBatch
	if len(x.lines) > 0 {
		s.mu.Lock()
		s.batches++
		batch = crashBatch{n: s.batches, complete: x.complete, notify: len(x.notes) > 0}
		s.mu.Unlock()
	}
	var checks []indexLine
	for _, id := range x.order {
		if x.archived[id] {
			l := lineRef(x.base[id], x.sizes[id])
			l.Check = true
			checks = append(checks, l)
		}
	}
	if err := s.ix.append(checks); err != nil {
		s.log.Error("index the ended tasks", "err", err)
		return fmt.Errorf("store events: %w", err)
	}
	after := map[string]sizes{} // the sizes of the files of the tasks appended to, after the appends
	ids := x.order
	var failed error
	for i, id := range x.order {
		sz := x.sizes[id]
		if len(x.lines[id]) > 0 {
			n, err := s.events.append(id, x.lines[id], batch.at(crashMidEvents))
			if err != nil {
				s.log.Error("store events", "task", id, "err", err)
				ids, failed = x.order[:i], fmt.Errorf("store events of %s: %w", id, err)
				break
			}
			sz.events, sz.seq = n, sz.seq+x.nlines[id]
		}
		if len(x.cut[id]) > 0 {
			n, err := s.events.appendCut(id, x.cut[id], sz.events)
			if err != nil {
				// Its events are stored: it goes with those before it.
				s.log.Error("store cut keys", "task", id, "err", err)
				after[id] = sz
				ids, failed = x.order[:i+1], fmt.Errorf("store the cut keys of %s: %w", id, err)
				break
			}
			sz.cut = n
		}
		after[id] = sz
	}
	if batch.at(crashAfterEvents) {
		crash()
	}
	// The notifications, after the events and before the task files: all
	// of them when some of the events are stored and an append failed,
	// for the tasks stored have their changes, and the others are sent
	// again by their agent, their change then writing the same records
	// (not stored twice). None when nothing is stored.
	if failed != nil && len(after) == 0 {
		return failed
	}
	if err := s.notes.add(x.notes); err != nil {
		s.log.Error("store notifications", "err", err)
		if len(after) == 0 {
			return fmt.Errorf("store notifications: %w", err) // nothing stored
		}
		if failed == nil {
			failed = fmt.Errorf("the events are stored but their notifications could not be: %w", err)
		}
	}
	if len(x.notes) > 0 && batch.at(crashAfterNotify) {
		crash()
	}
	if failed == nil {
		ids = slices.Clone(x.saved)
		for _, id := range x.order {
			if !x.isSaved[id] {
				ids = append(ids, id)
			}
		}
	}
	install := make([]*state.Task, len(ids))
	resident := make([]bool, len(ids))
	var (
		lines                  []indexLine // of the tasks archived, changed there, or out of it
		leftLive, leftArchived []string    // files the moves leave behind
	)
	for i, id := range ids {
		sz, appended := after[id]
		if !appended {
			sz = x.sizes[id]
		}
		t := x.tasks[id]
		if !x.isSaved[id] {
			if sz.events == x.sizes[id].events {
				if x.archived[id] {
					// Only cut keys: the file stays, the index line
					// (which says check) is written anew.
					lines = append(lines, lineRef(x.base[id], sz))
				}
				continue // no event stored, only cut keys: the task file stays as it is
			}
			t = x.base[id] // as stored, with its events file's new size
		}
		c := t.Clone()
		ended, wasArchived := c.Phase.Terminal(), x.archived[id]
		dst := s.files
		if ended {
			dst = s.archive
		}
		resident[i] = !ended
		if err := dst.SaveWith(c, booksOf(sz)); err != nil {
			s.log.Error("save task", "task", id, "err", err)
			if failed == nil {
				// The events are stored: the next start brings the task
				// file up to date. Say so rather than answer as if all
				// was well.
				failed = fmt.Errorf("events of %s are stored but the task could not be saved (it is repaired at the next start): %w", id, err)
			}
			resident[i] = !wasArchived // it stays where its file is
		} else {
			switch {
			case ended:
				lines = append(lines, lineRef(c, sz))
				if !wasArchived {
					leftLive = append(leftLive, id)
				}
			case wasArchived:
				lines = append(lines, indexLine{ID: id, Live: true})
				leftArchived = append(leftArchived, id)
			}
		}
		install[i] = c
	}
	if err := s.ix.append(lines); err != nil {
		// The moved tasks have two copies: the next start keeps the
		// newer. Both stay until then.
		s.log.Error("index the ended tasks", "err", err)
		leftLive, leftArchived = nil, nil
		if failed == nil {
			failed = fmt.Errorf("the tasks are stored but the index of the ended tasks could not be (it is repaired at the next start): %w", err)
		}
	}
	for _, err := range []error{s.removeFiles(s.files, leftLive), s.removeFiles(s.archive, leftArchived)} {
		if err != nil {
			// Two copies, which the next start settles: nothing is lost.
			s.log.Error("remove the file a task left behind when it moved", "err", err)
		}
	}
	if batch.at(crashAfterSave) {
		crash()
	}
	s.mu.Lock()
	for i, id := range ids {
		sz, appended := after[id]
		if install[i] != nil {
			if !appended {
				sz = x.sizes[id]
			}
			s.install(install[i], sz, resident[i])
		} else if r := s.refs[id]; appended && r != nil {
			r.sz = sz
		}
		if set := s.keys[id]; set != nil {
			for _, k := range x.keys[id] {
				set[k] = struct{}{}
			}
		}
	}
	x.done = true
	s.releaseAll(x.held)
	s.mu.Unlock()
	return failed
}
