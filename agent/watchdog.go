package agent

import (
	"context"
	"sync/atomic"
	"time"
)

// watchdog pings the service manager's watchdog at half its interval, but
// only while the agent's own loops are alive: a loop that has not gone
// round within the interval stops the pings, and the service manager
// restarts the agent.
type watchdog struct {
	interval time.Duration // Config.WatchdogInterval
	notify   func(string)
	link     *link           // the heartbeat interval in use
	alive    []*atomic.Int64 // the watched loops' last rounds
}

func (w *watchdog) Run(ctx context.Context) error {
	tick := time.NewTicker(w.interval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		limit := int64(max(w.interval, w.link.Interval()+loopTick))
		ok := true
		for _, t := range w.alive {
			ok = ok && now-t.Load() < limit
		}
		if ok {
			w.notify("WATCHDOG=1")
		}
	}
}
