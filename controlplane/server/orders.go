package server

import (
	"context"
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Orders: what the control plane tells an agent to stop. A task an agent
// runs is stopped by a cancel order, which says the phase it ends in and
// who ended it and why, so that the agent's view and the control plane's
// agree; or by a stop order when its tree passed its budget
// (treebudget.go). Orders reach the agent at once on the claim it holds
// open (claim.go: the claim lists the tasks it runs, and is answered as
// soon as one is to stop), and in every heartbeat's answer and every
// report's answer besides.

// cancelOrderOf is the order that stops task t (named id; nil when the
// control plane has no such task), which agentID says it runs, and
// whether there is one: the task is unknown here, over, back in the
// queue, another's, or someone asked to cancel it. A task the control
// plane ended (its watchdog) ends on the agent in the same phase with
// the same reason.
func cancelOrderOf(t *state.Task, id, agentID string) (api.CancelOrder, bool) {
	o := api.CancelOrder{TaskID: id, Phase: state.PhaseCancelled}
	switch {
	case t == nil:
		o.Reason = "stopped: the control plane has no such task"
	case t.Phase.Terminal():
		if t.Phase != state.PhaseCompleted {
			o.Phase = t.Phase
		}
		o.Reason, o.At = t.PhaseReason, t.CancelAt
		if o.Reason == "" {
			o.Reason = fmt.Sprintf("stopped: the control plane has it %s", t.Phase)
		}
		if t.CancelRequested {
			o.Reason = t.CancelReason
		}
	case t.Phase == state.PhaseQueued:
		o.Reason = "stopped: the control plane queued the task again (its lease lapsed)"
	case t.Lease != nil && t.Lease.AgentID != agentID:
		o.Reason = "stopped: the control plane gave the task to agent " + t.Lease.AgentID
	case t.CancelRequested:
		o.Reason, o.At = t.CancelReason, t.CancelAt
	default:
		return o, false
	}
	return o, true
}

// ordersOf are the orders for the tasks agentID says it runs (running),
// as a claim held open for them looks them up.
func (rl *rules) ordersOf(ctx context.Context, agentID string, running []string) ([]api.CancelOrder, []api.StopOrder, error) {
	var (
		cancels []api.CancelOrder
		stops   []api.StopOrder
	)
	for _, id := range running {
		t, err := rl.store.Task(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if t != nil && t.Lease != nil && t.Lease.AgentID == agentID {
			if o, ok := stopOrder(t); ok {
				stops = append(stops, o)
				continue
			}
		}
		if o, ok := cancelOrderOf(t, id, agentID); ok {
			cancels = append(cancels, o)
		}
	}
	return cancels, stops, nil
}

// wakeAgents wakes the claims the agents named hold open for orders: a
// task one of them runs is to stop.
func (d *dispatch) wakeAgents(agentIDs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range agentIDs {
		for _, w := range d.ordering[id] {
			select {
			case w.orders <- struct{}{}:
			default:
			}
		}
	}
}

// wakeAllOrders wakes every claim held open for orders: over a shared
// store, another replica may have cancelled a task without a word
// reaching this one.
func (d *dispatch) wakeAllOrders() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ws := range d.ordering {
		for _, w := range ws {
			select {
			case w.orders <- struct{}{}:
			default:
			}
		}
	}
}

// awaitOrders puts w among the claims agentID holds open for orders;
// the function it returns takes it out.
func (d *dispatch) awaitOrders(agentID string, w *waiter) func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ordering == nil {
		d.ordering = map[string][]*waiter{}
	}
	d.ordering[agentID] = append(d.ordering[agentID], w)
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		ws := d.ordering[agentID]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(d.ordering, agentID)
		} else {
			d.ordering[agentID] = ws
		}
	}
}

// ordersPoll is how often the claims held open for orders look again
// over a shared store, where a cancel on another replica wakes nothing
// here: well within the second a cancel takes to reach its agent.
const ordersPoll = sharedClaimPoll
