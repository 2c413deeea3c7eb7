package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// answer is a claim's answer, as a goroutine that waited for it got it.
type answer struct {
	resp api.ClaimResponse
	err  error
}

// claimAsync sends req as its agent and returns where its answer comes.
func (e *env) claimAsync(ctx context.Context, c *controlplane.Client, req api.ClaimRequest) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		resp, err := c.Claim(ctx, req)
		out <- answer{resp, err}
	}()
	return out
}

// untilWaiting returns once n claims are held waiting for work.
func (e *env) untilWaiting(n int) {
	e.t.Helper()
	testkit.WaitFor(e.t, fmt.Sprintf("%d claims waiting", n), func() bool { return e.srv.ClaimsWaiting() == n })
}

// rounds is how many selections waiting claims have run again.
func (e *env) rounds() uint64 {
	e.srv.dispatch.mu.Lock()
	defer e.srv.dispatch.mu.Unlock()
	return e.srv.dispatch.waitRounds
}

// untilRoundsPast returns once waiting claims ran more than n selections
// again: a wake has been seen.
func (e *env) untilRoundsPast(n uint64) {
	e.t.Helper()
	testkit.WaitFor(e.t, fmt.Sprintf("more than %d selections by waiting claims", n), func() bool { return e.rounds() > n })
}

func waitReq(agent string, grade health.Grade, wait time.Duration, repos ...string) api.ClaimRequest {
	return api.ClaimRequest{AgentID: agent, Max: 1, HealthGrade: grade, WaitMS: wait.Milliseconds(), Repos: repos}
}

// A claim with nothing to take waits, and is answered with the task
// submitted meanwhile: one request, granted when the task arrived. The
// answer says the wait applied, capped at api.MaxClaimWait.
func TestWaitingClaimIsGrantedWhenATaskIsSubmitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	got := e.claimAsync(context.Background(), e.agent("a"), waitReq("a", health.Available, time.Hour))
	e.untilWaiting(1)
	task := e.submit("hello", "any")
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != task.ID {
		t.Fatalf("granted %v, want %s", ids(a.resp.Tasks), task.ID)
	}
	if want := api.MaxClaimWait.Milliseconds(); a.resp.WaitMS != want {
		t.Errorf("wait_ms answered %d, want the cap %d", a.resp.WaitMS, want)
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitGranted] != 1 || len(ends) != 1 {
		t.Errorf("waits ended %v, want one granted", ends)
	}
	if n := e.srv.ClaimsWaiting(); n != 0 {
		t.Errorf("%d claims still waiting", n)
	}
}

// The wait is capped: a claim asking an hour is answered, empty, when the
// server's cap ends it, and says so. A claim asking no wait is answered at
// once and says none.
func TestClaimWaitIsCapped(t *testing.T) {
	t.Parallel()
	const limit = 200 * time.Millisecond
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{MaxClaimWait: limit})
	start := time.Now()
	resp, err := e.agent("a").Claim(context.Background(), waitReq("a", health.Available, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < limit {
		t.Errorf("answered after %v, before the wait of %v ended", took, limit)
	}
	if len(resp.Tasks) != 0 || resp.WaitMS != limit.Milliseconds() {
		t.Errorf("answer %+v, want no task and wait_ms %d", resp, limit.Milliseconds())
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitTimedOut] != 1 || len(ends) != 1 {
		t.Errorf("waits ended %v, want one timed out", ends)
	}
	resp, err = e.agent("a").Claim(context.Background(), waitReq("a", health.Available, 0))
	if err != nil || len(resp.Tasks) != 0 || resp.WaitMS != 0 {
		t.Errorf("a claim with no wait: %+v, %v; want an empty answer without wait_ms", resp, err)
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitTimedOut] != 1 || len(ends) != 1 {
		t.Errorf("waits ended %v: a claim with no wait waited", ends)
	}
}

// A claim that could take nothing does not wait: max 0, or an agent that
// says it is unavailable.
func TestClaimThatCanTakeNothingDoesNotWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	for _, req := range []api.ClaimRequest{
		{AgentID: "a", Max: 0, HealthGrade: health.Available, WaitMS: time.Hour.Milliseconds()},
		{AgentID: "a", Max: 1, HealthGrade: health.Unavailable, WaitMS: time.Hour.Milliseconds()},
	} {
		resp, err := e.agent("a").Claim(context.Background(), req)
		if err != nil || len(resp.Tasks) != 0 || resp.WaitMS != 0 {
			t.Errorf("claim %+v: %+v, %v; want an empty answer at once", req, resp, err)
		}
	}
	if ends := e.srv.ClaimWaitEnds(); len(ends) != 0 {
		t.Errorf("waits ended %v, want none", ends)
	}
}

