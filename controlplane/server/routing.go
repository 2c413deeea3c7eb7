package server

import (
	"context"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Routing by capability. A task's requirements (state.Requirement) are
// matched against what the claiming agent advertises in its claim, and
// the labels a person granted it (mayClaim; labels.go). A queued task that no online agent can take says why, in
// Task.Unroutable: set at submit and by the watchdog as agents come and
// go, cleared when one fits or the task is granted. It never ends a task:
// the queued limit does.

// routable reports whether agent a counts when the control plane says
// whether a task can be routed: it is online and not draining.
func (rl *rules) routable(a store.Agent, now time.Time) bool {
	return a.Online(now, rl.opts.HeartbeatInterval) && a.View.State != api.AgentDraining
}

// offers are what the routable agents offer: what they advertise, and
// the labels people granted them.
func (rl *rules) offers(ctx context.Context, now time.Time) ([]api.Offer, error) {
	agents, err := rl.store.Agents(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.Offer
	for _, a := range agents {
		if rl.routable(a, now) {
			v := a.View
			v.GrantedLabels = a.Granted
			out = append(out, api.OfferOf(v))
		}
	}
	return out, nil
}

// checkRequires refuses a task's requirements that are malformed.
func checkRequires(rs []state.Requirement) error {
	if err := state.CheckRequirements(rs); err != nil {
		return invalidRequest("requires: %v", err)
	}
	return nil
}

// route sets or clears Unroutable on the queued tasks among due (those
// with requirements, seen by the watchdog's look), each in a transaction
// of its own that decides again. It asks the store for the agents only
// when there is a task to route.
func (rl *rules) route(ctx context.Context, due []*state.Task, now time.Time) error {
	if len(due) == 0 {
		return nil
	}
	offers, err := rl.offers(ctx, now)
	if err != nil {
		return err
	}
	for _, seen := range due {
		if api.Unroutable(seen.Requires, offers) == seen.Unroutable {
			continue
		}
		err := rl.update(ctx, []string{seen.ID}, func(tx store.Tx) error {
			t := tx.Task(seen.ID)
			if t == nil || t.Phase != state.PhaseQueued {
				return nil
			}
			why := api.Unroutable(t.Requires, offers)
			if why == t.Unroutable {
				return nil
			}
			if why != "" {
				rl.log.Info("task unroutable", "task", t.ID, "why", why)
			} else {
				rl.log.Info("task routable again", "task", t.ID)
			}
			t.Unroutable = why
			tx.Save(t)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
