package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// acceptEvents applies a batch in order. Each event is accepted, a
// duplicate (its key was accepted before: nothing changes), or rejected
// with a reason the agent records as the record's dead reason. Changed
// tasks are saved and accepted events appended, synced, before the answer.
// A log event past its attempt's cap is accepted and counted, its lines
// not stored (see admitLog).
func (s *Server) acceptEvents(req api.EventsRequest) (api.EventsResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.EventsResponse{}, err
	}
	if len(req.Events) > api.MaxEventsPerBatch {
		return api.EventsResponse{}, badRequest("%d events in one batch; the limit is %d", len(req.Events), api.MaxEventsPerBatch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	batch := crashBatch{n: s.batches}
	now := s.opts.Now()
	s.watchdog(now)
	resp := api.EventsResponse{Results: make([]api.EventResult, len(req.Events))}
	lines := map[string][]byte{}       // each touched task's events to store, encoded
	stored := map[string]int{}         // and how many they are
	keys := map[string][]string{}      // each touched task's keys accepted in this batch
	before := map[string]*state.Task{} // each touched task as it was, to undo a batch that cannot be stored
	var order []string                 // tasks in the order they were first touched
	for i, ev := range req.Events {
		res := api.EventResult{Key: ev.Key, Status: api.StatusAccepted}
		t := s.tasks[ev.TaskID]
		var set map[string]struct{}
		if t != nil && ev.Key != "" && len(ev.Key) <= api.MaxKeyBytes {
			var err error
			if set, err = s.keySet(t, req.AgentID); err != nil {
				s.undo(slices.Collect(maps.Keys(before)), keys, before)
				return api.EventsResponse{}, fmt.Errorf("read the keys of task %s: %w", t.ID, err)
			}
		}
		_, dup := set[ev.Key]
		switch {
		case ev.Key == "":
			res.Status, res.Reason = api.StatusRejected, api.Invalid("no key")
		case len(ev.Key) > api.MaxKeyBytes || len(ev.LeaseID) > api.MaxIDBytes || len(ev.TaskID) > api.MaxIDBytes:
			res.Status, res.Reason = api.StatusRejected, api.Invalid(fmt.Sprintf("key over %d bytes or id over %d", api.MaxKeyBytes, api.MaxIDBytes))
		case dup:
			res.Status = api.StatusDuplicate
		default:
			var logged api.LogPayload
			if ev.Kind == state.EventLog {
				var err error
				if logged, err = decodeLog(ev.Payload); err != nil {
					res.Status, res.Reason = api.StatusRejected, api.Invalid(err.Error())
					break
				}
				if carriesCut(ev.Payload, logged) {
					res.Status, res.Reason = api.StatusRejected, api.Invalid("output_cut is the control plane's mark, not an agent's")
					break
				}
			}
			if t != nil && before[ev.TaskID] == nil {
				before[ev.TaskID] = t.Clone()
			}
			if reason := s.apply(req.AgentID, ev, now); reason != "" {
				res.Status, res.Reason = api.StatusRejected, reason
				break
			}
			t = s.tasks[ev.TaskID]
			se := api.StoredEvent{Event: ev, AgentID: req.AgentID, ReceivedAt: now}
			line, err := encodeStored(se)
			if err == nil && ev.Kind == state.EventLog {
				line, err = s.admitLog(t, se, logged, line, *t.EventsApplied+stored[ev.TaskID]+1)
			}
			if err != nil {
				s.undo(slices.Collect(maps.Keys(before)), keys, before)
				return api.EventsResponse{}, fmt.Errorf("store event %s: %w", ev.Key, err)
			}
			if set != nil {
				set[ev.Key] = struct{}{}
			}
			if _, seen := keys[ev.TaskID]; !seen {
				order = append(order, ev.TaskID)
			}
			keys[ev.TaskID] = append(keys[ev.TaskID], ev.Key)
			if line != nil {
				lines[ev.TaskID] = append(lines[ev.TaskID], line...)
				stored[ev.TaskID]++
			}
			batch.complete = batch.complete || ev.Kind == state.EventComplete
		}
		resp.Results[i] = res
	}
	// The events first: they are the record. A crash before they are all
	// stored loses only what was never answered; a crash after, before the
	// task files are saved, is repaired at the next start, which applies
	// the stored events the task files do not reflect.
	for i, id := range order {
		if len(lines[id]) == 0 {
			continue // every line cut: only the task's counts change
		}
		size, err := s.events.append(id, lines[id], batch.at(crashMidEvents))
		if err != nil {
			s.undo(order[i:], keys, before)
			for _, done := range order[:i] {
				_ = s.save(s.tasks[done]) // stored already; a failure is repaired at the next start
			}
			s.log.Error("store events", "task", id, "err", err)
			return api.EventsResponse{}, fmt.Errorf("store events of %s: %w", id, err)
		}
		t := s.tasks[id]
		n := *t.EventsApplied + stored[id]
		t.EventsApplied, t.EventsBytes = &n, size
	}
	if batch.at(crashAfterEvents) {
		crash()
	}
	for _, id := range order {
		if err := s.save(s.tasks[id]); err != nil {
			// The events are stored: the next start brings the task file
			// up to date. Say so rather than answer as if all was well.
			return api.EventsResponse{}, fmt.Errorf("events of %s are stored but the task could not be saved (it is repaired at the next start): %w", id, err)
		}
	}
	if batch.at(crashAfterSave) {
		crash()
	}
	s.countResults(resp.Results)
	return resp, nil
}

// undo puts back tasks whose events could not be stored, and forgets their
// keys: the agent sends them again.
func (s *Server) undo(ids []string, keys map[string][]string, before map[string]*state.Task) {
	for _, id := range ids {
		if t := before[id]; t != nil {
			s.tasks[id] = t
		}
		if set := s.keys[id]; set != nil {
			for _, k := range keys[id] {
				delete(set, k)
			}
		}
	}
}

// apply applies one event to its task, or says why it is rejected. mu is
// held.
func (s *Server) apply(agentID string, ev api.Event, now time.Time) (reason api.RejectReason) {
	t := s.tasks[ev.TaskID]
	if t == nil {
		return api.ReasonUnknown
	}
	if t.Phase.Terminal() {
		// The completion that follows the agent's own terminal phase is
		// the one late event a terminal task takes, from that agent under
		// its lease alone.
		var c state.CompleteEvent
		if ev.Kind == state.EventComplete && json.Unmarshal(ev.Payload, &c) == nil && c.Status == t.Phase && t.Result == nil {
			if t.Lease == nil || t.Lease.ID != ev.LeaseID || t.Lease.AgentID != agentID {
				return api.ReasonLease
			}
			s.setResult(t, c)
			return ""
		}
		return api.ReasonTerminal
	}
	if r := t.PersonRetry; r != nil && ev.Attempt > 0 && ev.Attempt <= r.After {
		// A report of an attempt that ended before a person retried the
		// task: it was made while the task was terminal.
		return api.ReasonTerminal
	}
	switch {
	case t.Lease == nil:
		return api.ReasonLease // never leased, or back in the queue
	case t.Lease.ID != ev.LeaseID || t.Lease.AgentID != agentID:
		return api.ReasonLease // another's lease, or another agent holding it
	case t.Lease.Lapsed:
		// The lease lapsed while the agent was away, and nobody else took
		// the task: the agent that held it, under its lease id, gets it
		// back.
		t.Lease.Lapsed = false
	}
	bad := func(err error) api.RejectReason { return api.Invalid(err.Error()) }
	switch ev.Kind {
	case state.EventPhase:
		var p state.PhaseEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		if err := t.Transition(p.Phase, p.Reason, now); err != nil {
			return bad(err)
		}
		if p.Phase == state.PhaseAwaitingReply && p.Request != nil {
			t.AwaitingReply, t.Reply = p.Request, nil
		}
	case state.EventProgress:
		var p state.ProgressEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		t.Progress = p
	case state.EventLog:
		// Its payload is read and checked by acceptEvents (decodeLog), and
		// what of it is stored decided there (admitLog).
	case state.EventAttempt:
		var a state.Attempt
		if err := json.Unmarshal(ev.Payload, &a); err != nil {
			return bad(err)
		}
		if err := t.PutAttempt(a); err != nil {
			return bad(err)
		}
	case state.EventComplete:
		var c state.CompleteEvent
		if err := json.Unmarshal(ev.Payload, &c); err != nil {
			return bad(err)
		}
		if err := t.Transition(c.Status, "", now); err != nil {
			return bad(err)
		}
		s.setResult(t, c)
	default:
		return api.Invalid("unknown kind " + string(ev.Kind))
	}
	t.LastProgressAt, t.UpdatedAt = now, now
	t.Lease.ExpiresAt = now.Add(s.opts.Lease)
	return ""
}

func (s *Server) setResult(t *state.Task, c state.CompleteEvent) {
	t.Result = &state.Result{Summary: c.Summary, Data: c.Result, Changes: boundChanges(c.Changes)}
	if c.Error != nil && t.PhaseReason == "" {
		t.PhaseReason = c.Error.Error()
	}
}

// Caps on a result's changes as the control plane keeps them, which every
// list of tasks carries: at most state.MaxChangesCommits commits (the rest
// counted in CommitsCut), each subject and name cut to a line's length.
const (
	maxSubjectRunes = 200
	maxRefRunes     = 256
)

// boundChanges is c as the control plane keeps it: a copy within the caps.
func boundChanges(c *state.Changes) *state.Changes {
	if c == nil {
		return nil
	}
	b := *c
	cut := func(s string) string { return state.Ellipsize(s, maxRefRunes) }
	b.Repo, b.Branch, b.Base, b.BaseCommit, b.Head, b.Path = cut(b.Repo), cut(b.Branch), cut(b.Base), cut(b.BaseCommit), cut(b.Head), cut(b.Path)
	b.CommitsCut, b.Files, b.Insertions, b.Deletions = max(b.CommitsCut, 0), max(b.Files, 0), max(b.Insertions, 0), max(b.Deletions, 0)
	if n := len(c.Commits); n > state.MaxChangesCommits {
		b.CommitsCut += n - state.MaxChangesCommits
	}
	b.Commits = make([]state.Commit, 0, min(len(c.Commits), state.MaxChangesCommits))
	for _, cm := range c.Commits[:min(len(c.Commits), state.MaxChangesCommits)] {
		b.Commits = append(b.Commits, state.Commit{SHA: cut(cm.SHA), Subject: state.Ellipsize(cm.Subject, maxSubjectRunes)})
	}
	return &b
}
