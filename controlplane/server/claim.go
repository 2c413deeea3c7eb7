package server

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// release gives claimed tasks an agent will not run back to the queue.
func (rl *rules) release(ctx context.Context, req api.ReleaseRequest) (struct{}, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return struct{}{}, err
	}
	if len(req.TaskIDs) > api.MaxEventsPerBatch {
		return struct{}{}, badRequest("%d tasks in one release; the limit is %d", len(req.TaskIDs), api.MaxEventsPerBatch)
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

// claim answers POST /v1/tasks/claim. With nothing claimable and a wait
// asked (wait_ms, capped at Options.MaxClaimWait), it holds the claim:
// each time a task may have become claimable (wakeClaims) it runs the
// same selection again, under the lock, as a claim arriving then would;
// it answers with the first grant, or empty when the wait ends, the
// agent hangs up or the server stops waits. A claim asked again with the
// same request id finds its grant in that selection, so a long poll whose
// answer was lost grants nothing twice.
//
// A claim that lists the tasks its agent runs (Running) is also the
// channel their orders come on: it is answered, with the orders and no
// grant, as soon as one of them is to stop (orders.go); with no room
// (Max 0) it is held for that alone.
func (d *dispatch) claim(ctx context.Context, req api.ClaimRequest) (api.ClaimResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.ClaimResponse{}, err
	}
	if len(req.RequestID) > api.MaxIDBytes {
		return api.ClaimResponse{}, badRequest("request_id is over %d bytes", api.MaxIDBytes)
	}
	if len(req.Running) > api.MaxEventsPerBatch {
		return api.ClaimResponse{}, badRequest("%d running tasks in one claim; the limit is %d", len(req.Running), api.MaxEventsPerBatch)
	}
	for _, id := range req.Running {
		if len(id) > api.MaxIDBytes {
			return api.ClaimResponse{}, badRequest("a running task's id is over %d bytes", api.MaxIDBytes)
		}
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.ClaimResponse{}, badRequest("repos: %v", err)
	}
	if err := checkOffer(req.Capabilities, req.Labels); err != nil {
		return api.ClaimResponse{}, err
	}
	if req.WaitMS < 0 {
		return api.ClaimResponse{}, badRequest("wait_ms is %d: want 0 (answer at once) or more", req.WaitMS)
	}
	wait := min(time.Duration(min(req.WaitMS, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond, d.opts.MaxClaimWait)
	takes := req.HealthGrade != health.Unavailable && req.Max > 0
	if !takes && len(req.Running) == 0 {
		wait = 0 // nothing could be granted, nor ordered: no use waiting
	}
	var (
		timer   *time.Timer
		w       *waiter // its place in the line while it waits
		held    *baton  // the wake it got: handed on when it takes nothing
		selects = true  // the round selects work; false: it looks for orders only
		ordered func()  // takes it out of the claims held for orders
	)
	defer func() {
		if w != nil {
			d.leaveLine(w)
		}
		if ordered != nil {
			ordered()
		}
	}()
	// done ends a wait the claim held: counted, and how it ended.
	done := func(end ClaimWaitEnd, counted bool) {
		if timer != nil {
			d.mu.Lock()
			d.waiting--
			if counted {
				d.countWaitEnd(end)
			}
			d.mu.Unlock()
		}
	}
	for {
		if timer != nil {
			// Woken as the agent hung up or the server stopped waits: no
			// grant to an agent that will not hear of it.
			select {
			case <-ctx.Done():
				return d.endWait(WaitGone, wait), nil
			case <-d.stopWaits:
				return d.endWait(WaitStopped, wait), nil
			default:
			}
		}
		if len(req.Running) > 0 {
			cancels, stops, err := d.rules.ordersOf(ctx, req.AgentID, req.Running)
			if err != nil || len(cancels)+len(stops) > 0 {
				done(WaitOrdered, err == nil)
				d.handOn(held) // the chance it was woken with goes on
				if err != nil {
					return api.ClaimResponse{}, storeErr("claim", err)
				}
				return api.ClaimResponse{Tasks: []api.Claimed{}, WaitMS: wait.Milliseconds(), CancelOrders: cancels, Stop: stops}, nil
			}
		}
		if selects {
			d.mu.Lock()
			if timer != nil {
				d.waitRounds++
			}
			if wait > 0 {
				// In line before it selects: a task queued while it selects
				// wakes it again.
				if w == nil {
					w = &waiter{wake: make(chan *baton, 1), orders: make(chan struct{}, 1), degraded: req.HealthGrade == health.Degraded}
				}
				if takes && !w.inLine {
					w.inLine = true
					d.line = append(d.line, w)
				}
			}
			d.mu.Unlock()
			resp, queued, err := d.rules.claimNow(ctx, req)
			if len(resp.Tasks) > 0 && held != nil && held.poll {
				// A look now and then found work nobody was told of: there
				// may be more.
				d.pollClaims()
			}
			if err != nil || len(resp.Tasks) > 0 || wait <= 0 {
				done(WaitGranted, err == nil)
				resp.WaitMS = wait.Milliseconds()
				return resp, err
			}
			// Woken for a task it could not take (another's repository, a
			// continue for another agent): the next in line gets the chance.
			// With no task queued at all (taken meanwhile, by a claim here
			// or on another replica), there is no chance to hand on.
			if queued > 0 {
				d.handOn(held)
			}
			held = nil
		}
		selects = true
		if timer == nil {
			idle(ctx) // waiting holds nothing: it does not count in flight
			timer = time.NewTimer(wait)
			defer timer.Stop()
			d.mu.Lock()
			d.waiting++
			d.mu.Unlock()
			if len(req.Running) > 0 {
				ordered = d.awaitOrders(req.AgentID, w)
				// A cancel between its look and now would have woken
				// nothing: look again.
				select {
				case w.orders <- struct{}{}:
				default:
				}
			}
		}
		var end ClaimWaitEnd
		select {
		case held = <-w.wake:
			continue
		case <-w.orders:
			selects = false
			continue
		case <-timer.C:
			end = WaitTimedOut
		case <-ctx.Done():
			end = WaitGone
		case <-d.stopWaits:
			end = WaitStopped
		}
		return d.endWait(end, wait), nil
	}
}

// The claims waiting for work stand in a line, first come first served. A
// task queued wakes the first (wakeClaims) with a baton: the chance to
// take it. A claim that takes nothing while tasks are queued hands the
// baton to the next in line, at most as many times as there were claims
// waiting when it was queued; so a task costs one selection when the
// first claim can take it, not one per waiting claim, and a task taken
// before the baton came costs one. A change that may make GUI tasks
// claimable for a degraded agent (an available agent gone) wakes the
// degraded claims (wakeDegraded).
//
// A chance can go astray: over a shared store another replica may queue
// a task without a word reaching this one, and a woken claim finds
// nothing queued while another selection holds the task, which that one
// then passes over. The server looks now and then (pollClaims, from
// watchClaims): the first claim in line runs its selection, and hands the
// chance on to at most pollReach more, not to every claim in line.
type waiter struct {
	wake     chan *baton   // its wake: a baton, or nil from wakeAll
	orders   chan struct{} // a task its agent runs may be to stop (orders.go)
	degraded bool          // the claim is a degraded agent's
	inLine   bool          // in s.line; mu guards it
}

// baton is one task's chance to be claimed by a waiting claim: left is how
// many more claims it may be handed to. A poll's baton is a look for work
// nobody heard of: the claim it grants to looks again for the next.
type baton struct {
	left int
	poll bool
}

// wakeClaims wakes the first n claims in line, one per task that may have
// become claimable (submitted, retried, continued, released, its lease
// lapsed).
func (d *dispatch) wakeClaims(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for range n {
		d.wakeFirst(&baton{left: len(d.line) - 1})
	}
}

// handOn gives b to the next claim in line, if it may go further.
func (d *dispatch) handOn(b *baton) {
	if b == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.left > 0 {
		b.left--
		d.wakeFirst(b)
	}
}

// wakeFirst takes the first claim out of the line and wakes it with b. mu
// is held.
func (d *dispatch) wakeFirst(b *baton) {
	if len(d.line) == 0 {
		return
	}
	w := d.line[0]
	d.line[0] = nil
	d.line = d.line[1:]
	w.inLine = false
	select {
	case w.wake <- b:
	default: // woken already, not yet back in line: it selects again anyway
	}
}

// wakeAll wakes every claim in line: the store may have missed telling
// of tasks queued elsewhere.
func (d *dispatch) wakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.line) > 0 {
		d.wakeFirst(nil)
	}
}

