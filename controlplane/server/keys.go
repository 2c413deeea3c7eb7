package server

import (
	"time"

	"github.com/edgeagent/agent/state"
)

// Idempotency keys are per task. The keys of a task that has not ended
// are in memory (Server.keys), every one it accepted, those of the events
// it stored and of those whose lines it cut. Once a task has been
// terminal for keysKeptAfterEnd, the watchdog drops them: they stay in the
// task's events file, and a late event from the agent that holds the
// task's lease has them read back from there for its batch, so that what
// it sends again is still a duplicate, not a rejection (which would make
// it a dead record). Another agent's late event is rejected (terminal)
// without a read. A task a person's retry brings back has its keys read
// back at its first event.
//
// So memory holds the keys of the running tasks and of those that ended
// lately, not of every event ever accepted. What is lost: a cut event's
// key (not in the file) once dropped or after a restart; the same event
// sent again is then counted again, or, for an ended task, rejected.
const keysKeptAfterEnd = 10 * time.Minute

// keySet is the keys of task t, read back from its events file when they
// are not in memory, unless t ended and agentID does not hold its lease
// (nil then: its late event is rejected). mu is held.
func (s *Server) keySet(t *state.Task, agentID string) (map[string]struct{}, error) {
	if set := s.keys[t.ID]; set != nil {
		return set, nil
	}
	if t.Phase.Terminal() && (t.Lease == nil || t.Lease.AgentID != agentID) {
		return nil, nil
	}
	set, err := s.events.keys(t.ID, t.EventsBytes)
	if err != nil {
		return nil, err
	}
	s.keys[t.ID] = set
	return set, nil
}

// dropKeys forgets the keys of the tasks terminal for keysKeptAfterEnd.
// mu is held.
func (s *Server) dropKeys(now time.Time) {
	for id := range s.keys {
		if t := s.tasks[id]; t == nil || t.Phase.Terminal() && now.Sub(t.UpdatedAt) >= keysKeptAfterEnd {
			delete(s.keys, id)
		}
	}
}
