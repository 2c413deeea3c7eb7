package filestore

import (
	"bytes"
	"time"
)

// Idempotency keys are per task. The keys of a task that has not ended
// are in memory, every one it accepted: those of the events it stored and
// of those whose lines it cut. Once a task has been terminal for
// KeysKeptAfterEnd, they leave memory: they stay in the task's events
// file, and a Seen for the task reads them back from there.
//
// So memory holds the keys of the running tasks and of those that ended
// lately, not of every event ever accepted. What is lost: a cut event's
// key (not in the file) once dropped or after a restart; the same event
// sent again is then counted again, or, for an ended task, rejected.
const KeysKeptAfterEnd = 10 * time.Minute

// keySet is the keys of a task, read back from its events file when they
// are not in memory. mu is held.
func (s *Store) keySet(taskID string) (map[string]struct{}, error) {
	if set := s.keys[taskID]; set != nil {
		return set, nil
	}
	t := s.tasks[taskID]
	if t == nil {
		return nil, nil
	}
	set, err := s.events.keys(taskID, t.EventsBytes)
	if err != nil {
		return nil, err
	}
	s.keys[taskID] = set
	return set, nil
}

// dropKeys forgets the keys of the tasks terminal for KeysKeptAfterEnd.
// mu is held.
func (s *Store) dropKeys() {
	now := s.now()
	for id := range s.keys {
		if t := s.tasks[id]; t == nil || t.Phase.Terminal() && now.Sub(t.UpdatedAt) >= KeysKeptAfterEnd {
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

// isComplete reports whether a stored line is a completion: its kind
// field, which no key or payload string can forge unescaped.
func isComplete(line []byte) bool { return bytes.Contains(line, []byte(`"kind":"complete"`)) }
