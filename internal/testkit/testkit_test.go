package testkit

import (
	"sync/atomic"
	"testing"
	"time"
)

// WaitFor checks until the condition holds, and no longer: the count of
// checks is the one at which it first held.
func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var checks atomic.Int32
	WaitFor(t, "the fifth check", func() bool { return checks.Add(1) == 5 })
	if n := checks.Load(); n != 5 {
		t.Fatalf("checked %d times, want 5", n)
	}
}

// A condition that never holds is reported as false once the limit has
// passed, not earlier.
func TestUntilGivesUpAfterItsLimit(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var checks atomic.Int32
	if Until(30*time.Millisecond, func() bool { checks.Add(1); return false }) {
		t.Fatal("a condition that never holds held")
	}
	if waited := time.Since(start); waited < 30*time.Millisecond {
		t.Fatalf("gave up after %s, before the limit", waited)
	}
	if checks.Load() < 2 {
		t.Fatalf("checked %d times: it does not poll", checks.Load())
	}
}
