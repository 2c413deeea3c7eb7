package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
)

// loopFunc is a loop made of a function, for tests.
type loopFunc func(context.Context) error

func (f loopFunc) Run(ctx context.Context) error { return f(ctx) }

// A loop's error reaches the agent, and the other loops keep running until
// the agent stops them: a stopping agent still heartbeats and delivers.
func TestLoopsHandTheFirstErrorOnAndKeepTheOthers(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	refused := errors.New("refused")
	var othersStopped atomic.Int32
	g := newLoops()
	g.Go(ctx, loopFunc(func(context.Context) error { return refused }))
	g.Go(ctx, loopFunc(func(context.Context) error { return errors.New("later") }))
	for range 2 {
		g.Go(ctx, loopFunc(func(ctx context.Context) error { <-ctx.Done(); othersStopped.Add(1); return nil }))
	}
	if err := <-g.failed(); !errors.Is(err, refused) && err.Error() != "later" {
		t.Fatalf("failed: %v", err)
	}
	// Not a wait: a moment in which a wrong group would stop the others
	// (nothing happens that a condition could name).
	time.Sleep(10 * time.Millisecond)
	if n := othersStopped.Load(); n != 0 {
		t.Fatalf("%d loops stopped on another's error", n)
	}
	stop()
	g.Wait()
	if n := othersStopped.Load(); n != 2 {
		t.Fatalf("%d of 2 loops stopped with their context", n)
	}
}

// The watchdog pings while every loop it watches goes round, and stops
// when one does not, so that the service manager restarts the agent.
func TestWatchdogPingsOnlyWhileTheLoopsAreAlive(t *testing.T) {
	t.Parallel()
	var fresh, stale atomic.Int64
	fresh.Store(time.Now().Add(time.Hour).UnixNano())
	var alivePings, stuckPings atomic.Int32
	var other atomic.Value // a notification other than WATCHDOG=1
	counting := func(n *atomic.Int32) func(string) {
		return func(s string) {
			if s != "WATCHDOG=1" {
				other.Store(s)
			}
			n.Add(1)
		}
	}
	// Both watch at once, at the same interval, the stuck one started
	// first: the pings of the one whose loops are all alive say that the
	// other has had as many rounds to ping in.
	ctx, stop := context.WithCancel(context.Background())
	stuck := &watchdog{interval: 20 * time.Millisecond, notify: counting(&stuckPings), link: &link{}, alive: []*atomic.Int64{&fresh, &stale}}
	alive := &watchdog{interval: 20 * time.Millisecond, notify: counting(&alivePings), link: &link{}, alive: []*atomic.Int64{&fresh, &fresh}}
	done := make(chan error, 2)
	go func() { done <- stuck.Run(ctx) }()
	go func() { done <- alive.Run(ctx) }()
	testkit.WaitFor(t, "five pings of the watchdog whose loops are alive", func() bool { return alivePings.Load() >= 5 })
	stop()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := stuckPings.Load(); n != 0 {
		t.Errorf("%d pings with a loop stuck, want none", n)
	}
	if s := other.Load(); s != nil {
		t.Errorf("notified %q", s)
	}
}
