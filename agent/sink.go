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

// sink takes a task's reports from the runner: each is appended to the
// outbox (durably, before anything is sent), task state is saved on phase,
// progress, attempt and completion reports, and log lines also go to the local log.
type sink struct {
	a      *Agent
	taskID string
}

// Report implements runner.Sink.
func (s *sink) Report(r runner.Report) {
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
	switch p := r.Payload.(type) {
	case state.LogEvent:
		if r.Restored {
			// Sent again from an attempt's commit: the task's log had
			// it, or lost it to the crash; written twice it would show
			// twice.
			break
		}
		if err := a.logs.append(a.layout, s.taskID, max(r.Attempt, 1), r.At, p.Stream, p.Lines); err != nil {
			a.log.Warn("local task log", "task", s.taskID, "err", err)
		}
	default:
		if at, ok := p.(state.Attempt); ok {
			a.obs.Attempt(at) // the metrics count the attempts that end
			a.obs.Tokens(a.live.Load().Executor.Name(), at)
		}
		// Progress too, as it happens: tasks watch and tasks logs -f read
		// it from the task's file.
		if err := a.held.save(a.store, r.Task); err != nil {
			a.log.Error("task state not saved; held in memory and saved again when writes work", "task", s.taskID, "err", err)
		}
	}
	a.running.update(s.taskID, r.Task.Phase, r.Attempt, r.Task.LastProgressAt)
	// An attempt that begins gets a window in the tmux view, if it is on.
	if at, ok := r.Payload.(state.Attempt); ok && at.Status == state.AttemptRunning {
		a.view.Open(s.taskID, r.Task.Title, at.Number)
	}
	kick(a.kickSend)
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
