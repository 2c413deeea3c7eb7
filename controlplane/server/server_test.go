package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/controlplane/store/pgstore"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// The server's tests run over the file store, and over PostgreSQL when
// AGENT_TEST_CP_STORE=postgres (make test runs both): the same requests,
// the same answers.
func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// onPostgres reports whether the tests run over PostgreSQL.
func onPostgres() bool { return os.Getenv("AGENT_TEST_CP_STORE") == "postgres" }

// fileStoreOnly skips a test of the file store's own files.
func fileStoreOnly(t *testing.T) {
	t.Helper()
	if onPostgres() {
		t.Skip("a test of the file store's files")
	}
}

// databases are the tests' PostgreSQL databases by the directory their
// env was made with: a restart on the same directory opens the same
// database.
var databases sync.Map

// pgStore opens a PostgreSQL store for the env of dir, closed when the
// test ends.
func pgStore(t *testing.T, dir string) store.Store {
	t.Helper()
	dsn, ok := databases.Load(dir)
	if !ok {
		dsn, _ = databases.LoadOrStore(dir, pgtest.Start(t))
	}
	st, err := pgstore.Open(t.Context(), dsn.(string), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// dirStore opens a file store in dir, closed when t ends (if the test
// did not close it first).
func dirStore(t testing.TB, dir string, now func() time.Time) store.Store {
	t.Helper()
	st, err := openDirStore(t, dir, now)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openDirStore is dirStore for a test of how opening fails.
func openDirStore(t testing.TB, dir string, now func() time.Time) (store.Store, error) {
	fs, err := filestore.Open(dir, filestore.Options{Now: now})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { fs.Close() })
	return fs, nil
}

// clock is a settable clock shared by a test and its server.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	t      *testing.T
	dir    string
	clk    *clock
	srv    *Server
	http   *httptest.Server
	client *controlplane.Client // a person's tools: an operator token
	agents map[string]*controlplane.Client
	// tokens are the agents' own tokens, as their clients saved them; a
	// restart keeps them, as agents keep them in their data directories.
	tokens *agentTokens
}

// agentTokens are agents' own tokens by agent id.
type agentTokens struct {
	mu sync.Mutex
	by map[string]string
}

func (a *agentTokens) get(id string) string { a.mu.Lock(); defer a.mu.Unlock(); return a.by[id] }

func (a *agentTokens) save(id string) func(string) error {
	return func(tok string) error { a.mu.Lock(); defer a.mu.Unlock(); a.by[id] = tok; return nil }
}

// The test credentials: the registration secret every agent host holds,
// and a person's operator token.
const (
	regToken = "reg-0123456789abcdef0123456789abcdef"
	opToken  = "op-0123456789abcdef0123456789abcdef0"
)

// agent returns agent id's client, which registers for its own token.
func (e *env) agent(id string) *controlplane.Client {
	e.t.Helper()
	if c := e.agents[id]; c != nil {
		return c
	}
	c, err := controlplane.NewClient(e.http.URL, regToken, controlplane.ClientOptions{Tries: 1, AgentID: id, AgentToken: e.tokens.get(id),
		SaveAgentToken: e.tokens.save(id)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.agents[id] = c
	return c
}

func newEnv(t *testing.T, dir string, clk *clock) *env {
	t.Helper()
	return newEnvOpts(t, dir, clk, Options{})
}

// newEnvOpts is newEnv with more options: those newEnv sets are set over
// them.
func newEnvOpts(t *testing.T, dir string, clk *clock, opts Options) *env {
	t.Helper()
	opts.Token, opts.OperatorTokens, opts.Now, opts.Lease, opts.HeartbeatInterval = regToken, []string{opToken}, clk.Now, time.Minute, 10*time.Second
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.Store == nil {
		if onPostgres() {
			opts.Store = pgStore(t, dir)
		} else {
			opts.Store = dirStore(t, dir, clk.Now)
		}
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.StopWaits(); hs.Close(); srv.Close() })
	c, err := controlplane.NewClient(hs.URL, opToken, controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dir: dir, clk: clk, srv: srv, http: hs, client: c, agents: map[string]*controlplane.Client{}, tokens: &agentTokens{by: map[string]string{}}}
}

// restart stops this server, as a crash would leave its files, and starts
// another on the same directory.
func (e *env) restart(clk *clock) *env {
	e.t.Helper()
	e.http.Close()
	e.srv.Close()
	e.srv.store.Close() // its directory, or its lead, let go as a crash would

	n := newEnvOpts(e.t, e.dir, clk, Options{MaxAttemptOutput: e.srv.opts.MaxAttemptOutput, Notify: e.srv.opts.Notify, PublicURL: e.srv.opts.PublicURL})
	n.tokens = e.tokens
	return n
}

func (e *env) submit(prompt string, prefer api.Prefer) api.TaskView {
	e.t.Helper()
	v, err := e.client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: prompt, Prefer: prefer})
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *env) claim(agent string, grade health.Grade, max int) []api.Claimed {
	e.t.Helper()
	resp, err := e.agent(agent).Claim(context.Background(), api.ClaimRequest{AgentID: agent, Max: max, HealthGrade: grade})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Tasks
}

