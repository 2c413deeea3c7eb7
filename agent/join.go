package agent

import (
	"context"
	"sync"
)

// A loop is one of the daemon's loops (heartbeat, claim, send, watchdog,
// retention): a small type holding its own state. Run returns nil when ctx
// ends, or an error the agent cannot work around (the control plane
// refuses its token, another writer took the outbox): the agent then
// stops.
type loop interface {
	Run(ctx context.Context) error
}

// loops runs the daemon's loops together, as the Buildkite agent joins its
// workers. Unlike an errgroup, a loop's error does not stop the others:
// it is handed to the agent (failed), which drains its tasks before it
// stops them, and a draining agent still heartbeats and delivers.
type loops struct {
	wg    sync.WaitGroup
	first chan error
}

func newLoops() *loops { return &loops{first: make(chan error, 1)} }

// Go runs l until ctx ends or it fails.
func (g *loops) Go(ctx context.Context, l loop) {
	g.wg.Go(func() {
		if err := l.Run(ctx); err != nil {
			select {
			case g.first <- err:
			default: // the agent is stopping already
			}
		}
	})
}

// failed receives the first error a loop returned.
func (g *loops) failed() <-chan error { return g.first }

// Wait waits for every loop to return.
func (g *loops) Wait() { g.wg.Wait() }

// kick wakes a loop waiting on ch, unless a wake-up is already pending.
func kick(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
