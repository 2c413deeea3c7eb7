package runner

import (
	"context"
	"runtime"
	"testing"
)

// The start queue lets max attempts start at once, the others in the
// order they came as starts are given back; one that gives up waiting
// leaves the queue, and a turn that came as it gave up goes to the next.
func TestStartsQueueFirstComeFirstServed(t *testing.T) {
	s := NewStarts(1)
	first, err := s.wait(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		n       int
		release func()
	}
	turns := make(chan got, 3)
	queued := make(chan StartFigures, 3)
	gone, leave := context.WithCancel(context.Background())
	for i := range 3 {
		ctx := context.Background()
		if i == 1 {
			ctx = gone
		}
		go func() {
			release, err := s.wait(ctx, func(f StartFigures) { queued <- f })
			if err == nil {
				turns <- got{i, release}
			}
		}()
		if f := <-queued; f.Queued != i+1 || f.Starting != 1 || f.Max != 1 {
			t.Fatalf("waiter %d joined the queue as %+v", i, f)
		}
	}
	leave() // the second gives up
	for s.Figures().Queued != 2 {
		runtime.Gosched() // until it has left the queue
	}
	first()
	first() // once only
	g := <-turns
	if g.n != 0 {
		t.Fatalf("waiter %d started first, want 0", g.n)
	}
	if f := s.Figures(); f.Starting != 1 || f.Queued > 1 {
		t.Fatalf("figures after one start given back twice: %+v", f)
	}
	g.release()
	if g = <-turns; g.n != 2 {
		t.Fatalf("waiter %d started, want 2 (1 gave up)", g.n)
	}
	s.SetMax(3)
	if f := s.Figures(); f.Starting != 1 || f.Queued != 0 || f.Max != 3 {
		t.Fatalf("figures %+v", f)
	}
	g.release()
	if f := s.Figures(); f.Starting != 0 {
		t.Fatalf("figures at the end %+v", f)
	}
}
