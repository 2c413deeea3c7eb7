package agent

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
)

// Batch limits of one delivery.
const (
	sendBatchRecords = api.MaxEventsPerBatch
	sendBatchBytes   = api.MaxBatchBytes - 64<<10 // room for the envelope
	// loopTick wakes idle loops, so the service watchdog sees them alive.
	loopTick = 5 * time.Second
)

// sendLoop delivers pending records whenever something is appended, on
// every heartbeat that gets through (a replay, which also ends a backoff),
// and on its own backoff after a failure. It retries forever: the records
// are on disk, and the wait grows from 500 ms to backoffMax, with jitter,
// while the control plane is unreachable; a control plane that shed a
// delivery (503 with Retry-After) is not asked again before the wait it
// said, with jitter. It fails only when the control
// plane refuses the agent.
type sendLoop struct {
	sender     *sender
	backoffMax time.Duration // Config.SendBackoffMax
	log        *slog.Logger
	kick       <-chan struct{} // something was appended
	replay     <-chan struct{} // a heartbeat got through
	alive      atomic.Int64    // when it last went round, for the watchdog
}

func (l *sendLoop) Run(ctx context.Context) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.RandomizationFactor = 500*time.Millisecond, l.backoffMax, 0.5
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	waiting := false // a retry is scheduled: kicks wait for it
	for {
		l.alive.Store(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			retry.Stop()
			return nil
		case <-tick.C:
			continue
		case <-l.kick:
			if waiting {
				continue
			}
		case <-l.replay:
			// A heartbeat got through: the control plane is back, so the
			// backoff is over and pending records go now.
			retry.Stop()
			waiting = false
			b.Reset()
		case <-retry.C:
			waiting = false
		}
		if err := l.sender.drain(ctx, nil); err != nil {
			if controlplane.Refused(err) {
				return err
			}
			if ctx.Err() != nil {
				return nil // stopping: not a failure worth a warning
			}
			d := b.NextBackOff()
			if shed, ok := controlplane.Shed(err); ok {
				d = max(d, shed) // the control plane is busy: it said when
			}
			l.log.Warn("delivery failed; records stay pending", "err", err, "retry_in", d.Round(time.Millisecond))
			retry.Reset(d)
			waiting = true
		} else {
			b.Reset() // nothing left pending
		}
	}
}
