package server

import (
	"fmt"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// release gives claimed tasks an agent will not run back to the queue.
func (s *Server) release(req api.ReleaseRequest) (struct{}, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return struct{}{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	for _, id := range req.TaskIDs {
		t := s.tasks[id]
		if t == nil || t.Lease == nil || t.Lease.AgentID != req.AgentID || t.Phase != state.PhaseClaimed {
			continue
		}
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, "released by "+req.AgentID, now); err == nil {
			s.save(t)
		}
	}
	return struct{}{}, nil
}

func (s *Server) claim(req api.ClaimRequest) (api.ClaimResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.ClaimResponse{}, err
	}
	if len(req.RequestID) > api.MaxIDBytes {
		return api.ClaimResponse{}, badRequest("request_id is over %d bytes", api.MaxIDBytes)
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.ClaimResponse{}, badRequest("repos: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if a := s.agents[req.AgentID]; a != nil {
		a.view.Repos = slices.Clone(req.Repos)
	}
	s.watchdog(now)
	resp := api.ClaimResponse{Tasks: []api.Claimed{}}
	if req.RequestID != "" {
		// The same claim asked again (its answer was lost on the way):
		// the same grant, not a second one.
		for _, t := range s.sorted() {
			if l := t.Lease; l != nil && l.AgentID == req.AgentID && l.ClaimID == req.RequestID && !t.Phase.Terminal() {
				l.ExpiresAt, l.Lapsed = now.Add(s.opts.Lease), false
				resp.Tasks = append(resp.Tasks, claimed(t, *l))
			}
		}
		if len(resp.Tasks) > 0 {
			return resp, nil
		}
	}
	if req.HealthGrade == health.Unavailable || req.Max <= 0 {
		return resp, nil
	}
	for _, t := range s.sorted() {
		if len(resp.Tasks) >= min(req.Max, 50) {
			break
		}
		if t.Phase != state.PhaseQueued || !mayClaim(t, req) {
			continue
		}
		// A task that needs the executor's app server goes to an available
		// agent when one is online; a degraded one gets it otherwise.
		if t.Prefer == state.PreferGUI && req.HealthGrade == health.Degraded && s.availableAgentOnline(req.AgentID, now) {
			continue
		}
		lease := state.Lease{ID: newID("lease-", 6), AgentID: req.AgentID, ExpiresAt: now.Add(s.opts.Lease), ClaimID: req.RequestID, GrantedAt: now}
		if err := t.Transition(state.PhaseClaimed, "claimed by "+req.AgentID, now); err != nil {
			s.log.Error("claim", "task", t.ID, "err", err)
			continue
		}
		t.Lease = &lease
		if err := s.save(t); err != nil {
			// Not granted after all: a claim that is not on disk would be
			// forgotten by a restart while the agent runs the task.
			t.Lease = nil
			_ = t.Transition(state.PhaseQueued, "", now)
			return resp, fmt.Errorf("claim %s: %w", t.ID, err)
		}
		resp.Tasks = append(resp.Tasks, claimed(t, lease))
	}
	return resp, nil
}

// mayClaim reports whether the claim may take queued task t: a task a
// person continued goes only to the agent that keeps its session, and a
// task that names a repository only to an agent that serves it.
func mayClaim(t *state.Task, req api.ClaimRequest) bool {
	return t.MayClaim(req.AgentID) && (t.Repo == "" || slices.Contains(req.Repos, t.Repo))
}

// claimed is task t granted under lease. The lease goes once, beside the
// task: a copy in the task too would say the same twice (every agent reads
// this one and puts it in the task it keeps).
func claimed(t *state.Task, lease state.Lease) api.Claimed {
	c := api.Claimed{Task: *t.Clone(), Lease: lease}
	c.Task.Lease = nil
	return c
}

// availableAgentOnline reports whether an agent other than except is online
// and available. mu is held.
func (s *Server) availableAgentOnline(except string, now time.Time) bool {
	for id, a := range s.agents {
		if id != except && a.online(now, s.opts.HeartbeatInterval) && a.view.Health.Grade == health.Available {
			return true
		}
	}
	return false
}
