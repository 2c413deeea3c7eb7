package cli

import (
	"strconv"
	"sync"

	"github.com/edgeagent/agent/runner"
)

// SessionEmitter passes a CLI's events to the runner, which takes
// an event only from a known session: events said before the CLI named its
// session (its stderr at start-up, say) wait, and go out once it has; a
// CLI that never names one gets a stand-in at the end, so nothing it said
// is lost. It is safe for concurrent use (emit is called from one
// goroutine at a time).
type SessionEmitter struct {
	mu       sync.Mutex
	emit     func(runner.Event)
	session  string
	path     string
	held     []runner.Event
	fallback string
}

// maxHeld bounds what waits for the session.
const maxHeld = 1000

// NewSessionEmitter returns an emitter to emit; the stand-in session is
// kind-pid.
func NewSessionEmitter(emit func(runner.Event), kind string, pid int) *SessionEmitter {
	return &SessionEmitter{emit: emit, fallback: kind + "-" + strconv.Itoa(pid)}
}

// Bind names the session (once) and sends what waited for it.
func (s *SessionEmitter) Bind(id string) { s.BindAt(id, "") }

// BindAt names the session (once) with where the CLI keeps it, and sends
// what waited for it. Binding the same session again with another path
// says the session moved (the CLI wrote it elsewhere than first said):
// the runner records the new path. Another id, once one is bound, is
// ignored: an attempt has one session.
func (s *SessionEmitter) BindAt(id, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		return
	}
	if s.session != "" {
		if id == s.session && path != "" && path != s.path {
			s.path = path
			s.emit(runner.Event{Type: runner.EventSession, SessionID: id, SessionPath: path})
		}
		return
	}
	s.session, s.path = id, path
	s.emit(runner.Event{Type: runner.EventSession, SessionID: id, SessionPath: path})
	for _, ev := range s.held {
		ev.SessionID = id
		s.emit(ev)
	}
	s.held = nil
}

// Session is the bound session and where the CLI keeps it; "" before
// one is bound.
func (s *SessionEmitter) Session() (id, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session, s.path
}

// Send passes ev on, or holds it until the session is known.
func (s *SessionEmitter) Send(ev runner.Event) {
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

// Close sends what still waits, under the stand-in session if the CLI
// never named one.
func (s *SessionEmitter) Close() {
	s.mu.Lock()
	pending := s.session == "" && len(s.held) > 0
	s.mu.Unlock()
	if pending {
		s.Bind(s.fallback)
	}
}

// Restore names the session an attempt taken up again (runner.Reattach)
// had bound in the agent's previous life, without telling it again: the
// runner had it.
func (s *SessionEmitter) Restore(id, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "" && s.session == "" {
		s.session, s.path = id, path
	}
}

// Bound reports whether the session is named: before it is, what the CLI
// said is held, not passed on.
func (s *SessionEmitter) Bound() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != ""
}
