package server

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// The rules' side of claims: what a claim may take now, granted in one
// store transaction (claimNow), and the tasks an agent gives back
// (release). The long poll that holds a claim waiting is the dispatch's
// (claim.go).
// release gives claimed tasks an agent will not run back to the queue.
func (rl *rules) release(ctx context.Context, req api.ReleaseRequest) (struct{}, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return struct{}{}, err
	}
	if len(req.TaskIDs) > api.MaxEventsPerBatch {
		return struct{}{}, invalidRequest("%d tasks in one release; the limit is %d", len(req.TaskIDs), api.MaxEventsPerBatch)
	}
	now := rl.opts.Now()
	released := 0
	err := rl.update(ctx, req.TaskIDs, func(tx store.Tx) error {
		for _, id := range req.TaskIDs {
			t := tx.Task(id)
			if t == nil || t.Lease == nil || t.Lease.AgentID != req.AgentID || t.Phase != state.PhaseClaimed {
				continue
			}
			t.Lease = nil
			if err := t.Transition(state.PhaseQueued, "released by "+req.AgentID, now); err == nil {
				tx.Save(t)
				released++
			}
		}
		return nil
	})
	if err == nil {
		rl.dispatch.wakeClaims(released)
	}
	return struct{}{}, storeErr("release", err)
}

// claimNow grants what req may take now. queued counts the queued tasks
// it looked at, granted or not: none means that nothing was queued (but
// tasks other claims held at that moment).
func (rl *rules) claimNow(ctx context.Context, req api.ClaimRequest) (api.ClaimResponse, int, error) {
	now := rl.opts.Now()
	rl.watchdog.pass(ctx)
	resp := api.ClaimResponse{Tasks: []api.Claimed{}}
	a, known, leased, err := rl.store.AgentAndLeased(ctx, req.AgentID)
	if err != nil {
		return resp, 0, storeErr("claim", err)
	}
	if req.Executor != "" { // an agent from before routing advertises no labels
		if err := rl.adoptLabels(ctx, &a, req.AgentID, req.Labels); err != nil {
			return resp, 0, storeErr("claim", err)
		}
	}
	if err := rl.noteOffer(ctx, req, a, known); err != nil {
		return resp, 0, storeErr("claim", err)
	}
	if req.RequestID != "" {
		// The same claim asked again (its answer was lost on the way):
		// the same grant, not a second one.
		var again []string
		for _, t := range leased {
			if l := t.Lease; l.ClaimID == req.RequestID {
				again = append(again, t.ID)
			}
		}
		if len(again) > 0 {
			err := rl.update(ctx, again, func(tx store.Tx) error {
				for _, id := range again {
					t := tx.Task(id)
					if t == nil || t.Lease == nil || t.Lease.AgentID != req.AgentID || t.Lease.ClaimID != req.RequestID || t.Phase.Terminal() {
						continue
					}
					t.Lease.ExpiresAt, t.Lease.Lapsed = now.Add(rl.opts.Lease), false
					tx.Save(t)
					resp.Tasks = append(resp.Tasks, rl.claimed(t, *t.Lease))
				}
				return nil
			})
			if err != nil || len(resp.Tasks) > 0 {
				return resp, 0, storeErr("claim", err)
			}
		}
	}
	if req.HealthGrade == health.Unavailable || req.Max <= 0 {
		return resp, 0, nil
	}
	most := min(req.Max, 50)
	// Whether an available agent other than this one is online: asked
	// before the claim's transaction, which must not call the store.
	guiElsewhere := false
	if req.HealthGrade == health.Degraded {
		if guiElsewhere, err = rl.availableAgentOnline(ctx, req.AgentID, now); err != nil {
			return resp, 0, storeErr("claim", err)
		}
	}
	queued := 0
	err = rl.claimTasks(ctx, func(tx store.Tx, t *state.Task) (bool, error) {
		queued++
		// A task that needs the executor's app server goes to an available
		// agent when one is online; a degraded one gets it otherwise.
		if !mayClaim(t, req, a.Granted) || t.Prefer == state.PreferGUI && guiElsewhere {
			return false, nil
		}
		lease := state.Lease{ID: newID("lease-", 6), AgentID: req.AgentID, ExpiresAt: now.Add(rl.opts.Lease), ClaimID: req.RequestID, GrantedAt: now}
		if err := t.Transition(state.PhaseClaimed, "claimed by "+req.AgentID, now); err != nil {
			rl.log.Error("claim", "task", t.ID, "err", err)
			return false, nil
		}
		t.Lease, t.Unroutable = &lease, ""
		t.Delegation = rl.delegationOf(t) // as the rules in force say now
		tx.Save(t)
		resp.Tasks = append(resp.Tasks, rl.claimed(t, lease))
		return len(resp.Tasks) >= most, nil
	})
	if err != nil {
		// Not granted after all: a claim that is not stored would be
		// forgotten by a restart while the agent runs the task.
		return api.ClaimResponse{Tasks: []api.Claimed{}}, queued, storeErr("claim", err)
	}
	return resp, queued, nil
}

