package health

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestTransitions walks every transition of the grade: from each starting
// grade, each signal.
func TestTransitions(t *testing.T) {
	// Signals that bring a tracker to each starting grade.
	reach := map[Grade][]Signal{
		Available:   nil,
		Degraded:    {StdioClosed},
		Unavailable: {StartFailure},
	}
	cases := []struct {
		from   Grade
		signal Signal
		want   Grade
	}{
		{Available, StartFailure, Unavailable},
		{Available, StdioClosed, Degraded},
		{Available, AttemptTimeout, Degraded},
		{Available, FirstEventTimeout, Degraded},
		{Available, ProtocolError, Degraded},
		{Available, Success, Available},
		{Available, ProbeOK, Available},
		{Degraded, StartFailure, Unavailable},
		{Degraded, StdioClosed, Degraded},
		{Degraded, AttemptTimeout, Degraded},
		{Degraded, FirstEventTimeout, Degraded},
		{Degraded, ProtocolError, Degraded},
		{Degraded, Success, Degraded}, // one success is not enough
		{Degraded, ProbeOK, Degraded},
		{Unavailable, StartFailure, Unavailable},
		{Unavailable, StdioClosed, Degraded}, // it started, so it is not unavailable
		{Unavailable, AttemptTimeout, Degraded},
		{Unavailable, FirstEventTimeout, Degraded},
		{Unavailable, ProtocolError, Degraded},
		{Unavailable, Success, Degraded},
		{Unavailable, ProbeOK, Degraded},
	}
	for _, c := range cases {
		clk := &clock{t0}
		tr := NewTracker("exec", Options{Now: clk.Now})
		for _, s := range reach[c.from] {
			tr.Observe(s, "setup")
		}
		clk.advance(time.Second)
		tr.Observe(c.signal, "detail")
		snap := tr.Snapshot()
		if snap.Grade != c.want {
			t.Errorf("%s + %s: %s, want %s", c.from, c.signal, snap.Grade, c.want)
		}
		if c.want != c.from && !snap.Since.Equal(clk.now) {
			t.Errorf("%s + %s: since %v, want the moment of the change", c.from, c.signal, snap.Since)
		}
		if c.want == c.from && !snap.Since.Equal(t0) {
			t.Errorf("%s + %s: since moved without a change", c.from, c.signal)
		}
	}
}

func TestConsecutiveSuccessesRecover(t *testing.T) {
	clk := &clock{t0}
	tr := NewTracker("exec", Options{Now: clk.Now, RecoverAfter: 3})
	tr.Observe(AttemptTimeout, "30m")
	tr.Observe(Success, "")
	tr.Observe(Success, "")
	tr.Observe(ProtocolError, "bad frame") // the run of successes is broken
	tr.Observe(Success, "")
	tr.Observe(Success, "")
	if g := tr.Grade(); g != Degraded {
		t.Fatalf("after a broken run of successes: %s", g)
	}
	tr.Observe(Success, "")
	if s := tr.Snapshot(); s.Grade != Available || s.Reason != "3 runs in a row succeeded" {
		t.Errorf("after 3 successes: %+v", s)
	}
}

func TestQuietPeriodRecovers(t *testing.T) {
	clk := &clock{t0}
	tr := NewTracker("exec", Options{Now: clk.Now, QuietPeriod: 5 * time.Minute})
	tr.Observe(StdioClosed, "EOF")
	clk.advance(4 * time.Minute)
	if g := tr.Grade(); g != Degraded {
		t.Fatalf("before the quiet period: %s", g)
	}
	clk.advance(2 * time.Minute)
	s := tr.Snapshot()
	if s.Grade != Available || !s.Since.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("after the quiet period: %+v", s)
	}
	// Unavailable does not recover by waiting: it needs a probe.
	tr.Observe(StartFailure, "exec: \"codex\": executable file not found in $PATH")
	clk.advance(time.Hour)
	if g := tr.Grade(); g != Unavailable {
		t.Errorf("unavailable recovered by waiting: %s", g)
	}
}

func TestProbeIsDueWhileUnavailable(t *testing.T) {
	clk := &clock{t0}
	tr := NewTracker("exec", Options{Now: clk.Now, ProbeInterval: 30 * time.Second})
	if tr.ProbeDue() {
		t.Error("probe due while available")
	}
	tr.Observe(StartFailure, "permission denied")
	if tr.ProbeDue() {
		t.Error("probe due right after the failure")
	}
	clk.advance(31 * time.Second)
	if !tr.ProbeDue() {
		t.Fatal("no probe due after the interval")
	}
	tr.Observe(StartFailure, "permission denied") // the probe failed
	if tr.ProbeDue() {
		t.Error("probe due right after a failed probe")
	}
	clk.advance(31 * time.Second)
	tr.Observe(ProbeOK, "")
	if tr.ProbeDue() || tr.Grade() != Degraded {
		t.Errorf("after a good probe: due %v, grade %s", tr.ProbeDue(), tr.Grade())
	}
}

func TestSnapshotKeepsRecentErrors(t *testing.T) {
	clk := &clock{t0}
	tr := NewTracker("codex", Options{Now: clk.Now, RecentErrors: 3})
	for i := range 5 {
		clk.advance(time.Second)
		tr.Observe(ProtocolError, fmt.Sprint("frame ", i))
	}
	s := tr.Snapshot()
	if s.Executor != "codex" || len(s.RecentErrors) != 3 || s.RecentErrors[0].Detail != "frame 2" || s.RecentErrors[2].Detail != "frame 4" {
		t.Errorf("recent errors: %+v", s.RecentErrors)
	}
	if s.Reason != "protocol_error: frame 4" {
		t.Errorf("reason %q", s.Reason)
	}
	s.RecentErrors[0].Detail = "changed"
	if tr.Snapshot().RecentErrors[0].Detail != "frame 2" {
		t.Error("a snapshot shares memory with the tracker")
	}
}

// How attempts are confined travels in every snapshot; where they are not,
// the reason says so beside the grade's own, and never alone goes missing.
func TestUnconfinedAttemptsAreInTheReason(t *testing.T) {
	tr := NewTracker("exec", Options{})
	tr.SetIsolation("landlock (ABI 7)", true)
	if s := tr.Snapshot(); s.Isolation != "landlock (ABI 7)" || s.Reason != "" {
		t.Errorf("confined: snapshot %+v, want the isolation line and no reason", s)
	}
	tr.SetIsolation("none: the kernel has no Landlock", false)
	if s := tr.Snapshot(); s.Reason != "attempts are not confined: none: the kernel has no Landlock" {
		t.Errorf("unconfined, available: reason %q", s.Reason)
	}
	tr.Observe(StdioClosed, "eof")
	if s := tr.Snapshot(); s.Grade != Degraded || !strings.HasPrefix(s.Reason, "stdio_closed: eof; attempts are not confined: ") {
		t.Errorf("unconfined, degraded: %s %q", s.Grade, s.Reason)
	}
}