// A negative wait is refused with one line saying why.
func TestNegativeClaimWaitIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	_, err := e.agent("a").Claim(context.Background(), api.ClaimRequest{AgentID: "a", Max: 1, HealthGrade: health.Available, WaitMS: -5})
	var ae *controlplane.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "wait_ms is -5") || strings.Contains(ae.Message, "\n") {
		t.Fatalf("err %v, want 400 naming wait_ms on one line", err)
	}
}

// A waiting claim runs the same selection as a claim arriving then: a
// task for a repository goes only to the waiter that serves it, and a GUI
// task passes a degraded waiter while an available agent is online, and
// goes to it once that agent becomes unavailable (its heartbeat wakes the
// waiters).
func TestWaitingClaimsFollowTheRoutingRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.heartbeatWith("site-agent", "site")
	if _, err := e.agent("gui-agent").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "gui-agent", Health: api.Health{Grade: health.Available}}); err != nil {
		t.Fatal(err)
	}
	plain := e.claimAsync(ctx, e.agent("plain"), waitReq("plain", health.Available, time.Hour))
	site := e.claimAsync(ctx, e.agent("site-agent"), waitReq("site-agent", health.Available, time.Hour, "site"))
	e.untilWaiting(2)

	v, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix the site", Repo: "site"})
	must(t, err)
	a := <-site
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != v.ID {
		t.Fatalf("the site agent's claim: %v %v, want %s", ids(a.resp.Tasks), a.err, v.ID)
	}
	e.untilWaiting(1) // plain is still waiting

	// A degraded waiter passes a GUI task while gui-agent is online and
	// available; the plain waiter, available, takes it.
	cancel()
	if a := <-plain; a.err == nil {
		t.Fatalf("the plain claim was answered %v, want it cancelled", ids(a.resp.Tasks))
	}
	e.untilWaiting(0)
	ctx = context.Background()
	degraded := e.claimAsync(ctx, e.agent("plain"), waitReq("plain", health.Degraded, time.Hour))
	e.untilWaiting(1)
	before := e.rounds()
	gui := e.submit("click it", api.PreferGUI)
	e.untilRoundsPast(before)
	if got, err := e.client.Task(ctx, gui.ID); err != nil || got.Phase != state.PhaseQueued {
		t.Fatalf("the GUI task with an available agent online: %v %v, want it queued for that agent", got.Phase, err)
	}
	if _, err := e.agent("gui-agent").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "gui-agent", Health: api.Health{Grade: health.Unavailable}}); err != nil {
		t.Fatal(err)
	}
	a = <-degraded
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != gui.ID {
		t.Fatalf("the degraded claim once no available agent is online: %v %v, want %s", ids(a.resp.Tasks), a.err, gui.ID)
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitGranted] != 2 || ends[WaitGone] != 1 {
		t.Errorf("waits ended %v, want 2 granted and 1 gone", ends)
	}
}

// The answer of a long poll that granted a task is lost on the way. Asked
// again with the same request id, the claim gets the same grant (the same
// lease), not the task queued since: nothing is granted twice.
func TestLostLongPollAnswerIsGrantedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	var (
		mu   sync.Mutex
		lost bool
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/tasks/claim" {
			e.srv.Handler().ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, r) // the control plane acts
		mu.Lock()
		drop := !lost && strings.Contains(rec.Body.String(), `"lease"`)
		lost = lost || drop
		mu.Unlock()
		if drop {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // the answer is lost
			}
			return
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer proxy.Close()
	agent, err := controlplane.NewClient(proxy.URL, regToken, controlplane.ClientOptions{Tries: 1, AgentID: "a"})
	must(t, err)
	req := waitReq("a", health.Available, time.Hour)
	req.RequestID = "claim-lost"
	got := e.claimAsync(context.Background(), agent, req)
	e.untilWaiting(1)
	first := e.submit("first", "any")
	if a := <-got; a.err == nil {
		t.Fatalf("the first answer came through (%v): the test lost nothing", ids(a.resp.Tasks))
	}
	granted, err := e.client.Task(context.Background(), first.ID)
	if err != nil || granted.Lease == nil || granted.Phase != state.PhaseClaimed {
		t.Fatalf("the task whose grant was lost: %+v %v, want it claimed", granted.Lease, err)
	}
	second := e.submit("second", "any")
	resp, err := agent.Claim(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 1 || resp.Tasks[0].Task.ID != first.ID || resp.Tasks[0].Lease.ID != granted.Lease.ID {
		t.Fatalf("asked again: %v, want %s/%s", ids(resp.Tasks), first.ID, granted.Lease.ID)
	}
	if v, err := e.client.Task(context.Background(), second.ID); err != nil || v.Phase != state.PhaseQueued {
		t.Errorf("the task submitted since: %v %v, want it still queued", v.Phase, err)
	}
}

