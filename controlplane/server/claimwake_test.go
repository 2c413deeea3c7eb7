package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// What wakes the claims waiting for work, and how many selections a wake
// costs. The tests over PostgreSQL set the looks now and then
// (watchClaims) an hour apart, unless they are what a test is about: the
// counts are then the wakes' alone.

// lineLen is how many claims stand in line waiting for a wake.
func (e *env) lineLen() int {
	e.srv.dispatch.mu.Lock()
	defer e.srv.dispatch.mu.Unlock()
	return len(e.srv.dispatch.line)
}

// untilLine returns once n claims stand in line: each claim woken before
// is back in line, having run its selection again (waitRounds counts it
// as it joins).
func (e *env) untilLine(n int) {
	e.t.Helper()
	testkit.WaitFor(e.t, fmt.Sprintf("%d claims in line", n), func() bool { return e.lineLen() == n })
}

// waitAll has the agents ids claim, each waiting an hour with grade, in
// this order in line, and returns where their answers come.
func (e *env) waitAll(ctx context.Context, grade health.Grade, ids ...string) <-chan answer {
	e.t.Helper()
	answers := make(chan answer, len(ids))
	for _, id := range ids {
		// Counted before the claim is sent: one already waiting when
		// counted after would be waited for again, for ever.
		want := e.srv.ClaimsWaiting() + 1
		got := e.claimAsync(ctx, e.agent(id), waitReq(id, grade, time.Hour))
		go func() { answers <- <-got }()
		e.untilWaiting(want)
	}
	return answers
}

// agentIDs are n agent ids starting with prefix.
func agentIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return ids
}

// gate is a point a selection stops at: it closes reached there, goes on
// once open is closed, and closes done when its selection returned.
type gate struct{ reached, open, done chan struct{} }

func newGate() *gate {
	return &gate{reached: make(chan struct{}), open: make(chan struct{}), done: make(chan struct{})}
}

func (g *gate) stop() {
	close(g.reached)
	<-g.open
}

// gatedStore stops the next selection (Claim) at a gate a test set:
// before it runs (before), or once it was offered its first task, which
// it then holds (inside). Fixed points for a test to act at.
type gatedStore struct {
	store.Store
	before, inside atomic.Pointer[gate]
}

func (g *gatedStore) Claim(ctx context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	if in := g.inside.Swap(nil); in != nil {
		defer close(in.done)
		offer, first := fn, true
		fn = func(tx store.Tx, t *state.Task) (bool, error) {
			if first {
				first = false
				in.stop()
			}
			return offer(tx, t)
		}
	}
	if b := g.before.Swap(nil); b != nil {
		defer close(b.done)
		b.stop()
		// The claim's agent may have hung up meanwhile: the selection
		// still runs, as it would have had it hung up a moment later.
		ctx = context.WithoutCancel(ctx)
	}
	return g.Store.Claim(ctx, fn)
}

