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
func (rl *rules) listAgents(ctx context.Context, after string, limit int) ([]api.AgentView, string, error) {
	rl.watchdog.pass(ctx)
	agents, err := rl.store.Agents(ctx)
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
	now := rl.opts.Now()
	out := make([]api.AgentView, 0, end-start)
	for _, a := range agents[start:end] {
		v := a.View
		v.Online = a.Online(now, rl.opts.HeartbeatInterval)
		v.GrantedLabels = a.Granted
		out = append(out, v)
	}
	next := ""
	if end < len(agents) && end > start {
		next = out[len(out)-1].AgentID
	}
	return out, next, nil
}

func (rl *rules) heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.HeartbeatResponse{}, err
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.HeartbeatResponse{}, invalidRequest("repos: %v", err)
	}
	if err := checkOffer(req.Capabilities, req.Labels); err != nil {
		return api.HeartbeatResponse{}, err
	}
	switch req.State {
	case "", api.AgentRunning, api.AgentDraining, api.AgentOffline:
	default:
		return api.HeartbeatResponse{}, invalidRequest("state %q: want running, draining or offline", req.State)
	}
	if len(req.Running) > api.MaxEventsPerBatch {
		return api.HeartbeatResponse{}, invalidRequest("%d running tasks in one heartbeat; the limit is %d", len(req.Running), api.MaxEventsPerBatch)
	}
	now := rl.opts.Now()
	resp := api.HeartbeatResponse{ServerTime: now, HeartbeatIntervalS: rl.opts.HeartbeatInterval.Seconds(), Cancel: []string{},
		MaxAttemptOutputBytes: rl.opts.MaxAttemptOutput, PublicURL: rl.opts.PublicURL}
	var (
		a, was   store.Agent
		wake     bool
		requeued int
	)
	// beat is the heartbeat's part under the agent's tasks' locks: the
	// leases renewed, the orders for the tasks it runs, the tasks it was
	// granted and does not run put back; and its record.
	beat := func(tx store.Tx, rec *store.Agent, known bool, leased []*state.Task) error {
		// An agent's grade and presence weigh in where GUI tasks go: an
		// available agent that is no more may make one claimable for a
		// degraded agent that waits.
		wasAvailable := known && rec.View.Health.Grade == health.Available && rec.View.State != api.AgentOffline
		wake = wasAvailable && (req.Health.Grade != health.Available || req.State == api.AgentOffline)
		was = *rec
		rec.View = api.AgentView{AgentID: req.AgentID, Hostname: req.Hostname, Version: req.Version, StartedAt: req.StartedAt,
			LastHeartbeat: now, Health: req.Health, Capacity: req.Capacity, Running: req.Running, Outbox: req.Outbox, State: req.State,
			Repos: slices.Clone(req.Repos), Labels: maps.Clone(req.Labels), Capabilities: req.Capabilities, Replica: rl.opts.Replica}
		rec.View.Models = slices.Clone(req.Models)
		resp.Cancel, resp.Replies, resp.Stop, resp.CancelOrders, resp.Resume = resp.Cancel[:0], nil, nil, nil, nil
		running := map[string]bool{}
		for _, r := range req.Running {
			if len(r.TaskID) <= api.MaxIDBytes {
				running[r.TaskID] = true
			}
		}
		rl.renew(tx, req, &resp, now)
		requeued = rl.reconcile(tx, rec, leased, running, now)
		a = *rec
		return nil
	}
	if b, ok := rl.store.(store.Beater); ok {
		// One transaction, ahead of other work where the store keeps
		// connections for heartbeats.
		ids := make([]string, 0, len(req.Running))
		for _, r := range req.Running {
			if len(r.TaskID) <= api.MaxIDBytes {
				ids = append(ids, r.TaskID)
			}
		}
		err := b.Beat(ctx, req.AgentID, ids, func(tx store.Tx, rec *store.Agent, known bool, leased []*state.Task) error {
			return rl.watched(func(tx store.Tx) error { return beat(tx, rec, known, leased) })(tx)
		})
		if err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
		if err := rl.adoptLabels(ctx, &a, req.AgentID, req.Labels); err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
	} else {
		rec, known, leased, err := rl.store.AgentAndLeased(ctx, req.AgentID)
		if err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
		if err := rl.adoptLabels(ctx, &rec, req.AgentID, req.Labels); err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
		ids := make([]string, 0, len(req.Running)+len(leased))
		seen := map[string]bool{}
		for _, r := range req.Running {
			if !seen[r.TaskID] && len(r.TaskID) <= api.MaxIDBytes {
				seen[r.TaskID] = true
				ids = append(ids, r.TaskID)
			}
		}
		for _, t := range leased {
			if !seen[t.ID] {
				ids = append(ids, t.ID)
			}
		}
		err = rl.update(ctx, ids, func(tx store.Tx) error {
			r := rec // each run of the transaction from the record read
			return beat(tx, &r, known, leased)
		})
		if err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
		if err := rl.store.PutAgent(ctx, a); err != nil {
			return api.HeartbeatResponse{}, storeErr("heartbeat", err)
		}
	}
	if req.State == api.AgentOffline {
		rl.log.Info("agent went offline", "agent", req.AgentID)
	}
	rl.notifyHeartbeat(ctx, was.View, a.View)
	if wake {
		rl.dispatch.wakeDegraded()
	}
	rl.dispatch.wakeClaims(requeued)
	if rl.opts.Now().Sub(now) > slowHeartbeat {
		rl.watchdog.strained() // the agent is on time; the control plane is not
	}
	rl.watchdog.pass(ctx)
	return resp, nil
}

