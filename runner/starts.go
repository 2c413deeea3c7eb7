package runner

import (
	"context"
	"sync"
)

// Starts bounds how many attempts start at once (agent run --max-starts),
// apart from how many tasks run (--max-concurrent): starting an AI CLI
// (its process, its login, its first request) is the costly part, and a
// burst of claims must not start them all together. An attempt holds a
// start from the moment it is prepared (its workspace, its executor's
// process) until its executor's first event, a question it asks, or its
// end, whichever comes first. The others wait in a queue, first come
// first served, their time limits not yet running. The zero value, and
// nil, bound nothing.
type Starts struct {
	mu      sync.Mutex
	max     int
	holding int
	queue   []chan struct{} // closed when its turn comes
}

// DefaultMaxStarts is how many attempts start at once by default.
const DefaultMaxStarts = 10

// NewStarts returns a start queue of n starts at once (at least 1).
func NewStarts(n int) *Starts { return &Starts{max: max(n, 1)} }

// SetMax changes how many attempts may start at once (a reloaded
// config): more room lets the queue's first go at once; less lets those
// starting finish their start.
func (s *Starts) SetMax(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max(n, 1)
	s.grant()
}

// StartFigures are a start queue's figures, as `agent health` shows
// them.
type StartFigures struct {
	// Starting is how many attempts hold a start, Queued how many wait
	// for one, and Max how many may start at once.
	Starting int `json:"starting"`
	Queued   int `json:"queued"`
	Max      int `json:"max"`
}

// Figures are the queue's figures now; zero for no bound.
func (s *Starts) Figures() StartFigures {
	if s == nil {
		return StartFigures{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return StartFigures{Starting: s.holding, Queued: len(s.queue), Max: s.max}
}

// wait takes a start, waiting in the queue for one when none is free
// (queued is called then, with the figures as it joined). It returns the
// function that gives the start back (safe to call again), or ctx's
// error when ctx ended first.
func (s *Starts) wait(ctx context.Context, queued func(StartFigures)) (release func(), err error) {
	if s == nil || s.max == 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	if s.holding < s.max && len(s.queue) == 0 {
		s.holding++
		s.mu.Unlock()
		return s.releaser(), nil
	}
	turn := make(chan struct{})
	s.queue = append(s.queue, turn)
	f := StartFigures{Starting: s.holding, Queued: len(s.queue), Max: s.max}
	s.mu.Unlock()
	if queued != nil {
		queued(f)
	}
	select {
	case <-turn:
		return s.releaser(), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.queue {
		if c == turn {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return nil, ctx.Err()
		}
	}
	// Its turn came as ctx ended: the start goes to the next.
	s.holding--
	s.grant()
	return nil, ctx.Err()
}

// releaser is the function that gives one start back, once.
func (s *Starts) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.holding--
			s.grant()
		})
	}
}

// grant gives the free starts to the first in the queue. mu is held.
func (s *Starts) grant() {
	for s.holding < s.max && len(s.queue) > 0 {
		s.holding++
		close(s.queue[0])
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
}
