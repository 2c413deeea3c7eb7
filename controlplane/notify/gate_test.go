package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/testkit"
)

// agentRecord is a record of event e about agent agent, to target, at at.
func agentRecord(t *testing.T, id, target, agent string, e api.NotifyEvent, at time.Time) store.Notification {
	t.Helper()
	body, err := json.Marshal(api.Notification{ID: id, Event: e, At: at, Text: "Agent " + agent + " " + string(e) + " " + id,
		Link: "https://cp.example.com/agents", Agent: &api.NotifiedAgent{ID: agent}})
	if err != nil {
		t.Fatal(err)
	}
	return store.Notification{ID: id, Target: target, Body: body, Created: at, Due: at}
}

// taskRecord is a record of event e about task task.
func taskRecord(t *testing.T, id, target, task string, e api.NotifyEvent, at time.Time) store.Notification {
	t.Helper()
	body, err := json.Marshal(api.Notification{ID: id, Event: e, At: at, Text: "Task " + task + " " + string(e) + " " + id,
		Link: "https://cp.example.com/tasks/" + task, Task: &api.NotifiedTask{ID: task}})
	if err != nil {
		t.Fatal(err)
	}
	return store.Notification{ID: id, Target: target, Body: body, Created: at, Due: at}
}

// received are the notifications r got, in order.
func (r *receiver) received(t *testing.T) []api.Notification {
	t.Helper()
	var out []api.Notification
	for _, d := range r.deliveries() {
		var n api.Notification
		if err := json.Unmarshal(d.body, &n); err != nil {
			t.Fatalf("a delivery that is not a notification: %s", d.body)
		}
		out = append(out, n)
	}
	return out
}

// standsFor is how many notifications n stands for.
func standsFor(n api.Notification) int {
	if n.Folded != nil {
		return n.Folded.Count
	}
	return 1
}

var gateT0 = time.Date(2026, 1, 1, 9, 14, 3, 0, time.UTC)

// An agent's health flapping 40 times: the first notification goes out
// at once, the 39 repeats are held back and go out as one when the
// window ends, saying how many; a storm that goes on is one more per
// window; nothing is lost.
func TestRepeatsAreFoldedIntoOne(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	for i := range 40 {
		st.Notify(ctx, agentRecord(t, fmt.Sprintf("n%02d", i), "hooks", "a1", api.NotifyAgentUnhealthy, gateT0.Add(time.Duration(i)*100*time.Millisecond)))
	}
	clk.Add(4 * time.Second)
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	counts := NewCounts([]Target{target})
	logs := runLoop(t, st, []Target{target}, Options{Now: clk.Now, Counts: counts})
	testkit.WaitFor(t, "the first to go and the rest to be folded", func() bool { return len(r.deliveries()) == 1 && st.len() == 1 })
	if got := r.received(t)[0]; got.ID != "n00" || got.Folded != nil {
		t.Errorf("the first notification: %s, folded %+v; want n00 as it was", got.ID, got.Folded)
	}
	held, _ := st.get("n01", "hooks")
	if want := clk.Now().Add(DefaultWindow); held.Gate != "repeat/agent/agent.unhealthy/a1" || !held.Due.Equal(want) {
		t.Errorf("the fold: gate %q due %s; want the repeat gate, due %s", held.Gate, held.Due, want)
	}
	// Nothing more until the window ends, however often the loop looks.
	clk.Add(DefaultWindow - time.Second)
	st.rounds(t, 3)
	if n := len(r.deliveries()); n != 1 || st.len() != 1 {
		t.Fatalf("%d deliveries within the window, want 1", n)
	}
	clk.Add(time.Second)
	testkit.WaitFor(t, "the fold to go", func() bool { return len(r.deliveries()) == 2 && st.len() == 0 })
	fold := r.received(t)[1]
	if fold.ID != "n01" || fold.Event != api.NotifyAgentUnhealthy || fold.Agent == nil || fold.Agent.ID != "a1" || fold.Folded == nil ||
		fold.Folded.Count != 39 || fold.Folded.Events[api.NotifyAgentUnhealthy] != 39 || fold.Folded.Limit != "repeat" ||
		!fold.Folded.First.Equal(gateT0.Add(100*time.Millisecond)) || !fold.Folded.Last.Equal(gateT0.Add(3900*time.Millisecond)) ||
		fold.Folded.Latest != "Agent a1 agent.unhealthy n39" {
		t.Errorf("the fold: %+v, folded %+v", fold, fold.Folded)
	}
	if want := "Agent a1 agent.unhealthy n39 [39 times in 4s since 09:14:03 UTC; repeats within 10m0s are folded into one notice]"; fold.Text != want {
		t.Errorf("the fold's text:\n%q, want\n%q", fold.Text, want)
	}
	if c := counts.ByTarget()["hooks"]; c["folded"] != 39 || c["delivered"] != 2 {
		t.Errorf("counts %v, want 39 folded, 2 delivered", c)
	}
	if n := strings.Count(logs.String(), "notifications held back by a rate limit"); n != 1 {
		t.Errorf("%d lines saying notifications are held back, want 1:\n%s", n, logs)
	}

	// The storm goes on: the window started again with the fold sent, so
	// the next repeat is held back to its end.
	st.Notify(ctx, agentRecord(t, "n40", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now()))
	testkit.WaitFor(t, "the repeat to be folded", func() bool { n, ok := st.get("n40", "hooks"); return ok && n.Gate != "" })
	clk.Add(DefaultWindow)
	testkit.WaitFor(t, "the second fold to go", func() bool { return len(r.deliveries()) == 3 && st.len() == 0 })
	if got := r.received(t)[2]; got.Folded == nil || got.Folded.Count != 1 || !strings.Contains(got.Text, "[once since") {
		t.Errorf("the second fold: %+v", got)
	}
	// A window with nothing in it: the next goes out at once.
	clk.Add(DefaultWindow)
	st.Notify(ctx, agentRecord(t, "n41", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now()))
	testkit.WaitFor(t, "the next to go at once", func() bool { return len(r.deliveries()) == 4 })
	if got := r.received(t)[3]; got.ID != "n41" || got.Folded != nil {
		t.Errorf("after a quiet window: %s, folded %+v; want n41 as it was", got.ID, got.Folded)
	}
}