// renew renews the leases of the tasks an agent runs, and puts in resp
// the orders for them: cancel those that are not its own any more, stop
// those past their tree's budget, and the replies to its questions.
func (rl *rules) renew(tx store.Tx, req api.HeartbeatRequest, resp *api.HeartbeatResponse, now time.Time) {
	for _, r := range req.Running {
		t := tx.Task(r.TaskID)
		switch {
		case t == nil, t.Phase.Terminal(), t.Phase == state.PhaseQueued, t.Lease != nil && t.Lease.AgentID != req.AgentID:
			// Unknown here, over, back in the queue, or someone else's: the
			// agent must not go on with it.
			o, _ := cancelOrderOf(t, r.TaskID, req.AgentID)
			resp.Cancel, resp.CancelOrders = append(resp.Cancel, r.TaskID), append(resp.CancelOrders, o)
			continue
		case t.Lease == nil || t.Lease.Lapsed:
			// The lease lapsed while the agent was away and nobody took the
			// task: its next event, under its lease id, takes it back.
			continue
		}
		t.Lease.ExpiresAt = now.Add(rl.opts.Lease)
		if r.LastActivityAt.After(t.LastActivityAt) {
			// Its processes at work in silence: the stall limit
			// counts from then (never from later than now).
			t.LastActivityAt = r.LastActivityAt
			if t.LastActivityAt.After(now) {
				t.LastActivityAt = now
			}
		}
		t.Liveness = state.PlainText(r.Liveness)
		if t.Liveness != "" && t.Liveness != state.LivenessSilent {
			t.Liveness = "" // only what the agent may say
		}
		tx.Save(t)
		o, stop := stopOrder(t)
		if stop {
			// Cancel too: an agent from before tree budgets stops it so.
			resp.Stop = append(resp.Stop, o)
		}
		if t.CancelRequested || stop {
			resp.Cancel = append(resp.Cancel, t.ID)
		}
		if o, ok := cancelOrderOf(t, t.ID, req.AgentID); ok && !stop {
			resp.CancelOrders = append(resp.CancelOrders, o)
		}
		if t.Phase == state.PhaseParked && t.Parked != nil && !t.Parked.ContinueAsked.IsZero() {
			resp.Resume = append(resp.Resume, api.ResumeOrder{TaskID: t.ID, MaxTokens: t.MaxTokens, MaxTime: t.MaxTime})
		}
		if t.Phase == state.PhaseAwaitingReply && t.Reply != nil {
			resp.Replies = append(resp.Replies, api.ReplyDelivery{TaskID: t.ID, RequestID: t.Reply.RequestID, Decision: t.Reply.Decision})
		}
	}
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
func (rl *rules) reconcile(tx store.Tx, a *store.Agent, leased []*state.Task, running map[string]bool, now time.Time) int {
	missing := map[string]int{}
	requeued := 0
	for _, l := range leased {
		t := tx.Task(l.ID)
		if t == nil || t.Lease == nil || t.Lease.AgentID != a.View.AgentID || t.Phase != state.PhaseClaimed || running[t.ID] {
			continue
		}
		missing[t.ID] = a.Missing[t.ID] + 1
		if missing[t.ID] < 2 || now.Sub(t.Lease.GrantedAt) < max(2*rl.opts.HeartbeatInterval, api.ClaimAnswerWindow) {
			continue
		}
		delete(missing, t.ID)
		reason := fmt.Sprintf("lease revoked: agent %s does not run it (its claim answer was lost?)", a.View.AgentID)
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, reason, now); err != nil {
			rl.log.Error("requeue a task its agent does not run", "task", t.ID, "err", err)
			continue
		}
		rl.log.Info("task back in the queue: its agent does not run it", "task", t.ID, "agent", a.View.AgentID)
		tx.Save(t)
		requeued++
	}
	a.Missing = missing
	if len(missing) == 0 {
		a.Missing = nil
	}
	return requeued
}