// mayClaim reports whether the claim may take queued task t: a task a
// person continued goes only to the agent that keeps its session, a task
// that names a repository only to an agent that serves it, and a task
// with requirements only to an agent that meets them all, its labels
// those a person granted it (granted), never those the claim describes
// itself with.
func mayClaim(t *state.Task, req api.ClaimRequest, granted map[string]string) bool {
	return t.MayClaim(req.AgentID) && (t.Repo == "" || slices.Contains(req.Repos, t.Repo)) &&
		(len(t.Requires) == 0 || api.OfferOfClaim(req, granted).MeetsAll(t.Requires))
}

// claimed is task t granted under lease, with its task token unless it
// may delegate to nothing: a leaf is offered no subtask command, and the
// token is what its executor would use one with. The lease goes once,
// beside the task: a copy in the task too would say the same twice
// (every agent reads this one and puts it in the task it keeps).
func (rl *rules) claimed(t *state.Task, lease state.Lease) api.Claimed {
	c := api.Claimed{Task: *t.Clone(), Lease: lease}
	if !t.Delegation.Leaf() {
		c.TaskToken = rl.taskToken(t.ID, lease.ID)
	}
	c.Task.Lease = nil
	return c
}

// availableAgentOnline reports whether an agent other than except is online
// and available.
func (rl *rules) availableAgentOnline(ctx context.Context, except string, now time.Time) (bool, error) {
	agents, err := rl.store.Agents(ctx)
	if err != nil {
		return false, err
	}
	for _, a := range agents {
		if a.View.AgentID != except && a.Online(now, rl.opts.HeartbeatInterval) && a.View.Health.Grade == health.Available {
			return true, nil
		}
	}
	return false, nil
}

// noteOffer keeps the repositories an agent announces in a claim, and
// the capabilities and labels when the claim advertises them (an agent
// from before routing does not), when they changed since its heartbeat
// (a, its record; known, whether it has one).
func (rl *rules) noteOffer(ctx context.Context, req api.ClaimRequest, a store.Agent, known bool) error {
	if !known {
		return nil
	}
	advertises := req.Executor != ""
	same := slices.Equal(a.View.Repos, req.Repos) &&
		(!advertises || sameCapabilities(a.View.Capabilities, req.Capabilities) && maps.Equal(a.View.Labels, req.Labels))
	if same {
		return nil
	}
	a.View.Repos = slices.Clone(req.Repos)
	if advertises {
		a.View.Capabilities = req.Capabilities
		a.View.Capabilities.Models = slices.Clone(req.Models)
		a.View.Labels = maps.Clone(req.Labels)
	}
	return rl.store.PutAgent(ctx, a)
}

// sameCapabilities reports whether a and b advertise the same.
func sameCapabilities(a, b api.Capabilities) bool {
	return a.Executor == b.Executor && a.OS == b.OS && a.Arch == b.Arch && slices.Equal(a.Models, b.Models)
}

// checkOffer refuses capabilities or labels an agent advertises that are
// malformed.
func checkOffer(c api.Capabilities, labels map[string]string) error {
	if err := c.Check(); err != nil {
		return invalidRequest("capabilities: %v", err)
	}
	if err := api.CheckLabels(labels); err != nil {
		return invalidRequest("labels: %v", err)
	}
	return nil
}