// Each agent or task gets PerSubject notifications per window, of any
// events; the target PerTarget in all. What is over is folded into one
// per limit (a digest when events or subjects differ) that says what it
// counts, sent when the window ends.
func TestSubjectAndTargetLimits(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	at := func(i int) time.Time { return gateT0.Add(time.Duration(i) * time.Second) }
	st.Notify(ctx,
		taskRecord(t, "t1-ask", "hooks", "t1", api.NotifyAwaitingReply, at(0)),
		taskRecord(t, "t1-done", "hooks", "t1", api.NotifyCompleted, at(1)),
		taskRecord(t, "t1-fail", "hooks", "t1", api.NotifyFailed, at(2)),   // over the task's 2
		taskRecord(t, "t1-block", "hooks", "t1", api.NotifyBlocked, at(3))) // and again
	for i := range 4 {
		st.Notify(ctx, agentRecord(t, fmt.Sprintf("a%d-off", i), "hooks", fmt.Sprintf("a%d", i), api.NotifyAgentOffline, at(10+i)))
	}
	clk.Add(time.Minute)
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	runLoop(t, st, []Target{target}, Options{Now: clk.Now, PerSubject: 2, PerTarget: 4})
	// t1-ask, t1-done, a0-off, a1-off: the target's 4. t1-fail and
	// t1-block fold into the task's fold; a2-off and a3-off into the
	// target's.
	testkit.WaitFor(t, "4 to go, the rest to be folded", func() bool { return len(r.deliveries()) == 4 && st.len() == 2 })
	var ids []string
	for _, n := range r.received(t) {
		ids = append(ids, n.ID)
	}
	slices.Sort(ids)
	if got := strings.Join(ids, " "); got != "a0-off a1-off t1-ask t1-done" {
		t.Errorf("sent at once: %s", got)
	}
	clk.Add(DefaultWindow)
	// At the window's end both folds go: the target's first (by id), then
	// the task's, in the target's new window.
	testkit.WaitFor(t, "the folds to go", func() bool { return st.len() == 0 && len(r.deliveries()) == 6 })
	byID := map[string]api.Notification{}
	for _, n := range r.received(t)[4:] {
		byID[n.ID] = n
	}
	task, all := byID["t1-fail"], byID["a2-off"]
	if task.Event != api.NotifyDigest || task.Task == nil || task.Task.ID != "t1" || task.Folded == nil || task.Folded.Count != 2 ||
		task.Folded.Limit != "task" || task.Folded.Events[api.NotifyFailed] != 1 || task.Folded.Events[api.NotifyBlocked] != 1 ||
		task.Text != "Task t1: 2 notifications since 09:14:05 UTC (held back: at most 2 notifications about one task per 10m0s): "+
			"1 task.blocked, 1 task.failed; the latest: Task t1 task.blocked t1-block" {
		t.Errorf("the task's fold: %+v, folded %+v", task, task.Folded)
	}
	if all.Event != api.NotifyAgentOffline || all.Agent != nil || all.Task != nil || all.Link != "https://cp.example.com/" || all.Folded == nil ||
		all.Folded.Count != 2 || all.Folded.Limit != "target" ||
		all.Text != "2 notifications since 09:14:15 UTC (held back: at most 4 notifications to this target per 10m0s): "+
			"2 agent.offline; the latest: Agent a3 agent.offline a3-off" {
		t.Errorf("the target's fold: %+v, folded %+v", all, all.Folded)
	}
}

