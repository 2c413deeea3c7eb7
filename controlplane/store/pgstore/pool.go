package pgstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
)

// The pool's connections serve two kinds of work. Heartbeats (Beat, and
// calls marked store.WithPriority) take one as they come; all other work
// takes one only within the pool's configured size, waiting for a turn
// (ordinary) before it asks the pool, which holds the heartbeats'
// reserve on top. So when requests queue for connections, heartbeats do
// not queue behind them: agents still report, and their leases are
// renewed, while event batches and submits wait.
//
// reserveOf is that reserve: a quarter of the configured size (4 on top
// of 16), none when it is under 2.
func reserveOf(maxConns int32) int32 {
	if maxConns < 2 {
		return 0
	}
	return max(1, maxConns/4)
}

// poolGate is the turns of ordinary work, and what the store counts of
// waits for connections, for metrics (Pool).
type poolGate struct {
	ordinary chan struct{}
	reserve  int32
	waiting  [2]atomic.Int64 // calls waiting for a connection now: [0] ordinary, [1] heartbeats
	waits    [2]atomic.Uint64
	waitNS   [2]atomic.Int64
}

// newPoolGate makes the gate of a pool of maxConns for other work; the
// pool is to hold its reserve on top.
func newPoolGate(maxConns int32) *poolGate {
	return &poolGate{ordinary: make(chan struct{}, maxConns), reserve: reserveOf(maxConns)}
}

// acquire takes a connection of the pool: a heartbeat's at once, other
// work's within its share. release gives it back.
func (s *Store) acquire(ctx context.Context) (c *pgxpool.Conn, release func(), err error) {
	g := s.gate
	kind := 0
	if store.Priority(ctx) {
		kind = 1
	}
	start := time.Now()
	g.waiting[kind].Add(1)
	defer func() {
		g.waiting[kind].Add(-1)
		g.waits[kind].Add(1)
		g.waitNS[kind].Add(int64(time.Since(start)))
	}()
	if kind == 0 {
		select {
		case g.ordinary <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	c, err = s.pool.Acquire(ctx)
	if err != nil {
		if kind == 0 {
			<-g.ordinary
		}
		return nil, nil, err
	}
	return c, func() {
		c.Release()
		if kind == 0 {
			<-g.ordinary
		}
	}, nil
}

var _ store.PoolReporter = (*Store)(nil)

// Pool reports the pool's connections and the waits for them
// (store.PoolReporter).
func (s *Store) Pool() store.PoolFigures {
	st := s.pool.Stat()
	g := s.gate
	f := store.PoolFigures{Max: int(st.MaxConns()), InUse: int(st.AcquiredConns()), Reserved: int(g.reserve)}
	for i, kind := range []string{"other", "heartbeat"} {
		f.Waiting = append(f.Waiting, store.PoolWait{Kind: kind, Now: int(g.waiting[i].Load()),
			Count: g.waits[i].Load(), Seconds: time.Duration(g.waitNS[i].Load()).Seconds()})
	}
	return f
}
