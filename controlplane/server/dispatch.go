package server

import (
	"sync"
)

// dispatch is the claims' long poll (claim.go): the line of claims
// waiting for work, first come first served, and the claims held open for
// their agents' orders (orders.go). What a claim may take it asks of the
// rules (claimNow); its own lock guards only the waiters and their
// counters.
type dispatch struct {
	opts  *Options
	rules *rules

	mu sync.Mutex
	// line is the claims waiting for work, first come first served.
	// waiting counts those claims, waitEnds how their waits ended,
	// waitRounds the selections they ran again when woken.
	line       []*waiter
	ordering   map[string][]*waiter // the claims held open for orders, by agent (orders.go)
	waiting    int
	waitEnds   map[ClaimWaitEnd]uint64
	waitRounds uint64
	// stopWaits, closed, ends every wait (StopWaits).
	stopWaits chan struct{}
	stopOnce  sync.Once
}