// A fold that meets a wider gate's fold not yet sent joins it: what
// reaches a full target is one notification when its window ends.
func TestAFoldJoinsAWiderOne(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	// a1's repeat fold (due when the repeat window ends) and the target's
	// fold of a2 (due when the target's window ends, later: it opened
	// with the first delivery, a0's, before a1's).
	st.Notify(ctx, agentRecord(t, "n0", "hooks", "a0", api.NotifyAgentOffline, gateT0))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	runLoop(t, st, []Target{target}, Options{Now: clk.Now, PerTarget: 2})
	testkit.WaitFor(t, "n0", func() bool { return len(r.deliveries()) == 1 })
	clk.Add(time.Minute)
	st.Notify(ctx, agentRecord(t, "n1", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now()),
		agentRecord(t, "n2", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now().Add(time.Second)),
		agentRecord(t, "n3", "hooks", "a2", api.NotifyAgentOffline, clk.Now().Add(2*time.Second)))
	clk.Add(time.Minute)
	testkit.WaitFor(t, "n1, and the rest folded", func() bool { return len(r.deliveries()) == 2 && st.len() == 2 })
	// The repeat window (from n1, sent two minutes in) ends two minutes
	// after the target's: by then the target's fold went, and a1's fold
	// goes in the target's new window.
	clk.Add(DefaultWindow - 2*time.Minute)
	testkit.WaitFor(t, "the target's fold", func() bool { return len(r.deliveries()) == 3 })
	if got := r.received(t)[2]; got.ID != "n3" || got.Folded == nil || got.Folded.Count != 1 || got.Folded.Limit != "target" {
		t.Errorf("the target's fold: %+v", got)
	}
	clk.Add(2 * time.Minute)
	testkit.WaitFor(t, "a1's fold", func() bool { return len(r.deliveries()) == 4 && st.len() == 0 })
	if got := r.received(t)[3]; got.ID != "n2" || got.Folded == nil || got.Folded.Count != 1 || got.Folded.Limit != "repeat" {
		t.Errorf("a1's fold: %+v", got)
	}
	// Now the target's window is full (n3's fold, a1's): a new repeat of
	// a2 and one of a3 join one fold, the target's.
	st.Notify(ctx, agentRecord(t, "n4", "hooks", "a2", api.NotifyAgentOffline, clk.Now()),
		agentRecord(t, "n5", "hooks", "a3", api.NotifyAgentUnhealthy, clk.Now()))
	testkit.WaitFor(t, "both folded into one", func() bool { return st.len() == 1 })
	clk.Add(DefaultWindow)
	testkit.WaitFor(t, "the digest", func() bool { return len(r.deliveries()) == 5 && st.len() == 0 })
	if got := r.received(t)[4]; got.Event != api.NotifyDigest || got.Folded == nil || got.Folded.Count != 2 || got.Agent != nil {
		t.Errorf("the digest: %+v, folded %+v", got, got.Folded)
	}
}

