package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// loopFunc is a loop made of a function, for tests.
type loopFunc func(context.Context) error

func (f loopFunc) Run(ctx context.Context) error { return f(ctx) }

// A loop's error reaches the agent, and the other loops keep running until
// the agent stops them: a stopping agent still heartbeats and delivers.
func TestLoopsHandTheFirstErrorOnAndKeepTheOthers(t *testing.T) {
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
	var fresh, stale atomic.Int64
	fresh.Store(time.Now().Add(time.Hour).UnixNano())
	pings := make(chan string, 100)
	for _, c := range []struct {
		name  string
		alive []*atomic.Int64
		want  bool
	}{
		{"all alive", []*atomic.Int64{&fresh, &fresh}, true},
		{"one stuck", []*atomic.Int64{&fresh, &stale}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			w := &watchdog{interval: 20 * time.Millisecond, notify: func(s string) { pings <- s }, link: &link{}, alive: c.alive}
			done := make(chan error)
			go func() { done <- w.Run(ctx) }()
			time.Sleep(100 * time.Millisecond)
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := len(pings)
			for range got {
				if s := <-pings; s != "WATCHDOG=1" {
					t.Errorf("notified %q", s)
				}
			}
			if (got > 0) != c.want {
				t.Errorf("%d pings, want pings: %v", got, c.want)
			}
		})
	}
}
