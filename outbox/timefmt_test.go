package outbox

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// appendTime writes what time.AppendFormat writes, for any instant, in UTC
// (its fast path) and in other zones (handed to time).
func TestAppendTimeMatchesTimeFormat(t *testing.T) {
	t.Parallel()
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
	rapid.Check(t, func(t *rapid.T) {
		sec := rapid.Int64Range(-70_000_000_000, 300_000_000_000).Draw(t, "sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")
		zone := zones[rapid.IntRange(0, len(zones)-1).Draw(t, "zone")]
		tm := time.Unix(sec, nsec).In(zone)
		if got, want := string(appendTime([]byte("x"), tm)), "x"+tm.Format(TimeFormat); got != want {
			t.Fatalf("appendTime(%v) = %q, want %q", tm, got, want)
		}
	})
	for _, tm := range []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 1, time.UTC)} {
		if got, want := string(appendTime(nil, tm)), tm.Format(TimeFormat); got != want {
			t.Errorf("appendTime(%v) = %q, want %q", tm, got, want)
		}
	}
}
