// Package testkit is what the module's tests share: waiting until a
// condition holds, in place of sleeping for a while and hoping.
package testkit

import (
	"testing"
	"time"
)

// HangAfter is how long WaitFor waits before it calls a wait a hang. It
// is not a measure of speed: no test's behaviour depends on it, and a
// loaded machine (another suite beside this one, the race detector) stays
// far inside it. It turns a condition that never holds into a clear
// failure naming what was awaited, well before go test's own limit kills
// the whole package with a goroutine dump.
const HangAfter = 3 * time.Minute

// maxPoll bounds the pause between two checks: short, so that a test
// goes on a few milliseconds after its condition holds, yet long enough
// that a check costing an HTTP round trip does not take a core.
const maxPoll = 10 * time.Millisecond

// WaitFor returns once cond holds, checking it at once and then every few
// milliseconds. What names the condition in the failure when cond has not
// held after HangAfter. It calls t.Fatalf, so it runs on the test's
// goroutine; Until is the same wait for other goroutines.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Until(HangAfter, cond) {
		t.Fatalf("waited %s for %s: it never held", HangAfter, what)
	}
}

// Until reports whether cond held within limit, checking it at once and
// then every few milliseconds (from 1 ms, doubling up to 10 ms).
func Until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
	return true
}
