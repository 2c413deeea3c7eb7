package outbox

import (
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"
)

// There is one entry per pending record: its size is most of what a
// backlog costs in memory (the heap per pending record of the benchmark).
func TestEntryStaysSmall(t *testing.T) {
	t.Parallel()
	if n := unsafe.Sizeof(entry{}); n > 96 {
		t.Errorf("entry is %d bytes; keep it within 96, a size class of Go's allocator", n)
	}
}

// An entry keeps a record's time as seconds and nanoseconds: what it gives
// back must be the very time Append was given (in UTC), for any instant a
// time.Time holds, the zero time among them.
func TestEntryKeepsCreatedAt(t *testing.T) {
	t.Parallel()
	check := func(t interface{ Fatalf(string, ...any) }, tm time.Time) {
		var e entry
		e.setCreatedAt(tm)
		if got, want := e.createdAt(), tm.UTC(); got != want {
			t.Fatalf("createdAt of %v: %v (%#v), want %v", tm, got, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		sec := rapid.Int64Range(-70_000_000_000, 300_000_000_000).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
		check(t, time.Unix(sec, nsec).In(time.FixedZone("x", 5*3600+1800)))
	})
	for _, tm := range []time.Time{{}, time.Now(), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 1, time.UTC)} {
		check(t, tm)
	}
}