// wakeDegraded wakes every degraded agent's claim in line: with an
// available agent gone, the preference for GUI tasks may now let one of
// them take one. The others' chances did not change.
func (d *dispatch) wakeDegraded() {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.line[:0]
	for _, w := range d.line {
		if !w.degraded {
			kept = append(kept, w)
			continue
		}
		w.inLine = false
		select {
		case w.wake <- nil:
		default:
		}
	}
	clear(d.line[len(kept):])
	d.line = kept
}

// pollReach is how many claims after the first a look's chance may be
// handed to: a task none of them can take (a repository nobody waiting
// serves) would otherwise have every look walk the whole line. A claim
// further down that could take such a task finds it when it asks again,
// at the end of its wait.
const pollReach = 8

// pollClaims wakes the first claim in line to look for work queued where
// the server did not hear of it.
func (d *dispatch) pollClaims() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wakeFirst(&baton{left: min(len(d.line)-1, pollReach), poll: true})
}

// watchClaims has the claims waiting here look for work every so often
// (pollClaims) until ctx ends: every claimLook, or sharedClaimPoll over a
// shared store that cannot say when other replicas queue tasks.
func (d *dispatch) watchClaims(ctx context.Context, every time.Duration) {
	tick(ctx, every, d.pollClaims)
}

