package server

import (
	"context"
	"github.com/edgeagent/agent/internal/testkit"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// saturate holds the store as a burst of slow work would: task id locked
// by a transaction that waits, and, over a store with a pool, every
// other connection that other work may take held too. It returns once
// they hold, and a function that lets them go.
func saturate(t *testing.T, st store.Store, id string) (release func()) {
	t.Helper()
	holders := 1
	if p, ok := st.(store.PoolReporter); ok {
		f := p.Pool()
		holders = f.Max - f.Reserved
	}
	hold := make(chan struct{})
	var held sync.WaitGroup
	var wg sync.WaitGroup
	held.Add(holders)
	for i := range holders {
		var ids []string
		if i == 0 {
			ids = []string{id}
		}
		wg.Go(func() {
			err := st.Update(context.Background(), ids, func(store.Tx) error {
				held.Done()
				<-hold
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	held.Wait()
	var once sync.Once
	release = func() { once.Do(func() { close(hold); wg.Wait() }) }
	t.Cleanup(release)
	return release
}

// Under a saturated store, an agent's heartbeats are answered while its
// event batches are shed, 503 with Retry-After, at once; sent again once
// the store is free, every event is accepted.
func TestHeartbeatsAreAnsweredWhileEventBatchesAreShed(t *testing.T) {
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{MaxInFlight: map[RequestKind]int{KindEvents: 1}})
	ctx := context.Background()
	e.submit("busy work", "")
	e.submit("the agent's task", "")
	for _, id := range []string{"busy", "ag-1"} {
		if _, err := e.agent(id).Heartbeat(ctx, api.HeartbeatRequest{AgentID: id}); err != nil {
			t.Fatal(err)
		}
	}
	busy := e.claim("busy", health.Available, 1)[0]
	mine := e.claim("ag-1", health.Available, 1)[0]
	release := saturate(t, e.srv.Store(), busy.Task.ID)
	// A batch that waits for the store: the one the bound allows.
	waited := make(chan error, 1)
	go func() {
		_, err := e.agent("busy").SendEvents(ctx, "busy", runToCompletion(busy)[:1])
		waited <- err
	}()
	testkit.WaitFor(t, "an event batch in flight", func() bool { return e.srv.InFlightByKind()["events"] == 1 })

	_, err := e.agent("ag-1").SendEvents(ctx, "ag-1", runToCompletion(mine))
	wait, shed := controlplane.Shed(err)
	if !shed || statusOf(err) != http.StatusServiceUnavailable || wait < time.Second || wait > 3*time.Second/2 {
		t.Fatalf("an event batch past the bound: %v (shed %v, wait %v), want 503 with Retry-After 1 s", err, shed, wait)
	}
	resp, err := e.agent("ag-1").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag-1", Running: []api.RunningTask{{TaskID: mine.Task.ID}}})
	if err != nil {
		t.Fatalf("a heartbeat while the store is saturated: %v", err)
	}
	if len(resp.Cancel) != 0 {
		t.Errorf("the heartbeat cancels %v", resp.Cancel)
	}
	if n := e.srv.ShedByKind(); n["events"] != 1 || n["heartbeat"] != 0 {
		t.Errorf("shed by kind %v, want one event batch", n)
	}
	if !e.srv.LapsesHeld() {
		t.Error("the control plane shed a request, yet leases may lapse")
	}

	release()
	if err := <-waited; err != nil {
		t.Fatalf("the batch that waited: %v", err)
	}
	if got := statuses(e.send("ag-1", runToCompletion(mine)...)); got != "accepted accepted accepted accepted accepted accepted accepted accepted" {
		t.Fatalf("the shed batch sent again: %s", got)
	}
	if v, _ := e.client.Task(ctx, mine.Task.ID); v.Phase != state.PhaseCompleted {
		t.Errorf("the agent's task: %s, want completed", v.Phase)
	}
}

// An agent silent past its lease while the control plane shed requests
// may have been silent here: its lease does not lapse until three
// heartbeat intervals after the control plane was last strained.
func TestNoLeaseLapsesWhileTheControlPlaneWasStrained(t *testing.T) {
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{MaxInFlight: map[RequestKind]int{KindEvents: 1}})
	ctx := context.Background()
	e.clk.advance(time.Minute) // past the start's grace
	e.submit("fix it", "")
	e.submit("busy work", "")
	for _, id := range []string{"ag-1", "busy"} {
		if _, err := e.agent(id).Heartbeat(ctx, api.HeartbeatRequest{AgentID: id}); err != nil {
			t.Fatal(err)
		}
	}
	c := e.claim("ag-1", health.Available, 1)[0]
	busy := e.claim("busy", health.Available, 1)[0]
	e.clk.advance(50 * time.Second) // ag-1 silent, offline; its lease has 10 s left

	release := saturate(t, e.srv.Store(), busy.Task.ID)
	waited := make(chan error, 1)
	go func() {
		_, err := e.agent("busy").SendEvents(ctx, "busy", runToCompletion(busy)[:1])
		waited <- err
	}()
	testkit.WaitFor(t, "an event batch in flight", func() bool { return e.srv.InFlightByKind()["events"] == 1 })
	if _, err := e.agent("busy").SendEvents(ctx, "busy", runToCompletion(busy)[1:2]); err == nil {
		t.Fatal("a batch past the bound was not shed")
	}
	release()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	e.clk.advance(20 * time.Second) // its lease expired 10 s ago
	if _, err := e.client.Agents(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.client.Task(ctx, c.Task.ID); v.Phase != state.PhaseClaimed || v.Lease == nil {
		t.Fatalf("a lease lapsed just after the control plane shed: %s %+v", v.Phase, v.Lease)
	}
	e.clk.advance(11 * time.Second) // three intervals after the strain
	if _, err := e.client.Agents(ctx); err != nil {
		t.Fatal(err)
	}
	if e.srv.LapsesHeld() {
		t.Error("leases still held three intervals after the strain")
	}
	if v, _ := e.client.Task(ctx, c.Task.ID); v.Phase != state.PhaseQueued {
		t.Fatalf("three intervals after the strain: %s, want the lapsed claim queued again", v.Phase)
	}
}

// A kind's requests past its bound are shed at once; agents' requests
// shed hold the leases from lapsing, people's do not (a script polling
// the API past its bound makes no agent late).
func TestOnlyAgentsRequestsShedHoldLeases(t *testing.T) {
	for _, tc := range []struct {
		kind RequestKind
		held bool
	}{{KindRead, false}, {KindSubmit, false}, {KindEvents, true}, {KindClaim, true}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{MaxInFlight: map[RequestKind]int{tc.kind: 1}})
			in, out := make(chan struct{}), make(chan struct{})
			hs := httptest.NewServer(e.srv.admit(tc.kind, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in <- struct{}{}
				<-out
			})))
			defer hs.Close()
			first := make(chan error, 1)
			go func() {
				resp, err := http.Get(hs.URL)
				if err == nil {
					resp.Body.Close()
				}
				first <- err
			}()
			<-in // the one the bound allows is in flight
			resp, err := http.Get(hs.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
				t.Errorf("past the bound: %d, Retry-After %q; want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			close(out)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			if got := e.srv.LapsesHeld(); got != tc.held {
				t.Errorf("a %s request shed: lapses held %v, want %v", tc.kind, got, tc.held)
			}
			if n := e.srv.ShedByKind()[string(tc.kind)]; n != 1 {
				t.Errorf("%d %s requests counted shed, want 1", n, tc.kind)
			}
		})
	}
}

// The kinds of requests, as admission bounds them.
func TestRequestKinds(t *testing.T) {
	for pattern, want := range map[string]RequestKind{
		"POST /v1/agents/heartbeat":    KindHeartbeat,
		"POST /v1/tasks/claim":         KindClaim,
		"POST /v1/events":              KindEvents,
		"POST /v1/tasks":               KindSubmit,
		"POST /v1/tasks/{id}/subtasks": KindSubmit,
		"GET /v1/tasks/{id}/events":    KindRead,
		"GET /v1/agents":               KindRead,
		"POST /v1/tasks/release":       KindOther,
		"POST /v1/agents/register":     KindOther,
		"POST /v1/tasks/{id}/cancel":   KindOther,
		"POST /v1/agents/{id}/labels":  KindOther,
	} {
		if got := kindOf(pattern); got != want {
			t.Errorf("%s: %s, want %s", pattern, got, want)
		}
	}
	if _, err := New(Options{Store: dirStore(t, t.TempDir(), nil), Token: regToken, OperatorTokens: []string{opToken}, MaxInFlight: map[RequestKind]int{"bogus": 1}}); err == nil {
		t.Error("a bound of no kind was taken")
	}
	if _, err := New(Options{Store: dirStore(t, t.TempDir(), nil), Token: regToken, OperatorTokens: []string{opToken}, MaxInFlight: map[RequestKind]int{KindEvents: -1}}); err == nil {
		t.Error("a negative bound was taken")
	}
}

// Under a saturated events bound, a batch that ends a task (it holds the
// completion) is admitted on its reserve and completes the task, while
// other batches are shed; a batch that says it ends a task and does not,
// or an agent's second batch on the reserve, is shed too; once the bound
// is free, every batch shed is taken.
func TestATasksLastBatchIsAdmittedWhileOtherBatchesAreShed(t *testing.T) {
	const bound = 8 // its reserve: 2
	e := newEnvOpts(t, t.TempDir(), &clock{now: t0}, Options{MaxInFlight: map[RequestKind]int{KindEvents: bound}})
	ctx := context.Background()
	agents := []string{"busy", "ag-1", "ag-2", "ag-3"}
	for _, id := range agents {
		e.submit(id+"'s task", "")
		if _, err := e.agent(id).Heartbeat(ctx, api.HeartbeatRequest{AgentID: id}); err != nil {
			t.Fatal(err)
		}
	}
	task := map[string]api.Claimed{}
	for _, id := range agents {
		task[id] = e.claim(id, health.Available, 1)[0]
	}
	// The busy agent's task and ag-3's held by a transaction that waits;
	// the busy agent's batches wait for it, as many as the bound allows.
	hold, held := make(chan struct{}), make(chan struct{})
	holding := make(chan error, 1)
	go func() {
		holding <- e.srv.Store().Update(ctx, []string{task["busy"].Task.ID, task["ag-3"].Task.ID}, func(store.Tx) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	busyRun := runToCompletion(task["busy"])
	waiting := make(chan error, bound)
	for i := range bound {
		go func() {
			_, err := e.agent("busy").SendEvents(ctx, "busy", busyRun[i:i+1])
			waiting <- err
		}()
	}
	testkit.WaitFor(t, "the bound's batches in flight", func() bool { return e.srv.InFlightByKind()["events"] == bound })

	mine := runToCompletion(task["ag-1"])
	ending, others := mine[len(mine)-3:], mine[:len(mine)-3]
	if _, err := e.agent("ag-1").SendEvents(ctx, "ag-1", others); statusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("a batch that ends no task past the bound: %v, want shed", err)
	}
	// A batch that says it ends a task, and does not.
	tok := e.tokens.get("ag-2")
	err := e.call(tok, http.MethodPost, "/v1/events?"+api.EndsTaskQuery+"=1", api.EventsRequest{AgentID: "ag-2", Events: runToCompletion(task["ag-2"])[:2]}, nil)
	if statusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("a batch that says it ends a task and holds no completion, past the bound: %v, want shed", err)
	}
	// ag-3's last batch on the reserve, waiting for its task; its second
	// is shed: one slot per agent.
	third := runToCompletion(task["ag-3"])
	thirdDone := make(chan error, 1)
	go func() {
		_, err := e.agent("ag-3").SendEvents(ctx, "ag-3", third)
		thirdDone <- err
	}()
	// Counted in flight once admitted, it holds ag-3's slot once decoded:
	// the second must come after that, or it takes the slot itself.
	testkit.WaitFor(t, "ag-3's last batch on the reserve", func() bool {
		e.srv.admission.endingMu.Lock()
		defer e.srv.admission.endingMu.Unlock()
		return len(thirdDone) > 0 || e.srv.admission.endingAgents["ag-3"]
	})
	if len(thirdDone) > 0 {
		t.Fatalf("ag-3's last batch past the bound: %v, want it admitted on the reserve, waiting for its task", <-thirdDone)
	}
	if _, err := e.agent("ag-3").SendEvents(ctx, "ag-3", third); statusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("an agent's second batch on the reserve: %v, want shed", err)
	}
	if n := e.srv.ShedByKind()["events"]; n != 3 {
		t.Errorf("%d event batches counted shed, want 3", n)
	}

	// ag-1's task ends: its batches in order, as its outbox sends them
	// after a shed, the last one holding the completion.
	res, err := e.agent("ag-1").SendEvents(ctx, "ag-1", mine)
	if err != nil {
		t.Fatalf("the batch that ends ag-1's task, past the bound: %v", err)
	}
	if got := statuses(res); got != "accepted accepted accepted accepted accepted accepted accepted accepted" {
		t.Fatalf("the batch that ends ag-1's task: %s", got)
	}
	if v, _ := e.client.Task(ctx, task["ag-1"].Task.ID); v.Phase != state.PhaseCompleted {
		t.Fatalf("ag-1's task: %s, want completed while other batches are shed", v.Phase)
	}
	if n := e.srv.InFlightByKind()["events"]; n != bound+1 {
		t.Errorf("%d event batches in flight, want the bound's and ag-3's", n)
	}
	if _, err := e.agent("ag-1").SendEvents(ctx, "ag-1", ending); err != nil {
		t.Fatalf("the last batch sent again: %v", err)
	}

	release()
	if err := <-holding; err != nil {
		t.Fatal(err)
	}
	for range bound {
		if err := <-waiting; err != nil {
			t.Fatalf("a batch that waited: %v", err)
		}
	}
	if err := <-thirdDone; err != nil {
		t.Fatalf("ag-3's last batch: %v", err)
	}
	testkit.WaitFor(t, "the reserve free", func() bool { return e.srv.InFlightByKind()["events"] == 0 })
	for _, id := range []string{"busy", "ag-2", "ag-3"} {
		e.send(id, runToCompletion(task[id])...)
		if v, _ := e.client.Task(ctx, task[id].Task.ID); v.Phase != state.PhaseCompleted {
			t.Errorf("%s's task: %s, want completed", id, v.Phase)
		}
	}
}
