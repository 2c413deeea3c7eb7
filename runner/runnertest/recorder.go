package runnertest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Recorder is a runner.Sink that keeps every report. It is safe for
// concurrent use.
type Recorder struct {
	// KeepLogs keeps log reports too; otherwise their lines are only
	// counted (LogLines).
	KeepLogs bool
	// OnReport, if set, is called with each report after it is recorded.
	OnReport func(runner.Report)

	mu       sync.Mutex
	reports  []runner.Report
	logLines int
}

// Report implements runner.Sink.
func (rec *Recorder) Report(r runner.Report) {
	rec.mu.Lock()
	l, isLog := r.Payload.(state.LogEvent)
	if isLog {
		rec.logLines += len(l.Lines)
	}
	if !isLog || rec.KeepLogs {
		r.Task = nil // only valid during the call
		rec.reports = append(rec.reports, r)
	}
	f := rec.OnReport
	rec.mu.Unlock()
	if f != nil {
		f(r)
	}
}

// LogLines is how many log lines were reported, kept or not.
func (rec *Recorder) LogLines() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.logLines
}

// Kinds lists the recorded reports in order by kind, with the phase, the
// attempt's number and status, or the completion's status after a colon:
// "phase:turn_started", "attempt:1:running", "complete:completed", "log".
func (rec *Recorder) Kinds() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.reports {
		s := string(r.Kind())
		switch p := r.Payload.(type) {
		case state.PhaseEvent:
			s += ":" + string(p.Phase)
		case state.Attempt:
			s += fmt.Sprintf(":%d:%s", p.Number, p.Status)
		case state.CompleteEvent:
			s += ":" + string(p.Status)
		}
		out = append(out, s)
	}
	return out
}

// Phases lists the recorded phase events, in order.
func (rec *Recorder) Phases() []state.PhaseEvent {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []state.PhaseEvent
	for _, r := range rec.reports {
		if p, ok := r.Payload.(state.PhaseEvent); ok {
			out = append(out, p)
		}
	}
	return out
}

// Payloads lists the recorded reports' payloads, in order.
func (rec *Recorder) Payloads() []state.Payload {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]state.Payload, len(rec.reports))
	for i, r := range rec.reports {
		out[i] = r.Payload
	}
	return out
}

// Logs lists the recorded log lines as "stream: line".
func (rec *Recorder) Logs() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.reports {
		if l, ok := r.Payload.(state.LogEvent); ok {
			for _, line := range l.Lines {
				out = append(out, string(l.Stream)+": "+line)
			}
		}
	}
	return out
}

// ContainsSub reports whether a string of list contains sub.
func ContainsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
