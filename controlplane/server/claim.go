package server

import (
	"context"
	"fmt"
	"math"
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

// claim answers POST /v1/tasks/claim. With nothing claimable and a wait
// asked (wait_ms, capped at Options.MaxClaimWait), it holds the claim:
// each time a task may have become claimable (wakeClaims) it runs the
// same selection again, under the lock, as a claim arriving then would;
// it answers with the first grant, or empty when the wait ends, the
// agent hangs up or the server stops waits. A claim asked again with the
// same request id finds its grant in that selection, so a long poll whose
// answer was lost grants nothing twice.
func (s *Server) claim(ctx context.Context, req api.ClaimRequest) (api.ClaimResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.ClaimResponse{}, err
	}
	if len(req.RequestID) > api.MaxIDBytes {
		return api.ClaimResponse{}, badRequest("request_id is over %d bytes", api.MaxIDBytes)
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.ClaimResponse{}, badRequest("repos: %v", err)
	}
	if req.WaitMS < 0 {
		return api.ClaimResponse{}, badRequest("wait_ms is %d: want 0 (answer at once) or more", req.WaitMS)
	}
	wait := min(time.Duration(min(req.WaitMS, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond, s.opts.MaxClaimWait)
	if req.HealthGrade == health.Unavailable || req.Max <= 0 {
		wait = 0 // nothing could be granted: no use waiting
	}
	var timer *time.Timer
	for {
		if timer != nil {
			// Woken as the agent hung up or the server stopped waits: no
			// grant to an agent that will not hear of it.
			select {
			case <-ctx.Done():
				return s.endWait(WaitGone, wait), nil
			case <-s.stopWaits:
				return s.endWait(WaitStopped, wait), nil
			default:
			}
		}
		s.mu.Lock()
		if timer != nil {
			s.waitRounds++
		}
		resp, err := s.claimNow(req)
		woken := s.claimable
		if err != nil || len(resp.Tasks) > 0 || wait <= 0 {
			if timer != nil {
				s.waiting--
				if err == nil {
					s.countWaitEnd(WaitGranted)
				}
			}
			s.mu.Unlock()
			resp.WaitMS = wait.Milliseconds()
			return resp, err
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
			s.waiting++
		}
		s.mu.Unlock()
		var end ClaimWaitEnd
		select {
		case <-woken:
			continue
		case <-timer.C:
			end = WaitTimedOut
		case <-ctx.Done():
			end = WaitGone
		case <-s.stopWaits:
			end = WaitStopped
		}
		return s.endWait(end, wait), nil
	}
}

// endWait ends a claim held waiting, empty.
func (s *Server) endWait(end ClaimWaitEnd, wait time.Duration) api.ClaimResponse {
	s.mu.Lock()
	s.waiting--
	s.countWaitEnd(end)
	s.mu.Unlock()
	return api.ClaimResponse{Tasks: []api.Claimed{}, WaitMS: wait.Milliseconds()}
}

// countWaitEnd counts a waiting claim's end. mu is held.
func (s *Server) countWaitEnd(end ClaimWaitEnd) {
	if s.waitEnds == nil {
		s.waitEnds = map[ClaimWaitEnd]uint64{}
	}
	s.waitEnds[end]++
}

// wakeClaims wakes the claims waiting for work: a task may have become
// claimable for one of them (a task queued: submitted, retried,
// continued, released, its lease lapsed; or an agent's grade or presence
// changed, which the preference for GUI tasks weighs). mu is held.
func (s *Server) wakeClaims() {
	close(s.claimable)
	s.claimable = make(chan struct{})
}

// StopWaits answers every waiting claim at once, empty, and every later
// claim without waiting: for a server about to stop, whose HTTP server's
// shutdown would otherwise wait for them. It is safe to call again.
func (s *Server) StopWaits() {
	s.stopOnce.Do(func() { close(s.stopWaits) })
}

// ClaimWaitEnd is how a claim held waiting for work ended.
type ClaimWaitEnd string

// How waiting claims end.
const (
	WaitGranted  ClaimWaitEnd = "granted"   // a task became claimable and was granted
	WaitTimedOut ClaimWaitEnd = "timed_out" // the wait ended with nothing to grant
	WaitGone     ClaimWaitEnd = "gone"      // the agent hung up (it is stopping, or its request timed out)
	WaitStopped  ClaimWaitEnd = "stopped"   // the server stopped waits (StopWaits)
)

// ClaimsWaiting is how many claims are held waiting for work now.
func (s *Server) ClaimsWaiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// ClaimWaitEnds counts, since the server started, the claims that waited
// for work, by how their wait ended.
func (s *Server) ClaimWaitEnds() map[ClaimWaitEnd]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := make(map[ClaimWaitEnd]uint64, len(s.waitEnds))
	for k, v := range s.waitEnds {
		n[k] = v
	}
	return n
}

// claimNow grants what req may take now. mu is held.
func (s *Server) claimNow(req api.ClaimRequest) (api.ClaimResponse, error) {
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
