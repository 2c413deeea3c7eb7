// Package health grades an executor from what its runs show: available,
// degraded or unavailable. The agent claims no work while its executor is
// unavailable, and every heartbeat carries the grade, the reason, since
// when, and the recent problems.
//
// Rules:
//
//   - An executor that cannot be started (missing binary, not executable)
//     is unavailable at once. While unavailable a probe is due every
//     ProbeInterval; a probe or a run that starts brings it to degraded.
//   - Stdio closed before a result, an attempt or first-event timeout, and
//     a protocol error make it degraded.
//   - RecoverAfter consecutive successes, or QuietPeriod without a problem,
//     bring a degraded executor back to available.
package health

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/agent/internal/utc"
)

// Grade is an executor's health.
type Grade string

// The grades.
const (
	Available   Grade = "available"
	Degraded    Grade = "degraded"
	Unavailable Grade = "unavailable"
)

// Signal is something a run or a probe showed about the executor.
type Signal string

// The signals.
const (
	StartFailure      Signal = "start_failure"
	StdioClosed       Signal = "stdio_closed"
	AttemptTimeout    Signal = "attempt_timeout"
	FirstEventTimeout Signal = "first_event_timeout"
	ProtocolError     Signal = "protocol_error"
	Success           Signal = "success"
	ProbeOK           Signal = "probe_ok"
)

// Options tune a Tracker. The zero value uses the defaults.
type Options struct {
	// RecoverAfter consecutive successes bring a degraded executor back.
	// Default 2.
	RecoverAfter int
	// QuietPeriod without a problem brings a degraded executor back.
	// Default 5 min.
	QuietPeriod time.Duration
	// ProbeInterval is how often an unavailable executor is probed.
	// Default 30 s.
	ProbeInterval time.Duration
	// RecentErrors is how many problems a snapshot keeps. Default 10.
	RecentErrors int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.RecoverAfter <= 0 {
		o.RecoverAfter = 2
	}
	if o.QuietPeriod <= 0 {
		o.QuietPeriod = 5 * time.Minute
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 30 * time.Second
	}
	if o.RecentErrors <= 0 {
		o.RecentErrors = 10
	}
	if o.Now == nil {
		o.Now = utc.Now
	}
	return o
}

// Problem is one bad signal, kept for the heartbeat.
type Problem struct {
	At     time.Time `json:"at"`
	Signal Signal    `json:"signal"`
	Detail string    `json:"detail,omitempty"`
}

// Snapshot is the executor's health at one moment: what a heartbeat and
// `agent health` show.
type Snapshot struct {
	Executor     string    `json:"executor"`
	Grade        Grade     `json:"grade"`
	Reason       string    `json:"reason,omitempty"`
	Since        time.Time `json:"since"`
	RecentErrors []Problem `json:"recent_errors"`
	// Isolation says how the executor's attempts are confined, in a line.
	Isolation string `json:"isolation,omitempty"`
}

// Tracker grades one executor. It is safe for concurrent use.
type Tracker struct {
	opts     Options
	executor string

	mu          sync.Mutex
	grade       Grade
	reason      string
	since       time.Time
	successes   int
	lastProblem time.Time
	lastProbe   time.Time
	recent      []Problem
	isolation   string
	unconfined  bool
}

// NewTracker returns a tracker that starts available.
func NewTracker(executor string, opts Options) *Tracker {
	opts = opts.withDefaults()
	return &Tracker{opts: opts, executor: executor, grade: Available, since: opts.Now()}
}

// Observe feeds one signal, with a detail for the record.
func (t *Tracker) Observe(s Signal, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.opts.Now()
	t.settle(now)
	switch s {
	case StartFailure:
		t.problem(now, s, detail)
		t.lastProbe = now
		t.set(now, Unavailable, "cannot start: "+detail)
	case StdioClosed, AttemptTimeout, FirstEventTimeout, ProtocolError:
		t.problem(now, s, detail)
		t.set(now, Degraded, fmt.Sprintf("%s: %s", s, detail))
	case ProbeOK:
		t.lastProbe = now
		if t.grade == Unavailable {
			t.set(now, Degraded, "probe: the executor starts again")
		}
	case Success:
		t.successes++
		switch {
		case t.grade == Unavailable:
			t.set(now, Degraded, "recovering: a run succeeded")
		case t.grade == Degraded && t.successes >= t.opts.RecoverAfter:
			t.set(now, Available, fmt.Sprintf("%d runs in a row succeeded", t.successes))
		}
	}
}

func (t *Tracker) problem(now time.Time, s Signal, detail string) {
	t.successes = 0
	t.lastProblem = now
	t.recent = append(t.recent, Problem{At: now, Signal: s, Detail: detail})
	if over := len(t.recent) - t.opts.RecentErrors; over > 0 {
		t.recent = append(t.recent[:0], t.recent[over:]...)
	}
}

func (t *Tracker) set(now time.Time, g Grade, reason string) {
	if g != t.grade {
		t.since = now
	}
	t.grade, t.reason = g, reason
}

// settle applies the quiet period: a degraded executor with no problem for
// QuietPeriod is available again, since the period ended.
func (t *Tracker) settle(now time.Time) {
	if t.grade == Degraded && now.Sub(t.lastProblem) >= t.opts.QuietPeriod {
		end := t.lastProblem.Add(t.opts.QuietPeriod)
		t.grade, t.reason, t.since = Available, fmt.Sprintf("no problem for %s", t.opts.QuietPeriod), end
	}
}

// SetIsolation records how attempts are confined, in a line, for every
// snapshot. Where they are not (confined false), the line is also part of
// the snapshot's reason, whatever the grade: an operator must not miss it.
func (t *Tracker) SetIsolation(line string, confined bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.isolation, t.unconfined = line, !confined
}

// Grade returns the current grade.
func (t *Tracker) Grade() Grade { return t.Snapshot().Grade }

// ProbeDue reports whether the executor is unavailable and has not been
// probed for ProbeInterval.
func (t *Tracker) ProbeDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.grade == Unavailable && t.opts.Now().Sub(t.lastProbe) >= t.opts.ProbeInterval
}

// Snapshot returns the health for a heartbeat.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settle(t.opts.Now())
	reason := t.reason
	if t.unconfined {
		reason = strings.TrimPrefix(reason+"; attempts are not confined: "+t.isolation, "; ")
	}
	return Snapshot{Executor: t.executor, Grade: t.grade, Reason: reason, Since: t.since,
		RecentErrors: append([]Problem{}, t.recent...), Isolation: t.isolation}
}