// ownStore opens the store an env of dir runs on when the test gives
// the server its store: a file store in dir, or the test's PostgreSQL
// database.
func ownStore(t *testing.T, dir string, clk *clock) store.Store {
	t.Helper()
	if onPostgres() {
		return pgStore(t, dir)
	}
	fs, err := filestore.Open(dir, filestore.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	if err := fs.Recover(func(*state.Task, []filestore.Missed) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return fs
}

// A task queued while claims wait, and taken by a claim that does not
// wait before the claim it woke selects (an agent's claim here, or any
// claim on another replica), costs the woken claim's one selection: it
// finds nothing queued and drops the baton, where it handed it down the
// whole line, one selection per waiting claim.
//
// The race is made to go one way: the store holds the woken claim's
// selection until the other claim took the task. Then the woken claim's
// agent hangs up, so that its wait ends right after that selection (and
// after the hand-on that came with it): from then on, a claim woken by
// a hand-on is out of the line until it counts its selection, and the
// counts are final.
func TestATaskTakenBeforeTheWokenClaimSelectsCostsOneSelection(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	gs := &gatedStore{Store: ownStore(t, dir, clk)}
	e := newEnvOpts(t, dir, clk, Options{Store: gs, claimPoll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstCtx, hangUp := context.WithCancel(ctx)
	const n = 8
	first := e.waitAll(firstCtx, health.Available, "first")
	e.waitAll(ctx, health.Available, agentIDs("ag", n-1)...)

	before := e.rounds()
	g := newGate()
	gs.before.Store(g)
	task := e.submit("taken at once", "any")
	<-g.reached // the first claim, woken, selects
	if got := e.claim("poller", health.Available, 1); len(got) != 1 || got[0].Task.ID != task.ID {
		t.Fatalf("the claim that does not wait got %v, want %s", ids(got), task.ID)
	}
	hangUp()
	close(g.open)
	if a := <-first; a.err == nil {
		t.Fatalf("the first claim was answered %v, want it cancelled", ids(a.resp.Tasks))
	}
	testkit.WaitFor(t, "the hung-up claim's wait to end", func() bool { return e.srv.ClaimWaitEnds()[WaitGone] == 1 })
	e.srv.dispatch.mu.Lock()
	rounds, line := e.srv.dispatch.waitRounds-before, len(e.srv.dispatch.line)
	e.srv.dispatch.mu.Unlock()
	if rounds != 1 || line != n-1 {
		t.Errorf("a task taken before the woken claim selected cost %d selections by waiting claims, %d claims in line; want 1 and %d",
			rounds, line, n-1)
	}
}

// A new agent's first heartbeat wakes no waiting claim: an agent coming
// makes no task claimable for another. A task submitted after it costs
// the one selection of the claim that takes it.
func TestANewAgentsFirstHeartbeatWakesNoWaitingClaim(t *testing.T) {
	t.Parallel()
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{claimPoll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 4
	answers := e.waitAll(ctx, health.Available, agentIDs("ag", n)...)

	before := e.rounds()
	if _, err := e.agent("newcomer").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "newcomer", Health: api.Health{Grade: health.Available}}); err != nil {
		t.Fatal(err)
	}
	task := e.submit("after the heartbeat", "any")
	a := <-answers
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != task.ID {
		t.Fatalf("a waiting claim got %v (%v), want %s", ids(a.resp.Tasks), a.err, task.ID)
	}
	e.untilLine(n - 1)
	if r := e.rounds() - before; r != 1 {
		t.Errorf("a new agent's heartbeat and a task cost %d selections by waiting claims, want 1 (the task's)", r)
	}
}

// An available agent that is no more (unavailable, degraded or offline)
// wakes the degraded agents' waiting claims, for a GUI task may now be
// theirs, and not the available ones', whose chances did not change. One
// that stays available wakes none.
func TestAnAvailableAgentGoneWakesOnlyDegradedClaims(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		req   api.HeartbeatRequest
		woken uint64
	}{
		{"unavailable", api.HeartbeatRequest{Health: api.Health{Grade: health.Unavailable}}, 1},
		{"degraded", api.HeartbeatRequest{Health: api.Health{Grade: health.Degraded}}, 1},
		{"offline", api.HeartbeatRequest{Health: api.Health{Grade: health.Available}, State: api.AgentOffline}, 1},
		{"still available", api.HeartbeatRequest{Health: api.Health{Grade: health.Available}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{claimPoll: time.Hour})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := e.agent("gui").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "gui", Health: api.Health{Grade: health.Available}}); err != nil {
				t.Fatal(err)
			}
			e.waitAll(ctx, health.Available, "avail-1")
			e.waitAll(ctx, health.Degraded, "degraded")
			e.waitAll(ctx, health.Available, "avail-2")

			before := e.rounds()
			tc.req.AgentID = "gui"
			if _, err := e.agent("gui").Heartbeat(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
			// The heartbeat's wakes took their claims out of line before
			// it was answered.
			e.untilLine(3)
			if r := e.rounds() - before; r != tc.woken {
				t.Errorf("the heartbeat cost %d selections by waiting claims, want %d", r, tc.woken)
			}
		})
	}
}

// The claims waiting for work look now and then for tasks nobody told
// them of (another replica's, or one a selection held when they were
// woken), once per look for the whole line, over either store: the
// selections they run grow by about one per look, not one per waiting
// claim. (The ticks are counted from the time passed, an upper bound; no
// time limit is asserted.)
func TestWaitingClaimsLookOncePerPoll(t *testing.T) {
	t.Parallel()
	const every = 20 * time.Millisecond
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{claimPoll: every})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 8
	e.waitAll(ctx, health.Available, agentIDs("ag", n)...)

	before, start := e.rounds(), time.Now()
	e.untilRoundsPast(before + 5)
	r := e.rounds() - before
	polls := uint64(time.Since(start)/every) + 1 // the most ticks since start
	if r > polls+2 {
		t.Errorf("%d claims waiting ran %d selections in at most %d looks, want about one a look", n, r, polls)
	}
}

