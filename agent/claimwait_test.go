package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
)

// claimLog sits in front of a control plane and records the claims and
// heartbeats that reach it. It can play a control plane from before long
// polls (it drops wait_ms from claims), and lose the first answer that
// grants a task.
type claimLog struct {
	oldServer      bool
	loseFirstGrant bool

	mu         sync.Mutex
	claims     []claimSeen // in the order they arrived
	heartbeats int
	lost       bool
}

type claimSeen struct {
	req     api.ClaimRequest
	granted []string // filled in once answered
	lost    bool     // its answer never reached the agent
}

func (l *claimLog) wrap(_ *server.Server, real http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/agents/heartbeat":
			l.mu.Lock()
			l.heartbeats++
			l.mu.Unlock()
		case "/v1/tasks/claim":
			l.claim(w, r, real)
			return
		}
		real.ServeHTTP(w, r)
	})
}

func (l *claimLog) claim(w http.ResponseWriter, r *http.Request, real http.Handler) {
	body, _ := io.ReadAll(r.Body)
	var req api.ClaimRequest
	_ = json.Unmarshal(body, &req)
	if l.oldServer {
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(body, &fields)
		delete(fields, "wait_ms")
		body, _ = json.Marshal(fields)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	i := len(l.claims)
	l.claims = append(l.claims, claimSeen{req: req})
	l.mu.Unlock()
	rec := httptest.NewRecorder()
	real.ServeHTTP(rec, r) // the control plane acts
	var resp api.ClaimResponse
	_ = json.Unmarshal(rec.Body.Bytes(), &resp)
	l.mu.Lock()
	for _, c := range resp.Tasks {
		l.claims[i].granted = append(l.claims[i].granted, c.Task.ID)
	}
	drop := l.loseFirstGrant && !l.lost && len(resp.Tasks) > 0
	l.lost = l.lost || drop
	l.claims[i].lost = drop
	l.mu.Unlock()
	if drop {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // the answer is lost
		}
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (l *claimLog) seen() ([]claimSeen, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]claimSeen, len(l.claims))
	copy(out, l.claims)
	return out, l.heartbeats
}

// grants are the claims that granted tasks, by their place in arrival
// order.
func (l *claimLog) grants() map[int][]string {
	claims, _ := l.seen()
	out := map[int][]string{}
	for i, c := range claims {
		if len(c.granted) > 0 {
			out[i] = c.granted
		}
	}
	return out
}

// startLogged starts a control plane behind log and an agent of the
// sample executor against it, heartbeating every 100 ms; the agent stops
// when the test ends, or earlier with the returned stop.
func startLogged(t *testing.T, log *claimLog) (*servertest.ControlPlane, func() error) {
	t.Helper()
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond}, Wrap: log.wrap})
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, MaxConcurrent: 1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() { cancel(); runErr = <-errc })
		return runErr
	}
	t.Cleanup(func() { stop() })
	return cp, stop
}

// untilClaimWaiting returns once the control plane holds one claim
// waiting for work.
func untilClaimWaiting(t *testing.T, cp *servertest.ControlPlane) {
	t.Helper()
	testkit.WaitFor(t, "one claim waiting", func() bool { return cp.Server.ClaimsWaiting() == 1 })
}

// untilHeartbeats returns once log has seen n heartbeats.
func untilHeartbeats(t *testing.T, log *claimLog, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d heartbeats", n), func() bool { _, hb := log.seen(); return hb >= n })
}

// An idle agent keeps one claim waiting at the control plane: heartbeats
// go on without more claims, and a task submitted meanwhile is granted to
// the claim that was waiting, not to a later one.
func TestIdleAgentTakesASubmittedTaskWithTheClaimThatWaits(t *testing.T) {
	t.Parallel()
	log := &claimLog{}
	cp, _ := startLogged(t, log)
	untilClaimWaiting(t, cp)
	_, hb := log.seen()
	untilHeartbeats(t, log, hb+5)
	claims, _ := log.seen()
	if len(claims) != 1 || claims[0].req.WaitMS != api.MaxClaimWait.Milliseconds() {
		t.Fatalf("an idle agent over five heartbeats made %d claims (%+v), want one waiting %v", len(claims), claims, api.MaxClaimWait)
	}
	task, err := cp.Operator.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	if v := waitTerminal(t, cp.Operator, task.ID); v.Phase != state.PhaseCompleted {
		t.Fatalf("task %s", v.Phase)
	}
	grants := log.grants()
	if len(grants) != 1 || len(grants[0]) != 1 || grants[0][0] != task.ID {
		t.Fatalf("grants by claim %v, want the task granted to claim 0, the one waiting when it was submitted", grants)
	}
	if ends := cp.Server.ClaimWaitEnds(); ends[server.WaitGranted] != 1 {
		t.Errorf("waits ended %v, want one granted", ends)
	}
}

// A control plane from before long polls answers at once and says no
// wait: the agent claims when a heartbeat gets through, as it did, not in
// a loop, and still runs what is submitted.
func TestAgentClaimsAtHeartbeatsFromAControlPlaneThatDoesNotWait(t *testing.T) {
	t.Parallel()
	log := &claimLog{oldServer: true}
	cp, _ := startLogged(t, log)
	untilHeartbeats(t, log, 10)
	claims, hb := log.seen()
	if len(claims) == 0 || len(claims) > hb+1 {
		t.Fatalf("%d claims over %d heartbeats, want at most one a heartbeat and at least one", len(claims), hb)
	}
	if n := cp.Server.ClaimsWaiting(); n != 0 {
		t.Fatalf("%d claims waiting at a control plane that was not asked to wait", n)
	}
	task, err := cp.Operator.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	if v := waitTerminal(t, cp.Operator, task.ID); v.Phase != state.PhaseCompleted {
		t.Fatalf("task %s", v.Phase)
	}
}

// An agent stopped while its claim waits withdraws it and stops: the
// control plane sees the agent hang up, not the wait run out. Whatever
// the claim started is gone too (goleak, in TestMain).
func TestStopWithdrawsAWaitingClaim(t *testing.T) {
	t.Parallel()
	log := &claimLog{}
	cp, stop := startLogged(t, log)
	untilClaimWaiting(t, cp)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "no claim waiting", func() bool { return cp.Server.ClaimsWaiting() == 0 })
	if ends := cp.Server.ClaimWaitEnds(); ends[server.WaitGone] != 1 || len(ends) != 1 {
		t.Fatalf("waits ended %v, want one: the agent hung up", ends)
	}
	if claims, _ := log.seen(); len(claims) != 1 {
		t.Errorf("%d claims, want the one withdrawn", len(claims))
	}
}

// The answer of a waiting claim that granted a task is lost on the way.
// The agent asks again with the same claim id, gets the same grant, and
// runs the task once.
func TestLostAnswerOfAWaitingClaimIsAskedAgainWithItsID(t *testing.T) {
	t.Parallel()
	log := &claimLog{loseFirstGrant: true}
	cp, _ := startLogged(t, log)
	untilClaimWaiting(t, cp)
	task, err := cp.Operator.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	v := waitTerminal(t, cp.Operator, task.ID)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
		t.Fatalf("task %s with %d attempts, want completed with one", v.Phase, len(v.Attempts))
	}
	claims, _ := log.seen()
	if len(claims) < 2 || !claims[0].lost || claims[1].req.RequestID != claims[0].req.RequestID ||
		len(claims[1].granted) != 1 || claims[1].granted[0] != task.ID {
		t.Fatalf("claims %+v: want the lost grant asked again with its id and granted again", claims)
	}
}
