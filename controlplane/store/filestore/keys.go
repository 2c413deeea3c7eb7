package filestore

import (
	"time"
)

// Idempotency keys are per task. The keys of a task that has not ended
// are in memory, every one it accepted: those of the events it stored and
// of those whose lines it cut. Once a task has been terminal for
// KeysKeptAfterEnd, they leave memory: they stay on disk, the keys of the
// stored events in the task's events file (each line starts with its
// key), the cut ones in its file of cut keys (events/ID.cut), and a Seen
// for the task reads them back from there.
//
// So memory holds the keys of the running tasks and of those that ended
// lately, not of every event ever accepted, and a restart loses none.
const KeysKeptAfterEnd = 10 * time.Minute

// seen reports whether key was accepted for a task, by a committed
// transaction: from the keys in memory, else read back from the task's
// files (and kept in memory then, unless a commit changed the files
// meanwhile). It takes mu briefly, and reads the files without it.
func (s *Store) seen(taskID, key string) (bool, error) {
	s.mu.Lock()
	set := s.keys[taskID]
	_, ok := set[key]
	r := s.refs[taskID]
	exists := r != nil
	var sz sizes
	if exists {
		sz = r.sz
	}
	s.mu.Unlock()
	if set != nil || !exists {
		return ok, nil
	}
	set, err := s.events.keys(taskID, sz)
	if err != nil {
		return false, err
	}
	_, ok = set[key]
	s.mu.Lock()
	if r := s.refs[taskID]; s.keys[taskID] == nil && r != nil && r.sz == sz {
		s.keys[taskID] = set
	}
	s.mu.Unlock()
	return ok, nil
}

// dropKeys forgets the keys of the tasks terminal for KeysKeptAfterEnd.
// mu is held.
func (s *Store) dropKeys() {
	cut := nanos(s.now().Add(-KeysKeptAfterEnd))
	for id := range s.keys {
		if r := s.refs[id]; r == nil || r.phase.Terminal() && r.ended <= cut {
			delete(s.keys, id)
		}
	}
}

// KeysHeld is how many tasks have their keys in memory, and whether task
// id is one: for tests.
func (s *Store) KeysHeld(id string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[id]
	return len(s.keys), ok
}
