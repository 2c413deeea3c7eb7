package agent

import (
	"context"
	"fmt"
	"github.com/edgeagent/agent/internal/testkit"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
)

// statusLog counts the answers a control plane gave, by path and status.
type statusLog struct {
	mu sync.Mutex
	n  map[string]map[int]int
}

func (l *statusLog) wrap(_ *server.Server, real http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusOf{ResponseWriter: w, status: http.StatusOK}
		real.ServeHTTP(sw, r)
		l.mu.Lock()
		if l.n == nil {
			l.n = map[string]map[int]int{}
		}
		if l.n[r.URL.Path] == nil {
			l.n[r.URL.Path] = map[int]int{}
		}
		l.n[r.URL.Path][sw.status]++
		l.mu.Unlock()
	})
}

func (l *statusLog) count(path string, status int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[path][status]
}

type statusOf struct {
	http.ResponseWriter
	status int
}

func (w *statusOf) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// The order under overload, with a real agent: while the control plane's
// event batches are at their bound (one waits for a task a long
// transaction holds), the agent's heartbeats are answered and its event
// batches are shed with Retry-After; once the control plane is free, its
// outbox delivers everything, and the task it ran completes.
func TestAnOverloadedControlPlaneHearsHeartbeatsAndTheOutboxDeliversAfterwards(t *testing.T) {
	log := &statusLog{}
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond,
		MaxInFlight: map[server.RequestKind]int{server.KindEvents: 1}}, Wrap: log.wrap})
	ctx := context.Background()

	// Another agent's task, held by a transaction that waits, and that
	// agent's batch waiting for it: the one batch in flight the bound
	// allows.
	busy := fillEventsBound(t, cp, 1)
	a := startSampleAgent(t, cp)

	task, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the agent's batches shed", func() bool { return cp.Server.ShedByKind()["events"] >= 2 })
	answered := log.count("/v1/agents/heartbeat", http.StatusOK)
	testkit.WaitFor(t, "heartbeats answered while batches are shed", func() bool {
		return log.count("/v1/agents/heartbeat", http.StatusOK) >= answered+5
	})
	if n := log.count("/v1/events", http.StatusServiceUnavailable); n < 2 {
		t.Errorf("%d batches answered 503", n)
	}
	if n := log.count("/v1/agents/heartbeat", http.StatusServiceUnavailable); n != 0 {
		t.Errorf("%d heartbeats shed", n)
	}
	if v, _ := cp.Operator.Task(ctx, task.ID); v.Phase.Terminal() {
		t.Fatalf("the task ended (%s) while its events were shed", v.Phase)
	}

	busy.release(t)
	if v := waitTerminal(t, cp.Operator, task.ID); v.Phase != state.PhaseCompleted {
		t.Fatalf("the agent's task: %s, want completed", v.Phase)
	}
	testkit.WaitFor(t, "the outbox delivered everything", func() bool { return a.outbox.Stats().Pending == 0 })
}

// A task's end goes ahead of the rest: while the control plane's event
// batches are at their bound (other agents' batches wait for a task a
// long transaction holds), the agent's batches are shed until its task
// ends; then its outbox's batch, which holds the completion, is admitted
// on its reserve, and the task completes and the outbox empties while
// the bound is still full.
func TestATaskEndsWhileTheControlPlaneShedsOtherBatches(t *testing.T) {
	const bound = 4 // its reserve for batches that end a task: 1
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond,
		MaxInFlight: map[server.RequestKind]int{server.KindEvents: bound}}})
	ctx := context.Background()

	busy := fillEventsBound(t, cp, bound)
	a := startSampleAgent(t, cp)

	task, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	if v := waitTerminal(t, cp.Operator, task.ID); v.Phase != state.PhaseCompleted {
		t.Fatalf("the agent's task: %s, want completed", v.Phase)
	}
	testkit.WaitFor(t, "the outbox delivered everything", func() bool { return a.outbox.Stats().Pending == 0 })
	if n := cp.Server.ShedByKind()["events"]; n == 0 {
		t.Error("no batch of the agent's was shed: the bound was not full")
	}
	if len(busy.waited) != 0 {
		t.Fatal("the busy agent's batches ended before the task did: the bound was not full")
	}
	busy.release(t)
}

// busyBatches are another agent's event batches filling the events'
// bound: each waits for a task a long transaction holds.
type busyBatches struct {
	n        int
	hold     chan struct{}
	released atomic.Bool
	holding  chan error
	waited   chan error
}

// fillEventsBound has agent "busy" claim a task, holds it in a
// transaction, and sends n batches of its events, which wait for it: n
// events requests in flight, the bound when n is its MaxInFlight.
func fillEventsBound(t *testing.T, cp *servertest.ControlPlane, n int) *busyBatches {
	t.Helper()
	ctx := context.Background()
	busyTask, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	busy := cp.Agent(t, "busy")
	if _, err := busy.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "busy"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := busy.Claim(ctx, api.ClaimRequest{AgentID: "busy", Max: 1, HealthGrade: health.Available})
	if err != nil || len(claimed.Tasks) != 1 || claimed.Tasks[0].Task.ID != busyTask.ID {
		t.Fatalf("the busy agent's claim: %+v %v", claimed, err)
	}
	b := &busyBatches{n: n, hold: make(chan struct{}), holding: make(chan error, 1), waited: make(chan error, n)}
	held := make(chan struct{})
	go func() {
		b.holding <- cp.Server.Store().Update(ctx, []string{busyTask.ID}, func(store.Tx) error { close(held); <-b.hold; return nil })
	}()
	<-held
	t.Cleanup(b.free)
	c := claimed.Tasks[0]
	for i := range n {
		go func() {
			_, err := busy.SendEvents(ctx, "busy", []api.Event{{Key: fmt.Sprintf("busy:%d", i+1), Kind: state.EventProgress, TaskID: c.Task.ID, Attempt: 1,
				LeaseID: c.Lease.ID, CreatedAt: time.Now(), Payload: []byte(`{"message":"working"}`)}})
			b.waited <- err
		}()
	}
	testkit.WaitFor(t, "the busy agent's batches in flight", func() bool { return cp.Server.InFlightByKind()["events"] == n })
	return b
}

// free ends the transaction that holds the busy task.
func (b *busyBatches) free() {
	if b.released.CompareAndSwap(false, true) {
		close(b.hold)
	}
}

// release frees the busy task and waits for the transaction and every
// batch to end well.
func (b *busyBatches) release(t *testing.T) {
	t.Helper()
	b.free()
	if err := <-b.holding; err != nil {
		t.Fatal(err)
	}
	for range b.n {
		if err := <-b.waited; err != nil {
			t.Fatalf("a busy agent's batch: %v", err)
		}
	}
}

// startSampleAgent runs an agent of this package's sample executor
// against cp, one task at a time, until the test ends.
func startSampleAgent(t *testing.T, cp *servertest.ControlPlane) *Agent {
	t.Helper()
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, MaxConcurrent: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-errc })
	return a
}