// What the limits hold back is never lost: a storm of many agents and
// tasks and events, over several windows, is all counted in what is
// sent, and each window sends a bounded number.
func TestNothingHeldBackIsLost(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	events := []api.NotifyEvent{api.NotifyAgentOffline, api.NotifyAgentUnhealthy}
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	opts := Options{Now: clk.Now, PerSubject: 2, PerTarget: 5}
	stop := startLoop(t, st, []Target{target}, opts)
	written := 0
	for w := range 4 {
		for i := range 60 {
			at := clk.Now().Add(time.Duration(i) * time.Second)
			agent := fmt.Sprintf("a%d", rng.IntN(8))
			st.Notify(ctx, agentRecord(t, fmt.Sprintf("w%d-%d", w, i), "hooks", agent, events[rng.IntN(2)], at))
			written++
		}
		clk.Add(DefaultWindow)
		if w == 1 {
			// A restart between windows: the gates are the store's.
			stop()
			stop = startLoop(t, st, []Target{target}, opts)
		}
		testkit.WaitFor(t, "the window's records to be sent or folded", func() bool {
			due, _ := st.DueNotifications(ctx, clk.Now(), 1000)
			return len(due) == 0
		})
	}
	for range 3 {
		clk.Add(DefaultWindow)
		testkit.WaitFor(t, "the folds to go", func() bool {
			due, _ := st.DueNotifications(ctx, clk.Now(), 1000)
			return len(due) == 0
		})
	}
	if st.len() != 0 {
		t.Fatalf("%d records left", st.len())
	}
	stop()
	got := r.received(t)
	total := 0
	for _, n := range got {
		total += standsFor(n)
	}
	if total != written {
		t.Errorf("the %d notifications sent stand for %d, want the %d written", len(got), total, written)
	}
	// Per window at most PerTarget let through, plus the target's own
	// digest; 7 windows passed.
	if most := 7 * (opts.PerTarget + 1); len(got) > most {
		t.Errorf("%d sent over 7 windows, want at most %d", len(got), most)
	}
	t.Logf("%d notifications sent for %d written", len(got), written)
}

// startLoop runs Run until the function it returns is called (or the
// test ends), which waits for it to return.
func startLoop(t *testing.T, st Store, targets []Target, opts Options) (stop func()) {
	t.Helper()
	if opts.Interval == 0 {
		opts.Interval = 2 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, st, targets, opts) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// A record that passed its gates and failed to be delivered is tried
// again past them, at its backoff: it is not held back by the repeat it
// let through itself.
func TestARetryIsNotHeldBack(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(http.StatusServiceUnavailable)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	st.Notify(ctx, agentRecord(t, "n1", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now()))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	runLoop(t, st, []Target{target}, Options{Now: clk.Now, Jitter: func(d time.Duration) time.Duration { return d }})
	testkit.WaitFor(t, "the first try", func() bool { n, _ := st.get("n1", "hooks"); return n.Attempts == 1 })
	st.Notify(ctx, agentRecord(t, "n2", "hooks", "a1", api.NotifyAgentUnhealthy, clk.Now()))
	testkit.WaitFor(t, "the repeat to be folded", func() bool { n, ok := st.get("n2", "hooks"); return ok && n.Gate != "" })
	r.setStatus(http.StatusOK)
	clk.Add(DefaultMinBackoff)
	testkit.WaitFor(t, "the retry", func() bool { _, ok := st.get("n1", "hooks"); return !ok })
	if n, ok := st.get("n2", "hooks"); !ok || !n.Due.Equal(gateT0.Add(DefaultWindow)) {
		t.Errorf("the repeat: %+v; want it held to the window's end", n)
	}
}

// A record let through by its gates whose delivery a stop (or a crash)
// cut before its try was recorded goes out at once when delivery starts
// again: it is not taken for a repeat of itself and held to the window's
// end, nor counted twice against its subject and target.
func TestARecordCutBeforeItsTryPassesAgain(t *testing.T) {
	r := newReceiver(t)
	reached, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the receiver closes
	hang := true
	var mu sync.Mutex
	inner := r.Config.Handler
	r.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			select {
			case reached <- struct{}{}:
			default:
			}
			select {
			case <-req.Context().Done():
			case <-release:
			}
			return
		}
		inner.ServeHTTP(w, req)
	})
	clk := &clock{now: gateT0}
	st := newMemStore()
	st.Notify(context.Background(), taskRecord(t, "n1", "hooks", "t1", api.NotifyFailed, clk.Now()))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	stop := startLoop(t, st, []Target{target}, Options{Now: clk.Now})
	<-reached
	stop() // the delivery is cut: nothing recorded of it
	if n, ok := st.get("n1", "hooks"); !ok || n.Attempts != 0 || n.Gate != "" {
		t.Fatalf("after the cut: %+v, %v; want it due, untried", n, ok)
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	startLoop(t, st, []Target{target}, Options{Now: clk.Now})
	testkit.WaitFor(t, "the record to be delivered", func() bool { _, ok := st.get("n1", "hooks"); return !ok })
	if got := r.received(t); len(got) != 1 || got[0].ID != "n1" || got[0].Folded != nil {
		t.Errorf("received %+v, want n1 itself", got)
	}
	gates, _ := st.NotifyGates(context.Background(), "hooks", []string{"task/t1", "target"})
	for _, g := range gates {
		if g.Sent != 1 {
			t.Errorf("gate %s counted %d, want 1", g.Key, g.Sent)
		}
	}
}