// leaveLine takes w out of the line when it is in it, and hands on a
// baton it was given and will not use.
func (d *dispatch) leaveLine(w *waiter) {
	d.mu.Lock()
	if w.inLine {
		w.inLine = false
		for i, x := range d.line {
			if x == w {
				d.line = slices.Delete(d.line, i, i+1)
				break
			}
		}
	}
	d.mu.Unlock()
	select {
	case b := <-w.wake:
		d.handOn(b)
	default:
	}
}

// endWait ends a claim held waiting, empty.
func (d *dispatch) endWait(end ClaimWaitEnd, wait time.Duration) api.ClaimResponse {
	d.mu.Lock()
	d.waiting--
	d.countWaitEnd(end)
	d.mu.Unlock()
	return api.ClaimResponse{Tasks: []api.Claimed{}, WaitMS: wait.Milliseconds()}
}

// countWaitEnd counts a waiting claim's end. mu is held.
func (d *dispatch) countWaitEnd(end ClaimWaitEnd) {
	if d.waitEnds == nil {
		d.waitEnds = map[ClaimWaitEnd]uint64{}
	}
	d.waitEnds[end]++
}

// StopWaits answers every waiting claim at once, empty, and every later
// claim without waiting: for a server about to stop, whose HTTP server's
// shutdown would otherwise wait for them. It is safe to call again.
func (s *Server) StopWaits() {
	s.dispatch.stopOnce.Do(func() { close(s.dispatch.stopWaits) })
}

// ClaimWaitEnd is how a claim held waiting for work ended.
type ClaimWaitEnd string

// How waiting claims end.
const (
	WaitGranted  ClaimWaitEnd = "granted"   // a task became claimable and was granted
	WaitTimedOut ClaimWaitEnd = "timed_out" // the wait ended with nothing to grant
	WaitGone     ClaimWaitEnd = "gone"      // the agent hung up (it is stopping, or its request timed out)
	WaitStopped  ClaimWaitEnd = "stopped"   // the server stopped waits (StopWaits)
	WaitOrdered  ClaimWaitEnd = "ordered"   // a task its agent runs was to stop: answered with the orders
)

// ClaimsWaiting is how many claims are held waiting for work now.
func (s *Server) ClaimsWaiting() int {
	s.dispatch.mu.Lock()
	defer s.dispatch.mu.Unlock()
	return s.dispatch.waiting
}

// ClaimWaitEnds counts, since the server started, the claims that waited
// for work, by how their wait ended.
func (s *Server) ClaimWaitEnds() map[ClaimWaitEnd]uint64 {
	s.dispatch.mu.Lock()
	defer s.dispatch.mu.Unlock()
	n := make(map[ClaimWaitEnd]uint64, len(s.dispatch.waitEnds))
	for k, v := range s.dispatch.waitEnds {
		n[k] = v
	}
	return n
}

// How often the claims waiting for work look again (watchClaims): often
// when other replicas share the store and it cannot say when they queue a
// task; every second when it says so (a word sent after the commit may be
// lost with its replica: the look is what keeps a task queued elsewhere
// seen within a second or so; a look at a queue the store knows empty
// costs nothing); otherwise now and then, in case a woken claim found its
// task held by another selection that then passed it over: it saw
// nothing queued, and handed no chance on.
const (
	sharedClaimPoll   = 500 * time.Millisecond
	listenedClaimPoll = time.Second
	claimLook         = 5 * time.Second
)

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
		return badRequest("capabilities: %v", err)
	}
	if err := api.CheckLabels(labels); err != nil {
		return badRequest("labels: %v", err)
	}
	return nil
}