// send sends evs as agent, in batches within the API's limit, and returns
// one result per event.
func (e *env) send(agent string, evs ...api.Event) []api.EventResult {
	e.t.Helper()
	var all []api.EventResult
	for len(evs) > 0 {
		n := min(len(evs), api.MaxEventsPerBatch)
		res, err := e.agent(agent).SendEvents(context.Background(), agent, evs[:n])
		if err != nil {
			e.t.Fatal(err)
		}
		all, evs = append(all, res...), evs[n:]
	}
	return all
}

func ev(key string, kind state.EventKind, c api.Claimed, payload any) api.Event {
	b, _ := json.Marshal(payload)
	return api.Event{Key: key, Kind: kind, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: time.Now(), Payload: b}
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// runToCompletion sends what an agent sends for a task that succeeds.
func runToCompletion(c api.Claimed) []api.Event {
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}
	done := a
	done.Status, done.CompletedAt = state.AttemptCompleted, t0.Add(time.Second)
	id := c.Task.ID
	return []api.Event{
		ev(id+":phase:executor_starting", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":attempt:1", state.EventAttempt, c, a),
		ev(id+":phase:turn_started", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
		ev(id+":progress:1", state.EventProgress, c, state.ProgressEvent{Message: "half", Percent: 50}),
		ev(id+":log:1", state.EventLog, c, state.LogEvent{Stream: "stdout", Lines: []string{"hello"}}),
		ev(id+":attempt:2", state.EventAttempt, c, done),
		ev(id+":phase:completed", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseCompleted}),
		ev(id+":complete", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done", Attempts: []state.Attempt{done}}),
	}
}

func statuses(res []api.EventResult) string {
	var s []string
	for _, r := range res {
		s = append(s, string(r.Status))
	}
	return strings.Join(s, " ")
}

func TestEventsAreIdempotentAcrossARestart(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	e.submit("fix it", "")
	c := e.claim("ag-1", "available", 1)[0]
	evs := runToCompletion(c)
	if got := statuses(e.send("ag-1", evs...)); got != strings.TrimSpace(strings.Repeat("accepted ", len(evs))) {
		t.Fatalf("first delivery: %s", got)
	}
	// The same records again, after a restart: all duplicates, nothing changes.
	before, _ := e.client.TaskEvents(context.Background(), c.Task.ID)
	e.http.Close()
	e = e.restart(clk)
	if got := statuses(e.send("ag-1", evs...)); got != strings.TrimSpace(strings.Repeat("duplicate ", len(evs))) {
		t.Fatalf("second delivery after a restart: %s", got)
	}
	after, _ := e.client.TaskEvents(context.Background(), c.Task.ID)
	if len(after) != len(before) || len(after) != len(evs) {
		t.Errorf("events %d before, %d after; want %d", len(before), len(after), len(evs))
	}
	v, _ := e.client.Task(context.Background(), c.Task.ID)
	if v.Phase != state.PhaseCompleted || v.Result == nil || v.Result.Summary != "done" || len(v.Attempts) != 1 || v.Attempts[0].Status != state.AttemptCompleted {
		t.Errorf("task %+v", v.Task())
	}
	if v.ProgressCard[5].Status != state.StepDone {
		t.Errorf("card %+v", v.ProgressCard)
	}
}

func TestLateCompletionForATerminalTaskIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	e.submit("fix it", "")
	c := e.claim("ag-1", "available", 1)[0]
	e.send("ag-1", runToCompletion(c)[:3]...)
	// The task stalls: the watchdog times it out.
	e.clk.advance(11 * time.Minute)
	v, _ := e.client.Task(context.Background(), c.Task.ID)
	if v.Phase != state.PhaseTimedOut {
		t.Fatalf("phase %s, want timed_out", v.Phase)
	}
	late := ev("late-complete", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseCompleted})
	res := e.send("ag-1", late, ev("late-phase", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseCompleting}))
	for _, r := range res {
		if r.Status != api.StatusRejected || r.Reason != api.ReasonTerminal {
			t.Errorf("late event %s: %+v", r.Key, r)
		}
	}
	v, _ = e.client.Task(context.Background(), c.Task.ID)
	if v.Phase != state.PhaseTimedOut || v.Result != nil {
		t.Errorf("a late event changed the task: %s %+v", v.Phase, v.Result)
	}
}

