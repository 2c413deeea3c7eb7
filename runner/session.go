package runner

import (
	"strconv"
	"sync"
)

// sessionEmitter passes an app server's events to the runner, which takes
// an event only from a known session: events said before the CLI named its
// session (its stderr at start-up, say) wait, and go out once it has; a
// CLI that never names one gets a stand-in at the end, so nothing it said
// is lost. It is safe for concurrent use (emit is called from one
// goroutine at a time).
type sessionEmitter struct {
	mu       sync.Mutex
	emit     func(Event)
	session  string
	held     []Event
	fallback string
}

// maxHeld bounds what waits for the session.
const maxHeld = 1000

func newSessionEmitter(emit func(Event), kind string, pid int) *sessionEmitter {
	return &sessionEmitter{emit: emit, fallback: kind + "-" + strconv.Itoa(pid)}
}

// bind names the session (once) and sends what waited for it.
func (s *sessionEmitter) bind(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != "" || id == "" {
		return
	}
	s.session = id
	s.emit(Event{Type: EventSession, SessionID: id})
	for _, ev := range s.held {
		ev.SessionID = id
		s.emit(ev)
	}
	s.held = nil
}

// send passes ev on, or holds it until the session is known.
func (s *sessionEmitter) send(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == "" {
		if len(s.held) < maxHeld {
			s.held = append(s.held, ev)
		}
		return
	}
	ev.SessionID = s.session
	s.emit(ev)
}

// close sends what still waits, under the stand-in session if the CLI
// never named one.
func (s *sessionEmitter) close() {
	s.mu.Lock()
	pending := s.session == "" && len(s.held) > 0
	s.mu.Unlock()
	if pending {
		s.bind(s.fallback)
	}
}
