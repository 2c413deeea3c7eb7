package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// listAgents is a page of the agents, by id, after the one named after,
// and the cursor of the next page.
func (s *Server) listAgents(ctx context.Context, after string, limit int) ([]api.AgentView, string, error) {
	s.watchdog(ctx)
	agents, err := s.store.Agents(ctx)
	if err != nil {
		return nil, "", storeErr("list agents", err)
	}
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(agents, after, func(a store.Agent, id string) int { return strings.Compare(a.View.AgentID, id) })
		if start < len(agents) && agents[start].View.AgentID == after {
			start++
		}
	}
	end := min(start+limit, len(agents))
	now := s.opts.Now()
	out := make([]api.AgentView, 0, end-start)
	for _, a := range agents[start:end] {
		v := a.View
		v.Online = a.Online(now, s.opts.HeartbeatInterval)
		v.GrantedLabels = a.Granted
		out = append(out, v)
	}
	next := ""
	if end < len(agents) && end > start {
		next = out[len(out)-1].AgentID
	}
	return out, next, nil
}

func (s *Server) heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.HeartbeatResponse{}, err
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.HeartbeatResponse{}, badRequest("repos: %v", err)
	}
	if err := checkOffer(req.Capabilities, req.Labels); err != nil {
		return api.HeartbeatResponse{}, err
	}
	switch req.State {
	case "", api.AgentRunning, api.AgentDraining, api.AgentOffline:
	default:
		return api.HeartbeatResponse{}, badRequest("state %q: want running, draining or offline", req.State)
	}
	if len(req.Running) > api.MaxEventsPerBatch {
		return api.HeartbeatResponse{}, badRequest("%d running tasks in one heartbeat; the limit is %d", len(req.Running), api.MaxEventsPerBatch)
	}
	now := s.opts.Now()
	a, known, leased, err := s.store.AgentAndLeased(ctx, req.AgentID)
	if err != nil {
		return api.HeartbeatResponse{}, storeErr("heartbeat", err)
	}
	if err := s.adoptLabels(ctx, &a, req.AgentID, req.Labels); err != nil {
		return api.HeartbeatResponse{}, storeErr("heartbeat", err)
	}
	// An agent's grade and presence weigh in where GUI tasks go: an
	// available agent that is no more may make one claimable for a
	// degraded agent that waits.
	wasAvailable := known && a.View.Health.Grade == health.Available && a.View.State != api.AgentOffline
	wake := wasAvailable && (req.Health.Grade != health.Available || req.State == api.AgentOffline)
	was := a.View
	a.View = api.AgentView{AgentID: req.AgentID, Hostname: req.Hostname, Version: req.Version, StartedAt: req.StartedAt,
		LastHeartbeat: now, Health: req.Health, Capacity: req.Capacity, Running: req.Running, Outbox: req.Outbox, State: req.State,
		Repos: slices.Clone(req.Repos), Labels: maps.Clone(req.Labels), Capabilities: req.Capabilities, Replica: s.opts.Replica}
	a.View.Models = slices.Clone(req.Models)
	if req.State == api.AgentOffline {
		s.log.Info("agent went offline", "agent", req.AgentID)
	}
	resp := api.HeartbeatResponse{ServerTime: now, HeartbeatIntervalS: s.opts.HeartbeatInterval.Seconds(), Cancel: []string{},
		MaxAttemptOutputBytes: s.opts.MaxAttemptOutput, PublicURL: s.opts.PublicURL}
	running := map[string]bool{}
	ids := make([]string, 0, len(req.Running)+len(leased))
	for _, r := range req.Running {
		if !running[r.TaskID] && len(r.TaskID) <= api.MaxIDBytes {
			running[r.TaskID] = true
			ids = append(ids, r.TaskID)
		}
	}
	for _, t := range leased {
		if !running[t.ID] {
			ids = append(ids, t.ID)
		}
	}
	requeued := 0
	err = s.update(ctx, ids, func(tx store.Tx) error {
		resp.Cancel, resp.Replies, resp.Stop = resp.Cancel[:0], nil, nil
		for _, r := range req.Running {
			t := tx.Task(r.TaskID)
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
			tx.Save(t)
			o, stop := stopOrder(t)
			if stop {
				// Cancel too: an agent from before tree budgets stops it so.
				resp.Stop = append(resp.Stop, o)
			}
			if t.CancelRequested || stop {
				resp.Cancel = append(resp.Cancel, t.ID)
			}
			if t.Phase == state.PhaseAwaitingReply && t.Reply != nil {
				resp.Replies = append(resp.Replies, api.ReplyDelivery{TaskID: t.ID, RequestID: t.Reply.RequestID, Decision: t.Reply.Decision})
			}
		}
		requeued = s.reconcile(tx, &a, leased, running, now)
		return nil
	})
	if err != nil {
		return api.HeartbeatResponse{}, storeErr("heartbeat", err)
	}
	s.notifyHeartbeat(ctx, was, a.View)
	if err := s.store.PutAgent(ctx, a); err != nil {
		return api.HeartbeatResponse{}, storeErr("heartbeat", err)
	}
	if wake {
		s.wakeDegraded()
	}
	s.wakeClaims(requeued)
	s.watchdog(ctx)
	return resp, nil
}

// reconcile compares what an agent says it runs with the tasks leased to
// it. A task it was granted but does not run (its claim answer was lost on
// the way) goes back to the queue once the agent has left it out of two
// heartbeats in a row and the grant is older than two intervals and than
// api.ClaimAnswerWindow, so neither a heartbeat that raced the claim nor
// an answer slow on its way counts (the agent would run the task under a
// lease taken back). An answer lost for good is asked again with the
// claim's id, and gets the same grant, long before. No attempt is spent: none began.
// It returns how many tasks it put back in the queue.
func (s *Server) reconcile(tx store.Tx, a *store.Agent, leased []*state.Task, running map[string]bool, now time.Time) int {
	missing := map[string]int{}
	requeued := 0
	for _, l := range leased {
		t := tx.Task(l.ID)
		if t == nil || t.Lease == nil || t.Lease.AgentID != a.View.AgentID || t.Phase != state.PhaseClaimed || running[t.ID] {
			continue
		}
		missing[t.ID] = a.Missing[t.ID] + 1
		if missing[t.ID] < 2 || now.Sub(t.Lease.GrantedAt) < max(2*s.opts.HeartbeatInterval, api.ClaimAnswerWindow) {
			continue
		}
		delete(missing, t.ID)
		reason := fmt.Sprintf("lease revoked: agent %s does not run it (its claim answer was lost?)", a.View.AgentID)
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, reason, now); err != nil {
			s.log.Error("requeue a task its agent does not run", "task", t.ID, "err", err)
			continue
		}
		s.log.Info("task back in the queue: its agent does not run it", "task", t.ID, "agent", a.View.AgentID)
		tx.Save(t)
		requeued++
	}
	a.Missing = missing
	if len(missing) == 0 {
		a.Missing = nil
	}
	return requeued
}