func TestWrongTokenIs401(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	bad, _ := controlplane.NewClient(e.http.URL, "tok-zz9-bogus", controlplane.ClientOptions{Tries: 3})
	_, err := bad.Tasks(context.Background())
	if !errors.Is(err, controlplane.ErrUnauthorized) || strings.Contains(err.Error(), "tok-zz9-bogus") || strings.Contains(err.Error(), opToken) {
		t.Errorf("wrong token: %v", err)
	}
	resp, err := http.Get(e.http.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
}

func TestClaimsAreHealthAware(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	gui := e.submit("needs the app server", "gui")
	e.submit("anything", "any")
	if got := e.claim("ag-sick", "unavailable", 5); len(got) != 0 {
		t.Errorf("an unavailable agent got %d tasks", len(got))
	}
	// An available agent is online: the degraded one does not get the gui task.
	e.agent("ag-ok").Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "ag-ok", Health: api.Health{Grade: "available"}})
	got := e.claim("ag-meh", "degraded", 5)
	if len(got) != 1 || got[0].Task.Prefer != "any" {
		t.Fatalf("degraded agent got %+v", got)
	}
	if got := e.claim("ag-ok", "available", 5); len(got) != 1 || got[0].Task.ID != gui.ID {
		t.Errorf("available agent got %+v", got)
	}
}

func TestDegradedAgentGetsGuiTaskWhenNoBetterOneIsOnline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	e.submit("needs the app server", "gui")
	if got := e.claim("ag-meh", "degraded", 5); len(got) != 1 {
		t.Errorf("degraded agent alone got %d tasks", len(got))
	}
}

func TestLeaseLapsesWhenTheAgentGoesOffline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	e.submit("fix it", "")
	e.agent("ag-1").Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "ag-1"})
	c := e.claim("ag-1", "available", 1)[0]
	e.clk.advance(2 * time.Minute) // three intervals silent, lease expired
	agents, _ := e.client.Agents(context.Background())
	if len(agents) != 1 || agents[0].Online {
		t.Errorf("agents %+v", agents)
	}
	v, _ := e.client.Task(context.Background(), c.Task.ID)
	if v.Phase != state.PhaseQueued || v.Lease != nil {
		t.Fatalf("a claimed task whose lease lapsed: %s %+v", v.Phase, v.Lease)
	}
	if got := e.claim("ag-2", "available", 1); len(got) != 1 {
		t.Error("the requeued task was not claimed again")
	}
	// The first agent's events no longer count.
	res := e.send("ag-1", ev("k", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}))
	if res[0].Status != api.StatusRejected || res[0].Reason != api.ReasonLease {
		t.Errorf("stale lease: %+v", res[0])
	}
}

func TestCancelReachesTheAgentInItsHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	running := e.submit("running", "")
	c := e.claim("ag-1", "available", 1)[0]
	if c.Task.ID != running.ID {
		t.Fatalf("claimed %s", c.Task.ID)
	}
	queued := e.submit("never claimed", "")
	if v, err := e.client.CancelTask(context.Background(), queued.ID); err != nil || v.Phase != state.PhaseCancelled {
		t.Errorf("a queued task is cancelled at once: %v %s", err, v.Phase)
	}
	v, err := e.client.CancelTask(context.Background(), c.Task.ID)
	if err != nil || !v.CancelRequested || v.Phase.Terminal() {
		t.Fatalf("a running task is marked, not ended: %v %+v", err, v.Task())
	}
	resp, _ := e.agent("ag-1").Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "ag-1", Running: []api.RunningTask{{TaskID: c.Task.ID}}})
	if len(resp.Cancel) != 1 || resp.Cancel[0] != c.Task.ID {
		t.Errorf("heartbeat cancel list %v", resp.Cancel)
	}
	if _, err := e.client.CancelTask(context.Background(), queued.ID); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("cancelling a cancelled task: %v", err)
	}
}

func TestQueuedTaskExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	v := e.submit("nobody claims me", "")
	e.clk.advance(61 * time.Minute)
	if got := e.claim("ag-1", "available", 1); len(got) != 0 {
		t.Errorf("an expired task was claimed")
	}
	v, _ = e.client.Task(context.Background(), v.ID)
	if v.Phase != state.PhaseExpired {
		t.Errorf("phase %s", v.Phase)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	for _, req := range []api.CreateTaskRequest{{Prompt: " "}, {Prompt: "x", Prefer: "tty"}, {Prompt: "x", MaxAttempts: 99}} {
		_, err := e.client.CreateTask(context.Background(), req)
		var ae *controlplane.APIError
		if !errors.As(err, &ae) || ae.Status != 400 {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if _, err := e.client.Task(context.Background(), "t-nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing task: %v", err)
	}
	c := api.Claimed{Task: state.Task{ID: "t-nope"}}
	if r := e.send("ag", ev("k1", state.EventLog, c, state.LogEvent{})); r[0].Reason != api.ReasonUnknown {
		t.Errorf("unknown task: %+v", r)
	}
}

// statusOf is the status of a control plane's answer other than 2xx, else 0.
func statusOf(err error) int {
	var ae *controlplane.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// call makes one request with token tok, as a client that has no method
// for it would: a body other than 2xx is an *controlplane.APIError.
func (e *env) call(tok, method, path string, in, out any) error {
	e.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.http.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		return &controlplane.APIError{Status: resp.StatusCode, Message: eb.Error}
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
