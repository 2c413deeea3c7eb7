package filestore

import (
	"fmt"

	"github.com/edgeagent/agent/state"
)

// tx is a transaction of the file store: copies of the tasks it holds,
// changed freely, and installed, with the events appended, at commit. mu
// is held from begin to commit.
type tx struct {
	s     *Store
	tasks map[string]*state.Task // the tasks held, as the transaction changes them
	saved []string               // the tasks saved, in the order first saved
	isSaved map[string]bool
	lines map[string][]byte   // each task's events to store, one line each
	count map[string]int      // and how many they are
	keys  map[string][]string // each task's keys appended
	order []string            // tasks in the order first appended to
	complete bool              // it holds a completion (for the crash points)
}

func (s *Store) begin() *tx {
	return &tx{s: s, tasks: map[string]*state.Task{}, isSaved: map[string]bool{}, lines: map[string][]byte{}, count: map[string]int{}, keys: map[string][]string{}}
}

// lock takes task id into the transaction; nil when there is none.
func (x *tx) lock(id string) *state.Task {
	if t, ok := x.tasks[id]; ok {
		return t
	}
	t := x.s.tasks[id]
	if t != nil {
		t = t.Clone()
	}
	x.tasks[id] = t
	return t
}

func (x *tx) Task(id string) *state.Task { return x.tasks[id] }

func (x *tx) Save(t *state.Task) {
	if x.tasks[t.ID] != t {
		panic(errNotLocked)
	}
	if !x.isSaved[t.ID] {
		x.isSaved[t.ID] = true
		x.saved = append(x.saved, t.ID)
	}
}

// Seen reports whether key was accepted for the task: in this
// transaction, or before (the keys in memory, else read back from its
// events file).
func (x *tx) Seen(taskID, key string) (bool, error) {
	for _, k := range x.keys[taskID] {
		if k == key {
			return true, nil
		}
	}
	set, err := x.s.keySet(taskID)
	if err != nil {
		return false, err
	}
	_, ok := set[key]
	return ok, nil
}

func (x *tx) Append(taskID, key string, seq int, line []byte) {
	if _, ok := x.keys[taskID]; !ok {
		x.order = append(x.order, taskID)
	}
	x.keys[taskID] = append(x.keys[taskID], key)
	if line != nil {
		x.lines[taskID] = append(append(x.lines[taskID], line...), '\n')
		x.count[taskID]++
		if isComplete(line) {
			x.complete = true
		}
	}
}

// commit stores the transaction: the events first, synced, then the task
// files, then memory. A crash between the two is finished by Recover. An
// append that fails stores none of the tasks it was for, nor those after
// it; the tasks whose events were stored before it are saved.
func (x *tx) commit() error {
	s := x.s
	var batch crashBatch
	if len(x.lines) > 0 {
		s.batches++
		batch = crashBatch{n: s.batches, complete: x.complete}
	}
	for i, id := range x.order {
		if len(x.lines[id]) == 0 {
			continue // every line cut: only keys and the task's counts change
		}
		size, err := s.events.append(id, x.lines[id], batch.at(crashMidEvents))
		if err != nil {
			for _, done := range x.order[:i] {
				x.install(done, true) // stored already; a failure is repaired at the next start
			}
			s.log.Error("store events", "task", id, "err", err)
			return fmt.Errorf("store events of %s: %w", id, err)
		}
		if t := x.tasks[id]; t != nil {
			t.EventsBytes = size
		}
	}
	if batch.at(crashAfterEvents) {
		crash()
	}
	var failed error
	for _, id := range x.saved {
		if err := x.install(id, true); err != nil && failed == nil {
			// The events are stored: the next start brings the task file
			// up to date. Say so rather than answer as if all was well.
			failed = fmt.Errorf("events of %s are stored but the task could not be saved (it is repaired at the next start): %w", id, err)
		}
	}
	for _, id := range x.order {
		if !x.isSaved[id] {
			x.install(id, false)
		}
	}
	if batch.at(crashAfterSave) {
		crash()
	}
	return failed
}

// install makes task id's copy the task, saving it to its file when save
// is set, and adds the keys appended for it.
func (x *tx) install(id string, save bool) error {
	s := x.s
	t := x.tasks[id]
	if t == nil {
		return nil
	}
	var err error
	if save {
		if err = s.files.Save(t); err != nil {
			s.log.Error("save task", "task", id, "err", err)
		}
	}
	s.tasks[id] = t
	if set := s.keys[id]; set != nil {
		for _, k := range x.keys[id] {
			set[k] = struct{}{}
		}
	}
	return err
}
