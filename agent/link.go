package agent

import (
	"sync"
	"time"
)

// link is what the heartbeat learned of the control plane: whether the
// last heartbeat got through, and the interval it asked for. The claim
// loop and the watchdog read it.
type link struct {
	mu       sync.Mutex
	reached  bool
	interval time.Duration
	// publicURL is where people reach the control plane's console, as
	// its heartbeat answers said ("" when it did not).
	publicURL string
}

// PublicURL is where people reach the control plane's console, "" when
// not known.
func (l *link) PublicURL() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.publicURL
}

func (l *link) setPublicURL(u string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publicURL = u
}

// Reached reports whether the last heartbeat got through.
func (l *link) Reached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reached
}

// Interval is the heartbeat interval in use.
func (l *link) Interval() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.interval
}

// beat records a heartbeat's outcome; it returns whether the one before
// got through, and the interval.
func (l *link) beat(reached bool) (wasReached bool, interval time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	wasReached, l.reached = l.reached, reached
	return wasReached, l.interval
}

func (l *link) setInterval(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.interval = d
}
