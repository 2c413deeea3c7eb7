package agent

import "testing"

// A replay's line tells what was new to the control plane from what it
// had, and what is left.
func TestReplayResultLine(t *testing.T) {
	r := ReplayResult{Sent: 5, Accepted: 3, Duplicate: 2, Dead: 1, Pending: 4}
	if got, want := r.Line(), "5 delivered (3 new to the control plane, 2 it had already), 1 dead, 4 still pending"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
}