// A repeat's fold that meets a full target is folded into the target's
// fold, and its own gate holds it no more: its window starts again, and
// the next repeat begins a fold of its own.
func TestARepeatFoldIntoTheTargetsLetsItsGateGo(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: gateT0}
	st := newMemStore()
	ctx := context.Background()
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	runLoop(t, st, []Target{target}, Options{Now: clk.Now, PerTarget: 2})
	send := func(id, agent string, e api.NotifyEvent) {
		t.Helper()
		st.Notify(ctx, agentRecord(t, id, "hooks", agent, e, clk.Now()))
		st.rounds(t, 2)
	}
	send("a0", "a0", api.NotifyAgentOffline) // the target's first
	clk.Add(time.Minute)
	send("a1-1", "a1", api.NotifyAgentUnhealthy) // its second
	send("a1-2", "a1", api.NotifyAgentUnhealthy) // a repeat: folded, due at 11m
	clk.Add(9 * time.Minute)                     // the target's window ends
	send("a2", "a2", api.NotifyAgentOffline)     // the new window's first
	send("a3", "a3", api.NotifyAgentOffline)     // its second
	send("a4", "a4", api.NotifyAgentOffline)     // over: folded, due at 20m
	clk.Add(time.Minute)                         // a1's fold is due: the target is full
	st.rounds(t, 2)
	repeat := "repeat/agent/agent.unhealthy/a1"
	st.mu.Lock()
	g, held := st.gates[[2]string{"hooks", repeat}], st.recs[[2]string{"a4", "hooks"}]
	_, gone := st.recs[[2]string{"a1-2", "hooks"}]
	st.mu.Unlock()
	if g.Held != "" || !g.Until.Equal(clk.Now().Add(DefaultWindow)) || gone {
		t.Errorf("a1's repeat gate after its fold went into the target's: %+v (its fold still stored: %v); want it free, its window started again", g, gone)
	}
	var n api.Notification
	if err := json.Unmarshal(held.Body, &n); err != nil || n.Folded == nil || n.Folded.Count != 2 {
		t.Errorf("the target's fold: %s; want a4's and a1's repeat in it", held.Body)
	}
	send("a1-3", "a1", api.NotifyAgentUnhealthy) // a repeat in a1's new window
	if rec, ok := st.get("a1-3", "hooks"); !ok || rec.Gate != repeat {
		t.Errorf("a1's next repeat: %+v; want it the start of a fold of its own", rec)
	}
	clk.Add(DefaultWindow)
	testkit.WaitFor(t, "everything to go", func() bool { return st.len() == 0 })
	total := 0
	for _, n := range r.received(t) {
		total += standsFor(n)
	}
	if total != 7 {
		t.Errorf("what was sent stands for %d notifications, want the 7 written", total)
	}
}
