package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

func (s *Server) listAgents() []api.AgentView {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	s.watchdog(now)
	out := []api.AgentView{}
	for _, a := range s.agents {
		v := a.view
		v.Online = a.online(now, s.opts.HeartbeatInterval)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.AgentView) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

func (s *Server) heartbeat(req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.HeartbeatResponse{}, err
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.HeartbeatResponse{}, badRequest("repos: %v", err)
	}
	if err := api.CheckLabels(req.Labels); err != nil {
		return api.HeartbeatResponse{}, badRequest("labels: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	a := s.agents[req.AgentID]
	if a == nil {
		a = &agentState{}
		s.agents[req.AgentID] = a
	}
	switch req.State {
	case "", api.AgentRunning, api.AgentDraining, api.AgentOffline:
	default:
		return api.HeartbeatResponse{}, badRequest("state %q: want running, draining or offline", req.State)
	}
	// An agent's grade and presence weigh in where GUI tasks go: a
	// change may make one claimable for a degraded agent that waits.
	if a.view.Health.Grade != req.Health.Grade || (a.view.State == api.AgentOffline) != (req.State == api.AgentOffline) {
		s.wakeClaims()
	}
	a.view = api.AgentView{AgentID: req.AgentID, Hostname: req.Hostname, Version: req.Version, StartedAt: req.StartedAt,
		LastHeartbeat: now, Health: req.Health, Capacity: req.Capacity, Running: req.Running, Outbox: req.Outbox, State: req.State,
		Repos: slices.Clone(req.Repos), Labels: maps.Clone(req.Labels)}
	if req.State == api.AgentOffline {
		s.log.Info("agent went offline", "agent", req.AgentID)
	}
	resp := api.HeartbeatResponse{ServerTime: now, HeartbeatIntervalS: s.opts.HeartbeatInterval.Seconds(), Cancel: []string{}}
	running := map[string]bool{}
	for _, r := range req.Running {
		running[r.TaskID] = true
		t := s.tasks[r.TaskID]
		switch {
		case t == nil, t.Phase.Terminal(), t.Phase == state.PhaseQueued, t.Lease != nil && t.Lease.AgentID != req.AgentID:
			// Unknown here, over, back in the queue, or someone else's: the
			// agent must not go on with it.
			resp.Cancel = append(resp.Cancel, r.TaskID)
			continue
		case t.Lease == nil || t.Lease.Lapsed:
			// The lease lapsed while the agent was away and nobody took the
			// task: its next event, under its lease id, takes it back.
			continue
		}
		t.Lease.ExpiresAt = now.Add(s.opts.Lease)
		if t.CancelRequested {
			resp.Cancel = append(resp.Cancel, t.ID)
		}
		if t.Phase == state.PhaseAwaitingReply && t.Reply != nil {
			resp.Replies = append(resp.Replies, api.ReplyDelivery{TaskID: t.ID, RequestID: t.Reply.RequestID, Decision: t.Reply.Decision})
		}
	}
	s.reconcile(req.AgentID, running, now)
	s.watchdog(now)
	return resp, nil
}

// reconcile compares what an agent says it runs with the tasks leased to
// it. A task it was granted but does not run (its claim answer was lost on
// the way) goes back to the queue once the agent has left it out of two
// heartbeats in a row and the grant is two intervals old, so a heartbeat
// that raced the claim does not count. No attempt is spent: none began.
// mu is held.
func (s *Server) reconcile(agentID string, running map[string]bool, now time.Time) {
	a := s.agents[agentID]
	if a.missing == nil {
		a.missing = map[string]int{}
	}
	for _, t := range s.tasks {
		if t.Lease == nil || t.Lease.AgentID != agentID || t.Phase != state.PhaseClaimed || running[t.ID] {
			delete(a.missing, t.ID)
			continue
		}
		a.missing[t.ID]++
		if a.missing[t.ID] < 2 || now.Sub(t.Lease.GrantedAt) < 2*s.opts.HeartbeatInterval {
			continue
		}
		delete(a.missing, t.ID)
		reason := fmt.Sprintf("lease revoked: agent %s does not run it (its claim answer was lost?)", agentID)
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, reason, now); err != nil {
			s.log.Error("requeue a task its agent does not run", "task", t.ID, "err", err)
			continue
		}
		s.log.Info("task back in the queue: its agent does not run it", "task", t.ID, "agent", agentID)
		s.save(t)
	}
}

// agentState is what the control plane knows of an agent.
type agentState struct {
	view api.AgentView
	// missing counts, per task leased to the agent in phase claimed, the
	// heartbeats in a row that did not list it.
	missing map[string]int
	// wasOnline is whether the watchdog last found the agent online.
	wasOnline bool
}

func (a *agentState) online(now time.Time, interval time.Duration) bool {
	return a.view.State != api.AgentOffline && now.Sub(a.view.LastHeartbeat) <= 3*interval
}
