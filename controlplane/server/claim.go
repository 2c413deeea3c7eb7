package server

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
)

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
		return api.ClaimResponse{}, invalidRequest("request_id is over %d bytes", api.MaxIDBytes)
	}
	if len(req.Running) > api.MaxEventsPerBatch {
		return api.ClaimResponse{}, invalidRequest("%d running tasks in one claim; the limit is %d", len(req.Running), api.MaxEventsPerBatch)
	}
	for _, id := range req.Running {
		if len(id) > api.MaxIDBytes {
			return api.ClaimResponse{}, invalidRequest("a running task's id is over %d bytes", api.MaxIDBytes)
		}
	}
	if err := api.CheckRepos(req.Repos); err != nil {
		return api.ClaimResponse{}, invalidRequest("repos: %v", err)
	}
	if err := checkOffer(req.Capabilities, req.Labels); err != nil {
		return api.ClaimResponse{}, err
	}
	if req.WaitMS < 0 {
		return api.ClaimResponse{}, invalidRequest("wait_ms is %d: want 0 (answer at once) or more", req.WaitMS)
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
	inLine   bool          // in d.line; d.mu guards it
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
func (s *Server) StopWaits() { s.dispatch.stop() }

// stop ends every wait, and every later one before it starts.
func (d *dispatch) stop() {
	d.stopOnce.Do(func() { close(d.stopWaits) })
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
func (s *Server) ClaimsWaiting() int { return s.dispatch.claimsWaiting() }

func (d *dispatch) claimsWaiting() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting
}

// ClaimWaitEnds counts, since the server started, the claims that waited
// for work, by how their wait ended.
func (s *Server) ClaimWaitEnds() map[ClaimWaitEnd]uint64 { return s.dispatch.waitEndCounts() }

func (d *dispatch) waitEndCounts() map[ClaimWaitEnd]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := make(map[ClaimWaitEnd]uint64, len(d.waitEnds))
	maps.Copy(n, d.waitEnds)
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
