package controlplane

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeagent/agent/state"
)

// acceptEvents applies a batch in order. Each event is accepted, a
// duplicate (its key was accepted before: nothing changes), or rejected
// with a reason the agent records as the record's dead reason. Changed
// tasks are saved and accepted events appended, synced, before the answer.
func (s *Server) acceptEvents(req EventsRequest) (EventsResponse, error) {
	if req.AgentID == "" {
		return EventsResponse{}, badRequest("agent_id is required")
	}
	if len(req.Events) > MaxEventsPerBatch {
		return EventsResponse{}, badRequest("%d events in one batch; the limit is %d", len(req.Events), MaxEventsPerBatch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	s.watchdog(now)
	resp := EventsResponse{Results: make([]EventResult, len(req.Events))}
	accepted := map[string][]StoredEvent{}
	var order []string // tasks in the order they were first touched
	for i, ev := range req.Events {
		res := EventResult{Key: ev.Key, Status: StatusAccepted}
		switch {
		case ev.Key == "":
			res.Status, res.Reason = StatusRejected, ReasonInvalid+": no key"
		case s.keys[ev.Key]:
			res.Status = StatusDuplicate
		default:
			if reason := s.apply(req.AgentID, ev, now); reason != "" {
				res.Status, res.Reason = StatusRejected, reason
				break
			}
			s.keys[ev.Key] = true
			if _, seen := accepted[ev.TaskID]; !seen {
				order = append(order, ev.TaskID)
			}
			accepted[ev.TaskID] = append(accepted[ev.TaskID], StoredEvent{Event: ev, AgentID: req.AgentID, ReceivedAt: now})
		}
		resp.Results[i] = res
	}
	// Tasks first, then the events: a crash between the two leaves events
	// that will be sent again and applied again, which every kind allows.
	for _, id := range order {
		if err := s.save(s.tasks[id]); err != nil {
			return EventsResponse{}, err
		}
		if err := s.events.append(id, accepted[id]); err != nil {
			return EventsResponse{}, fmt.Errorf("record events of %s: %w", id, err)
		}
	}
	return resp, nil
}

// apply applies one event to its task, or says why it is rejected. mu is
// held.
func (s *Server) apply(agentID string, ev Event, now time.Time) (reason string) {
	t := s.tasks[ev.TaskID]
	if t == nil {
		return ReasonUnknown
	}
	if t.Phase.Terminal() {
		// The completion that follows the agent's own terminal phase is
		// the one late event a terminal task takes.
		var c state.CompleteEvent
		if ev.Kind == state.EventComplete && json.Unmarshal(ev.Payload, &c) == nil && c.Status == t.Phase && t.Result == nil {
			s.setResult(t, c)
			return ""
		}
		return ReasonTerminal
	}
	switch {
	case t.Lease != nil && t.Lease.ID != ev.LeaseID:
		return ReasonLease
	case t.Lease == nil && t.Phase == state.PhaseQueued:
		return ReasonLease // its lease lapsed and it went back to the queue
	case t.Lease == nil:
		// The lease lapsed while the agent was away, and nobody else took
		// the task: the agent that holds the lease id gets it back.
		t.Lease = &state.Lease{ID: ev.LeaseID, AgentID: agentID}
	}
	bad := func(err error) string { return ReasonInvalid + ": " + err.Error() }
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
		var l state.LogEvent
		if err := json.Unmarshal(ev.Payload, &l); err != nil {
			return bad(err)
		}
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
		return ReasonInvalid + ": unknown kind " + string(ev.Kind)
	}
	t.LastProgressAt, t.UpdatedAt = now, now
	t.Lease.ExpiresAt = now.Add(s.opts.Lease)
	return ""
}

func (s *Server) setResult(t *state.Task, c state.CompleteEvent) {
	t.Result = &state.Result{Summary: c.Summary, Data: c.Result}
	if c.Error != nil && t.PhaseReason == "" {
		t.PhaseReason = c.Error.Error()
	}
}