// StopWaits answers a waiting claim at once, empty, and later claims do
// not wait: a server that stops is not held by its agents' long polls.
func TestStopWaitsAnswersWaitingClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	got := e.claimAsync(context.Background(), e.agent("a"), waitReq("a", health.Available, time.Hour))
	e.untilWaiting(1)
	e.srv.StopWaits()
	if a := <-got; a.err != nil || len(a.resp.Tasks) != 0 {
		t.Fatalf("the waiting claim: %v %v, want an empty answer", ids(a.resp.Tasks), a.err)
	}
	e.srv.StopWaits() // again: nothing happens
	if _, err := e.agent("a").Claim(context.Background(), waitReq("a", health.Available, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ends := e.srv.ClaimWaitEnds(); ends[WaitStopped] != 2 || len(ends) != 1 {
		t.Errorf("waits ended %v, want 2 stopped", ends)
	}
}

// A task submitted to many waiting claims wakes one, which takes it: one
// selection, not one per waiting claim. A task only the last in line can
// take (its repository) is handed down the line to it, each claim that
// cannot take it passing it on, and no further.
func TestATaskWakesOneWaitingClaimAndIsHandedDownTheLine(t *testing.T) {
	t.Parallel()
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{claimPoll: time.Hour}) // the wakes alone, over PostgreSQL too
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 12
	answers := make(chan answer, n)
	reposOf := func(i int) []string {
		if i == n-1 {
			return []string{"site"} // the last in line alone serves site
		}
		return nil
	}
	for i := range n {
		// Heartbeats first: the control plane knows the repository.
		id := fmt.Sprintf("ag-%02d", i)
		if _, err := e.agent(id).Heartbeat(ctx, api.HeartbeatRequest{AgentID: id, Repos: reposOf(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id, repos := fmt.Sprintf("ag-%02d", i), reposOf(i)
		got := e.claimAsync(ctx, e.agent(id), waitReq(id, health.Available, time.Hour, repos...))
		go func() { answers <- <-got }()
		e.untilWaiting(i + 1) // in line in this order
	}

	before := e.rounds()
	e.submit("anyone", "any")
	first := <-answers
	if first.err != nil || len(first.resp.Tasks) != 1 {
		t.Fatalf("the first answer: %+v %v", first.resp, first.err)
	}
	e.untilWaiting(n - 1)
	if r := e.rounds() - before; r != 1 {
		t.Errorf("a task for anyone cost %d selections by waiting claims, want 1", r)
	}

	before = e.rounds()
	v, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "on site", Repo: "site"})
	if err != nil {
		t.Fatal(err)
	}
	got := <-answers
	if got.err != nil || len(got.resp.Tasks) != 1 || got.resp.Tasks[0].Task.ID != v.ID || got.resp.Tasks[0].Lease.AgentID != fmt.Sprintf("ag-%02d", n-1) {
		t.Fatalf("the site task went to %+v (%v), want ag-%02d", got.resp.Tasks, got.err, n-1)
	}
	e.untilWaiting(n - 2)
	if r := e.rounds() - before; r > n-1 {
		t.Errorf("the site task cost %d selections, want at most the %d claims in line", r, n-1)
	}
}

// Over PostgreSQL, a claim waiting on one replica hears of a task queued
// through another (the NOTIFY its notifier sends after the commit) and
// takes it: with the looks now and then an hour apart, a lost word would
// end the claim empty.
func TestAClaimWaitingOnOneReplicaHearsOfATaskQueuedOnAnother(t *testing.T) {
	t.Parallel()
	if !onPostgres() {
		t.Skip("replicas share a PostgreSQL store")
	}
	dir, clk := t.TempDir(), &clock{now: t0}
	one := newEnvOpts(t, dir, clk, Options{MaxClaimWait: 3 * time.Second, claimPoll: time.Hour})
	other := newEnvOpts(t, dir, clk, Options{})
	got := one.claimAsync(context.Background(), one.agent("a"), waitReq("a", health.Available, time.Hour))
	one.untilWaiting(1)
	task := other.submit("queued on the other replica", "any")
	a := <-got
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != task.ID {
		t.Fatalf("the waiting claim got %v (%v), want %s", ids(a.resp.Tasks), a.err, task.ID)
	}
	if ends := one.srv.ClaimWaitEnds(); ends[WaitGranted] != 1 {
		t.Errorf("waits ended %v, want one granted", ends)
	}
}
