package agent

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// sink takes a task's reports from the runner and keeps them: each is
// made to fit a record and appended to the outbox (durably, before
// anything is sent), and the task's file is saved on every report but a
// log line. That is its one job, on the durability path; what the agent
// shows and counts of a task (the task's log, the metrics, the running
// set, the tmux view) observes what it kept (reportObservers).
type sink struct {
	a      *Agent
	taskID string
}

// Report implements runner.Sink.
func (s *sink) Report(r runner.Report) {
	a := s.a
	s.keep(r)
	for _, o := range a.observers {
		o(s.taskID, r)
	}
	kick(a.kickSend)
}

// keep appends r to the outbox (with the output caps' notes before it)
// and saves the task's file.
func (s *sink) keep(r runner.Report) {
	a := s.a
	a.held.flush(a.outbox, a.store) // what is held goes first, if writes work again
	if payload, ok := s.admit(r); ok {
		_, isLog := r.Payload.(state.LogEvent)
		for _, n := range a.output.notes(s.taskID, r.Attempt, !isLog) {
			s.append(runner.Report{Attempt: n.attempt, At: r.At, Task: r.Task}, n.payload)
		}
		s.append(r, payload)
	}
	switch p := r.Payload.(type) {
	case state.Attempt:
		if p.Status != state.AttemptRunning {
			a.output.attemptEnded(s.taskID, p.Number)
		}
	case state.CompleteEvent:
		a.output.taskEnded(s.taskID)
	}
	if _, isLog := r.Payload.(state.LogEvent); isLog {
		return
	}
	// Progress too, as it happens: tasks watch and tasks logs -f read it
	// from the task's file.
	if err := a.held.save(a.store, r.Task); err != nil {
		a.log.Error("task state not saved; held in memory and saved again when writes work", "task", s.taskID, "err", err)
	}
}

// A reportObserver hears of each report of task taskID after the sink
// kept it. It runs on the task's runner goroutine: it must not block.
type reportObserver func(taskID string, r runner.Report)

// reportObservers are those of the agent's parts that observe the
// reports (Agent.observers, set as Run starts): the task's local log,
// the metrics, the running set and the tmux view (when on).
func (a *Agent) reportObservers() []reportObserver {
	obs := []reportObserver{a.logReport, a.countReport, a.running.observe}
	if a.view != nil {
		obs = append(obs, a.openView)
	}
	return obs
}

// logReport writes a log report's lines to the task's local log.
func (a *Agent) logReport(taskID string, r runner.Report) {
	p, ok := r.Payload.(state.LogEvent)
	if !ok || r.Restored {
		// r.Restored: sent again from an attempt's commit; the task's log
		// had it, or lost it to the crash; written twice it would show
		// twice.
		return
	}
	if err := a.logs.append(a.layout, taskID, max(r.Attempt, 1), r.At, p.Stream, p.Lines); err != nil {
		a.log.Warn("local task log", "task", taskID, "err", err)
	}
}

// countReport counts an attempt report for the metrics (they count the
// attempts that end) and its tokens.
func (a *Agent) countReport(_ string, r runner.Report) {
	if at, ok := r.Payload.(state.Attempt); ok {
		a.obs.Attempt(at)
		a.obs.Tokens(a.live.Load().Executor.Name(), at)
	}
}

// openView gives an attempt that begins a window in the tmux view.
func (a *Agent) openView(taskID string, r runner.Report) {
	if at, ok := r.Payload.(state.Attempt); ok && at.Status == state.AttemptRunning {
		a.view.Open(taskID, r.Task.Title, at.Number)
	}
}

// admit is what of r's payload goes into the outbox; false for nothing:
// a log or progress record past its attempt's cap, or while the disk is
// under its floor (see outputBounds). It is r's payload, the
// lines of a log that the cap leaves, or those with what the cap withheld
// (an api.LogPayload).
func (s *sink) admit(r runner.Report) (payload any, ok bool) {
	switch p := r.Payload.(type) {
	case state.LogEvent:
		out, withheld, ok := s.a.output.admitLog(s.taskID, max(r.Attempt, 1), p)
		if !ok || withheld == nil {
			return out, ok
		}
		return api.LogPayload{LogEvent: fitLog(out, s.a.recordLimit()), Withheld: withheld}, true
	case state.ProgressEvent:
		size, _ := json.Marshal(p)
		return p, s.a.output.admitProgress(s.taskID, max(r.Attempt, 1), int64(len(size)))
	}
	return r.Payload, true
}

// append writes payload, of r's task and attempt, to the outbox, or holds
// it while writes fail. A payload of the runner's is made to fit a record
// (fit); an api.LogPayload of the agent's own is a log record.
func (s *sink) append(r runner.Report, payload any) {
	a := s.a
	rec := outbox.Record{Kind: outbox.KindLog, TaskID: s.taskID, Attempt: r.Attempt, CreatedAt: r.At}
	var err error
	if p, ok := payload.(state.Payload); ok {
		r.Payload = p
		rec.Kind, rec.Key = outbox.Kind(r.Kind()), recordKey(s.taskID, r)
		rec.Payload, err = a.fit(s.taskID, r, a.recordLimit())
	} else {
		rec.Payload, err = json.Marshal(payload) // a log record: the outbox keys it
	}
	if err != nil {
		a.log.Error("report not kept", "task", s.taskID, "kind", rec.Kind, "err", err)
		return
	}
	if err := a.held.append(a.outbox, rec); err != nil {
		if errors.Is(err, outbox.ErrFull) {
			a.log.Warn("outbox full: log record dropped", "task", s.taskID)
		} else {
			a.log.Error("log report dropped while writes fail", "task", s.taskID, "err", err)
		}
	}
}

// recordLimit is the largest payload a record may carry.
func (a *Agent) recordLimit() int {
	limit := a.cfg.Outbox.MaxRecordBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	return limit - recordRoom
}

// recordKey is the idempotency key of a report: the runner's, when it
// keys it (an attempt that outlives the agent may send it again);
// taskID:kind:phase:createdAt for phase and completion reports, so that
// the same change made twice (after a restart) is one event at the
// control plane; empty (the outbox makes a unique one) for the others.
func recordKey(taskID string, r runner.Report) string {
	if r.Key != "" {
		return r.Key
	}
	var phase state.Phase
	switch p := r.Payload.(type) {
	case state.PhaseEvent:
		phase = p.Phase
	case state.CompleteEvent:
		phase = p.Status
	default:
		return ""
	}
	return fmt.Sprintf("%s:%s:%s:%s", taskID, r.Kind(), phase, r.At.UTC().Format(outbox.TimeFormat))
}