// Over PostgreSQL, tasks another replica queued whose word was lost (the
// listener is stopped here) are found by the next look (what watchClaims
// does at each tick): the claim it wakes takes one and has the next in
// line look again, and so on, so that one look grants them all.
func TestALookFindsTasksQueuedElsewhereUnheard(t *testing.T) {
	t.Parallel()
	if !onPostgres() {
		t.Skip("replicas share a PostgreSQL store")
	}
	dir, clk := t.TempDir(), &clock{now: t0}
	one := newEnvOpts(t, dir, clk, Options{MaxClaimWait: 10 * time.Second, claimPoll: time.Hour})
	other := newEnvOpts(t, dir, clk, Options{claimPoll: time.Hour})
	one.srv.stopListen()
	one.srv.listening.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 3
	answers := one.waitAll(ctx, health.Available, agentIDs("ag", n)...)
	queued := map[string]bool{}
	for i := range n {
		queued[other.submit(fmt.Sprintf("queued elsewhere %d", i), "any").ID] = true
	}

	one.srv.dispatch.pollClaims()
	for range n {
		a := <-answers
		if a.err != nil || len(a.resp.Tasks) != 1 || !queued[a.resp.Tasks[0].Task.ID] {
			t.Fatalf("a waiting claim got %v (%v), want one of the tasks queued elsewhere", ids(a.resp.Tasks), a.err)
		}
		delete(queued, a.resp.Tasks[0].Task.ID)
	}
	if r := one.rounds(); r != n {
		t.Errorf("the look granted %d tasks in %d selections, want %d", n, r, n)
	}
}

// A woken claim that finds no queued task because another selection
// holds it (a claim passing over it: a selection skips the tasks another
// holds) drops its chance, and the claim further down the line that can
// take it does not hear of the task then. The look now and then
// (watchClaims, every store's) finds it: the task still reaches that
// claim, a look later (claimLook in service), not at the end of its
// wait. Without the look the test fails.
func TestATaskAnotherSelectionHeldStillReachesTheClaimThatCanTakeIt(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	gs := &gatedStore{Store: ownStore(t, dir, clk)}
	// The look is run here by hand, once the scenario is set: run every
	// 50 ms by watchClaims, a loaded machine had it run before (the site
	// agent's claim took the task first, the passer's selection found
	// none, and the test hung). TestWaitingClaimsLookOncePerPoll checks
	// that watchClaims looks.
	e := newEnvOpts(t, dir, clk, Options{Store: gs, MaxClaimWait: time.Minute, claimPoll: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.heartbeatWith("site-agent", "site")
	e.waitAll(ctx, health.Available, "ag-00", "ag-01")
	site := e.claimAsync(ctx, e.agent("site-agent"), waitReq("site-agent", health.Available, time.Hour, "site"))
	e.untilWaiting(3)

	woken := newGate()
	gs.before.Store(woken)
	v, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "on site", Repo: "site"})
	must(t, err)
	<-woken.reached // ag-00, woken, is about to select
	passing := newGate()
	gs.inside.Store(passing)
	passer := e.claimAsync(ctx, e.agent("passer"), api.ClaimRequest{AgentID: "passer", Max: 1, HealthGrade: health.Available})
	<-passing.reached // the passer's selection holds the task
	close(woken.open)
	<-woken.done // ag-00 selected, skipping the task held
	close(passing.open)
	if a := <-passer; a.err != nil || len(a.resp.Tasks) != 0 {
		t.Fatalf("the passer's claim got %v (%v), want nothing", ids(a.resp.Tasks), a.err)
	}
	e.srv.dispatch.pollClaims() // the look
	if a := <-site; a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != v.ID {
		t.Fatalf("the site agent's waiting claim got %v (%v), want %s", ids(a.resp.Tasks), a.err, v.ID)
	}
}

// A look's chance goes to the first claim in line and at most pollReach
// more, not down the whole line: with a task queued that none of the
// claims waiting can take, a look costs at most 1+pollReach selections,
// however long the line. (The baton's reach is read off the first
// waiter's wake; handOn spends one of it per claim, as
// TestATaskWakesOneWaitingClaimAndIsHandedDownTheLine shows.)
func TestALookIsHandedOnToAFewClaimsOnly(t *testing.T) {
	t.Parallel()
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{claimPoll: time.Hour})
	for _, n := range []int{1, pollReach, 3 * pollReach} {
		waiters := make([]*waiter, n)
		e.srv.dispatch.mu.Lock()
		for i := range waiters {
			waiters[i] = &waiter{wake: make(chan *baton, 1), inLine: true}
			e.srv.dispatch.line = append(e.srv.dispatch.line, waiters[i])
		}
		e.srv.dispatch.mu.Unlock()
		e.srv.dispatch.pollClaims()
		b := <-waiters[0].wake
		if want := min(n-1, pollReach); b == nil || !b.poll || b.left != want {
			t.Errorf("a look with %d claims in line: baton %+v, want a look's with %d left", n, b, want)
		}
		e.srv.dispatch.mu.Lock()
		e.srv.dispatch.line = nil
		e.srv.dispatch.mu.Unlock()
	}
}
